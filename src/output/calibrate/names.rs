//! Names read from the input as the calibrated scenario writes them. A tool is named as its
//! agent names it (`web.search`, `github:create_issue`, `kb search`, `x/y`), and a scenario
//! names a tool with 1 to 64 letters, digits, `_` or `-`: each name is mapped by the
//! scenario's own rule ([`fit_name`], which providers' names share), and two that map to one
//! get distinct suffixes, first come first served. Every file name derived from a tool is
//! made from its mapped name, so none can leave `--out` or name another's file.

use std::collections::HashSet;

use crate::analysis::calibrate::Calibration;
use crate::engine::scenario::providers::{fit_name, good_name, MAX_NAME};

use super::doc::comment_text;

/// Each of `cal`'s tools' names in the scenario, in `cal.tools`' order.
pub fn tools(cal: &Calibration) -> Vec<String> {
    let said: Vec<&str> = cal.tools.iter().map(|t| t.name.as_str()).collect();
    mapped(&said, "tool")
}

/// `said` as scenario names, one each: a good name is kept where no earlier good name took it
/// (compared without case, so that no two files differ in case alone); every other is
/// [`fit_name`] of it (`fallback` if that is empty) with `-2`, `-3`, ... where that is taken.
pub fn mapped(said: &[&str], fallback: &str) -> Vec<String> {
    let mut taken: HashSet<String> = HashSet::new();
    let mut names: Vec<Option<String>> = said
        .iter()
        .map(|s| (good_name(s) && taken.insert(s.to_ascii_lowercase())).then(|| s.to_string()))
        .collect();
    for (name, s) in names.iter_mut().zip(said) {
        if name.is_some() {
            continue;
        }
        let base = match fit_name(s) {
            b if b.is_empty() => fallback.to_string(),
            b => b,
        };
        let mut next = base.clone();
        let mut k = 2;
        while !taken.insert(next.to_ascii_lowercase()) {
            let suffix = format!("-{k}");
            next = base.chars().take(MAX_NAME - suffix.len()).collect();
            next.push_str(&suffix);
            k += 1;
        }
        *name = Some(next);
    }
    names.into_iter().flatten().collect()
}

/// The most characters of an input's name a label or comment shows (calibration.json holds
/// the whole name).
pub const SHOWN_CHARS: usize = 120;

/// A name from the input as a label or a comment shows it: with its control characters and
/// line separators escaped (see [`comment_text`]), and cut after [`SHOWN_CHARS`] characters
/// (saying how long it is), so that a name of a megabyte is not drawn in every chart title.
pub fn shown(said: &str) -> String {
    let n = said.chars().count();
    if n <= SHOWN_CHARS {
        return comment_text(said);
    }
    let head: String = said.chars().take(SHOWN_CHARS).collect();
    format!("{}... ({n} characters)", comment_text(&head))
}

/// The tool `said`, written as `name`, as a label shows it: `web_search ("web.search")`, or
/// the name alone where it is unchanged.
pub fn tool_label(name: &str, said: &str) -> String {
    if name == said {
        name.to_string()
    } else {
        format!("{name} (\"{}\")", shown(said))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_outside_the_rule_are_mapped_and_collisions_get_suffixes() {
        let long = "a".repeat(70);
        let said = [
            "web_search",
            "web.search",
            "web search",
            "github:create_issue",
            "x/y",
            "",
            "Kb",
            "kb",
            long.as_str(),
            "ünï",
        ];
        let names = mapped(&said, "tool");
        assert_eq!(
            names,
            [
                "web_search".to_string(),
                "web_search-2".into(),
                "web_search-3".into(),
                "github_create_issue".into(),
                "x_y".into(),
                "tool".into(),
                "Kb".into(),
                "kb-2".into(),
                "a".repeat(64),
                "_n_".into(),
            ]
        );
        assert!(names.iter().all(|n| good_name(n)), "{names:?}");
        // The same names give the same mapping.
        assert_eq!(mapped(&said, "tool"), names);
    }

    #[test]
    fn a_suffix_keeps_a_long_name_within_the_rule() {
        let long = "b".repeat(64);
        let said = [long.as_str(), &"b".repeat(65)];
        let names = mapped(&said, "tool");
        assert_eq!(names[0], long);
        assert_eq!(names[1], format!("{}-2", "b".repeat(62)));
        assert!(good_name(&names[1]));
    }

    #[test]
    fn a_label_shows_the_name_as_the_input_said_it_on_one_line() {
        assert_eq!(tool_label("kb", "kb"), "kb");
        assert_eq!(
            tool_label("web_search", "web.search"),
            "web_search (\"web.search\")"
        );
        assert_eq!(tool_label("a_b", "a\nb"), "a_b (\"a\\nb\")");
        let long = "M".repeat(1_000_000);
        assert_eq!(
            shown(&long),
            format!("{}... (1000000 characters)", "M".repeat(SHOWN_CHARS))
        );
    }
}

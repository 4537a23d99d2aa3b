//! What a reader skipped or could not use, counted by reason. A reason is a fixed sentence
//! (`&'static str`), never text from the input: the reasons are a bounded set however many
//! distinct values an input holds. The value that made a reason (an unknown operation's name,
//! an unread column's) is kept once, the first seen, beside the place it was first seen.

use std::collections::BTreeMap;

/// The most characters of an input's value kept as a reason's example.
const EXAMPLE_CHARS: usize = 60;

/// What was skipped, by reason (in a stable order), with the first place each was seen.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    counts: BTreeMap<&'static str, (u64, String)>,
}

impl Tally {
    /// Counts one `reason`, seen `at` (a place such as `traces.json:17`).
    pub fn add(&mut self, reason: &'static str, at: impl FnOnce() -> String) {
        self.add_n(reason, 1, at);
    }

    /// Counts one `reason`, seen `at`, made by the input's value `example` (kept the first
    /// time only, escaped and cut short: see [`example`]).
    pub fn add_example(
        &mut self,
        reason: &'static str,
        at: impl FnOnce() -> String,
        example: impl FnOnce() -> String,
    ) {
        self.add_n(reason, 1, || {
            format!("{} ({})", at(), self::example(&example()))
        });
    }

    /// Counts `n` of `reason`.
    pub fn add_n(&mut self, reason: &'static str, n: u64, at: impl FnOnce() -> String) {
        if n == 0 {
            return;
        }
        let entry = self.counts.entry(reason).or_insert_with(|| (0, at()));
        entry.0 = entry.0.saturating_add(n);
    }

    /// Each reason, its count and where it was first seen.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64, &str)> {
        self.counts.iter().map(|(k, (n, at))| (*k, *n, at.as_str()))
    }

    /// The reason counted most often (the first in order among equals).
    pub fn most(&self) -> Option<(&'static str, u64, &str)> {
        self.iter().fold(None, |best, r| match best {
            Some(b) if b.1 >= r.1 => Some(b),
            _ => Some(r),
        })
    }

    /// Every count added up.
    pub fn total(&self) -> u64 {
        self.counts
            .values()
            .fold(0u64, |sum, (n, _)| sum.saturating_add(*n))
    }

    /// Adds another tally to this one.
    pub fn merge(&mut self, other: Tally) {
        for (k, (n, at)) in other.counts {
            self.add_n(k, n, || at);
        }
    }
}

/// An input's value as a reason's example: quoted, on one line (every control, line or
/// direction character written as `\u{…}`), at most [`EXAMPLE_CHARS`] characters then `…`.
pub(super) fn example(value: &str) -> String {
    let mut out = String::from("\"");
    for (i, c) in value.chars().enumerate() {
        if i == EXAMPLE_CHARS {
            out.push('…');
            break;
        }
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if invisible(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A character that is not shown as itself: a control, a line or paragraph separator, a
/// direction mark or override, a zero-width one, a byte-order mark.
fn invisible(c: char) -> bool {
    c.is_control()
        || matches!(c as u32,
            0x200B..=0x200F | 0x2028..=0x202E | 0x2060..=0x2069 | 0xFEFF | 0xFFF9..=0xFFFB)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_kept_once_beside_its_place_and_never_in_the_reason() {
        let mut t = Tally::default();
        for i in 0..1000 {
            t.add_example(
                "an operation that is neither",
                || format!("f.jsonl:{}", i + 1),
                || format!("op{i}"),
            );
        }
        let all: Vec<_> = t.iter().collect();
        assert_eq!(
            all,
            [("an operation that is neither", 1000, "f.jsonl:1 (\"op0\")")]
        );
    }

    #[test]
    fn an_example_is_one_line_and_short() {
        assert_eq!(
            example("a\nb\u{1b}[31m\u{202e}\"q\\"),
            "\"a\\u{a}b\\u{1b}[31m\\u{202e}\\\"q\\\\\""
        );
        let long = "é".repeat(100);
        let cut = example(&long);
        assert_eq!(cut.chars().count(), 60 + 3);
        assert!(cut.ends_with("…\""));
    }

    #[test]
    fn the_most_counted_reason_is_found_and_counts_saturate() {
        let mut t = Tally::default();
        t.add("b", || "x:1".into());
        t.add_n("a", u64::MAX, || "x:2".into());
        t.add("a", || "x:3".into());
        assert_eq!(t.most(), Some(("a", u64::MAX, "x:2")));
        assert_eq!(t.total(), u64::MAX);
    }
}

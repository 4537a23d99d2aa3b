//! `capsize examples`: the shipped example scenarios, built into the binary, so an install
//! without the repository (a wheel, `cargo install`, the container image) has something to
//! run. Lists them, or writes one out to start from.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args as ClapArgs;

use super::{out, Failure};
use crate::output::files::OutputSet;
use crate::output::report::escape;

/// The example scenarios: `scenarios/*.toml`, each by its file's stem (a test holds the list
/// to the folder).
pub const EXAMPLES: &[(&str, &str)] = &[
    ("adaptive", include_str!("../../scenarios/adaptive.toml")),
    (
        "adaptive-steady",
        include_str!("../../scenarios/adaptive-steady.toml"),
    ),
    ("agent", include_str!("../../scenarios/agent.toml")),
    ("cost", include_str!("../../scenarios/cost.toml")),
    ("fleet", include_str!("../../scenarios/fleet.toml")),
    (
        "hallucinated-fanout",
        include_str!("../../scenarios/hallucinated-fanout.toml"),
    ),
    ("incident", include_str!("../../scenarios/incident.toml")),
    (
        "multi-provider",
        include_str!("../../scenarios/multi-provider.toml"),
    ),
    (
        "research-agent",
        include_str!("../../scenarios/research-agent.toml"),
    ),
    (
        "stock-quotes",
        include_str!("../../scenarios/stock-quotes.toml"),
    ),
    ("tpm-burst", include_str!("../../scenarios/tpm-burst.toml")),
];

/// Flags of `capsize examples`.
#[derive(Debug, ClapArgs)]
pub struct ExamplesArgs {
    /// The example to write (without it: list them all).
    name: Option<String>,
    /// Where to write it: a file, or a folder to write NAME.toml into (default: NAME.toml
    /// here).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Replace a file that is already there.
    #[arg(long)]
    force: bool,
}

/// An example's description on one line, cut after about 100 characters (at a word).
fn description(text: &str) -> String {
    let table: toml::Table = toml::from_str(text).unwrap_or_default();
    let words = table
        .get("description")
        .and_then(toml::Value::as_str)
        .unwrap_or_default();
    let mut line = String::new();
    for word in words.split_whitespace() {
        if line.chars().count() + word.chars().count() > 100 {
            line.push_str(" ...");
            break;
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    line
}

/// `capsize examples [NAME] [--out PATH] [--force]`.
pub fn examples(args: ExamplesArgs) -> ExitCode {
    let Some(name) = args.name.as_deref().map(str::trim) else {
        let width = EXAMPLES.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
        let mut text =
            String::from("the example scenarios (capsize examples NAME writes NAME.toml here):\n");
        for (n, t) in EXAMPLES {
            text.push_str(&format!("  {n:width$}  {}\n", description(t)));
        }
        return out(&text);
    };
    let name = name.strip_suffix(".toml").unwrap_or(name);
    let Some((_, text)) = EXAMPLES.iter().find(|(n, _)| *n == name) else {
        let names: Vec<&str> = EXAMPLES.iter().map(|(n, _)| *n).collect();
        return Failure::bad_input(format!(
            "examples: no example {:?}: one of {}",
            escape::terminal(name),
            names.join(", ")
        ))
        .exit();
    };
    let file = format!("{name}.toml");
    let path = match args.out {
        Some(dir) if dir.is_dir() => dir.join(&file),
        Some(path) => path,
        None => PathBuf::from(&file),
    };
    if path.exists() && !args.force {
        return Failure::bad_input(format!(
            "examples: {} is already there: give --force to replace it, or --out elsewhere",
            escape::terminal(&path.display().to_string())
        ))
        .exit();
    }
    let mut outputs = OutputSet::new();
    outputs.output(&path, "--out");
    if let Err(e) = outputs.check() {
        return Failure::output(&e).exit();
    }
    outputs.put(&path, text.as_bytes().to_vec());
    if let Err(e) = outputs.commit() {
        return Failure::output(&e).exit();
    }
    out(&format!(
        "wrote {}: capsize run {} (or sweep, search, check it)\n",
        escape::terminal(&path.display().to_string()),
        escape::terminal(&path.display().to_string())
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_scenario_is_an_example_as_it_is_in_the_repository() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let mut shipped: Vec<(String, String)> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .map(|p| {
                let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
                (stem, std::fs::read_to_string(&p).unwrap())
            })
            .collect();
        shipped.sort();
        let built: Vec<(String, String)> = EXAMPLES
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect();
        assert_eq!(built, shipped, "EXAMPLES is scenarios/*.toml, in order");
        for (name, text) in EXAMPLES {
            let d = description(text);
            assert!(!d.is_empty() && d.len() <= 110, "{name}: {d:?}");
        }
    }
}

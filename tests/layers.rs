//! The layers of `src/` read one way: `cli → output → analysis → engine`, each reading only
//! what is to its right (and `fmt`, the number formatter, at the bottom beside the scheduler).
//! This test reads every source file and fails on a `crate::` path against that order, naming
//! the file, the line and the layer it reaches.

use std::path::{Path, PathBuf};

/// The layers, left to right: a file may read its own layer and those to its right.
const ORDER: [&str; 5] = ["cli", "output", "analysis", "engine", "fmt"];

fn rank(layer: &str) -> Option<usize> {
    ORDER.iter().position(|l| *l == layer)
}

/// The layer a file under `src/` belongs to: its first folder, or its own name (`fmt.rs`).
fn layer_of(relative: &Path) -> Option<&str> {
    let first = relative.components().next()?.as_os_str().to_str()?;
    rank(first.trim_end_matches(".rs")).map(|r| ORDER[r])
}

/// The layers code names through `crate::`, with the byte offset of each: `crate::engine::x`
/// and each member of `crate::{engine::x, output::y}` (over several lines too).
fn named_layers(code: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(found) = code[at..].find("crate::") {
        at += found + "crate::".len();
        let Some(group) = code[at..].strip_prefix('{') else {
            out.push((at, first_ident(&code[at..])));
            continue;
        };
        let (mut depth, mut start) = (0, 0);
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' | ',' if depth == 0 => {
                    let member = &group[start..i];
                    let lead = member.len() - member.trim_start().len();
                    out.push((at + 1 + start + lead, first_ident(member)));
                    if c == '}' {
                        break;
                    }
                    start = i + 1;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
    }
    out.retain(|(_, l)| !l.is_empty());
    out
}

fn first_ident(s: &str) -> String {
    s.trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// Every read against the order in `source` (a file of layer `layer`): `(line, layer read)`.
/// Comments are left out: only code reads.
fn violations(layer: &str, source: &str) -> Vec<(usize, String)> {
    let own = rank(layer).unwrap_or(0);
    let code: String = source
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    named_layers(&code)
        .into_iter()
        .filter(|(_, named)| rank(named).is_some_and(|r| r < own))
        .map(|(at, named)| (code[..at].matches('\n').count() + 1, named))
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn src_reads_cli_output_analysis_engine_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut found = Vec::new();
    let mut checked = 0;
    for path in &files {
        let relative = path.strip_prefix(&src).expect("under src/");
        let Some(layer) = layer_of(relative) else {
            continue;
        };
        checked += 1;
        let source = std::fs::read_to_string(path).expect("a readable source file");
        for (line, named) in violations(layer, &source) {
            found.push(format!(
                "src/{}:{line}: {layer} reads {named}",
                relative.display()
            ));
        }
    }
    assert!(
        checked > 60,
        "only {checked} files under src/ belong to a layer"
    );
    assert!(
        found.is_empty(),
        "imports against cli → output → analysis → engine:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_sees_reads_against_the_order() {
    assert_eq!(
        violations("engine", "use crate::output::report::escape;"),
        [(1, "output".to_string())]
    );
    assert_eq!(
        violations(
            "analysis",
            "use crate::{\n engine::sim, cli::x}; let f = crate::output::f; // crate::cli"
        ),
        [(2, "cli".to_string()), (2, "output".to_string())]
    );
    assert_eq!(
        violations("analysis", "use crate::{engine::{a, b}, output::c};"),
        [(1, "output".to_string())]
    );
    assert!(violations(
        "cli",
        "use crate::{output::a, analysis::b, engine::c, fmt::d};"
    )
    .is_empty());
    assert!(violations("fmt", "use crate::engine::x;").len() == 1);
    assert_eq!(layer_of(Path::new("engine/sim/mod.rs")), Some("engine"));
    assert_eq!(layer_of(Path::new("fmt.rs")), Some("fmt"));
    assert_eq!(layer_of(Path::new("lib.rs")), None);
}

//! The calibrated scenario read back before anything is written: its text parsed in memory by
//! the parser `capsize run` uses, with its empirical files' values inline (the values the
//! files will hold, read as a file's are), so nothing is staged to check it. A scenario that
//! does not pass is refused naming the input quantity its value came from (the comment
//! written beside it) or the `--set` that gave it, not a file that was never written.

use std::path::Path;

use crate::engine::scenario::{self, Scenario, ScenarioError};

use super::doc::Doc;
use super::scenario::Written;
use super::values::Files;

/// The text `written` is written as, and the scenario it is read as. `target` is where it
/// will be written (files a `--set` names are read from its folder); `inputs` names the
/// inputs in an error.
pub fn parse(written: &Written, target: &Path, inputs: &str) -> Result<(String, Scenario), String> {
    let text = written.doc.render();
    let mut inline = written.doc.clone();
    inline_files(&mut inline, &written.files);
    if let Err(e) = text.parse::<toml::Table>() {
        // The writer cannot write what TOML does not read; should it, say so plainly.
        let why = e.message().trim().replace('\n', " ");
        return Err(format!(
            "{inputs}: the calibrated scenario does not read back as TOML: {why}"
        ));
    }
    scenario::parse(&inline.render(), target, &[])
        .map(|s| (text, s))
        .map_err(|e| refusal(&written.doc, &e, inputs))
}

/// Every `file = NAME` of the document's values that names one of `files`, replaced by
/// `values_ms = [...]`: its values.
fn inline_files(doc: &mut Doc, files: &Files) {
    for t in &mut doc.tables {
        for e in &mut t.entries {
            if let Some(v) = &mut e.value {
                inline_value(v, files);
            }
            for (v, _) in &mut e.items {
                inline_value(v, files);
            }
        }
    }
}

fn inline_value(v: &mut toml::Value, files: &Files) {
    match v {
        toml::Value::Table(t) => {
            let named = t.get("file").and_then(toml::Value::as_str);
            if let Some(values) = named.and_then(|f| files.values(f)) {
                let values = values.iter().map(|x| toml::Value::Float(*x)).collect();
                t.remove("file");
                t.insert("values_ms".into(), toml::Value::Array(values));
            }
            t.iter_mut().for_each(|(_, v)| inline_value(v, files));
        }
        toml::Value::Array(a) => a.iter_mut().for_each(|v| inline_value(v, files)),
        _ => {}
    }
}

/// Why the scenario is refused, naming where its value came from.
fn refusal(doc: &Doc, e: &ScenarioError, inputs: &str) -> String {
    let Some(key) = &e.key else {
        return format!("{inputs}: the calibrated scenario: {}", e.message);
    };
    match doc.comment_at(key) {
        Some(c) if c.starts_with("given: ") => {
            format!("{}: {key}: {}", &c["given: ".len()..], e.message)
        }
        Some(c) => format!(
            "{inputs}: the calibrated {key} (written from: {c}): {}",
            e.message
        ),
        None => format!("{inputs}: the calibrated {key}: {}", e.message),
    }
}

//! The capacity report's "Through the incidents" section: for a provider with phases
//! (`[[provider.phases]]`), what each point of the sweep met in each phase (429s and errors
//! the provider sent), beside the queries that failed over the whole run.

use std::fmt::Write as _;

use serde_json::Value;

use crate::analysis::sweep::PointResult;
use crate::fmt::fmt_num;
use crate::output::report::escape::markdown;

/// Each provider's phases in `mean`: (label, its phases), the one provider first.
fn phase_lists(mean: &Value) -> Vec<(String, &Vec<Value>)> {
    let mut lists = Vec::new();
    if let Some(p) = mean.pointer("/provider/phases").and_then(Value::as_array) {
        lists.push((String::new(), p));
    }
    if let Some(named) = mean.get("providers").and_then(Value::as_object) {
        for (name, p) in named {
            if let Some(p) = p.get("phases").and_then(Value::as_array) {
                lists.push((format!("{} ", markdown(name)), p));
            }
        }
    }
    lists
}

fn when(phase: &Value) -> String {
    let s = |k: &str| phase.get(k).and_then(Value::as_f64);
    match (s("from_s"), s("to_s")) {
        (Some(from), Some(to)) => format!("{}-{} s", fmt_num(from), fmt_num(to)),
        (Some(from), None) => format!("from {} s", fmt_num(from)),
        _ => "?".into(),
    }
}

/// The section, if the scenario's providers have phases.
pub fn section(md: &mut String, points: &[PointResult], key_names: &[String]) {
    let Some(first) = points.first() else { return };
    let heads: Vec<String> = phase_lists(&first.mean)
        .into_iter()
        .flat_map(|(name, list)| list.iter().map(move |p| format!("{name}{}", when(p))))
        .collect();
    if heads.is_empty() {
        return;
    }
    let _ = writeln!(md, "\n## Through the incidents\n");
    let _ = writeln!(
        md,
        "What the provider sent each point in each phase, as 429s / errors, and the queries \
         that failed over the whole run.\n"
    );
    let _ = writeln!(
        md,
        "| {} | queries failed | {} |",
        key_names.join(" | "),
        heads.join(" | ")
    );
    let _ = writeln!(
        md,
        "|{}---:|{}",
        "---:|".repeat(key_names.len()),
        "---:|".repeat(heads.len())
    );
    for p in points {
        let vals: Vec<String> = p.point.values.iter().map(|(_, v)| v.to_string()).collect();
        let num = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64).map_or("".into(), fmt_num);
        let cells: Vec<String> = phase_lists(&p.mean)
            .into_iter()
            .flat_map(|(_, list)| list.iter())
            .map(|ph| format!("{} / {}", num(ph, "rate_limited"), num(ph, "errored")))
            .collect();
        let _ = writeln!(
            md,
            "| {} | {} | {} |",
            vals.join(" | "),
            num(&p.mean, "queries_failed"),
            cells.join(" | ")
        );
    }
}

//! The calibrated scenario read back by the parser `capsize run` uses gives the fitted model's
//! values, whatever the names the input gave (newlines, quotes, `"""`, `#`, `[`, `=`, any
//! Unicode): names are text in values and comments, never structure.

use std::path::Path;

use capsize_mock::Latency;
use proptest::prelude::*;

use crate::analysis::calibrate::fit::Family;
use crate::analysis::calibrate::{self, Calibration, Collector, Fitted, View};
use crate::engine::observed::{Kind, Span};
use crate::engine::scenario::{self, Scenario, Target, TurnPlacement};
use crate::output::calibrate::names;
use crate::output::calibrate::values::{file_text, sig};
use crate::output::calibrate::verify;

use super::scenario as written_scenario;

const T0: i64 = 1_760_000_000_000_000_000;
const MS: i64 = 1_000_000;

/// 60 queries in 4 sessions: a model turn, two tool calls, a model turn; the model's headers
/// give 500 RPM and 90,000 TPM. `bimodal`: the first tool's times are two clusters (an
/// empirical fit, written to a file).
fn calibration(provider: &str, model: &str, tools: [&str; 2], bimodal: bool) -> Calibration {
    let mut c = Collector::default();
    let mut t = T0;
    for q in 0..60u32 {
        let trace = u128::from(q) + 1;
        let mut spans = Vec::new();
        let mut at = t;
        let model_call = |id: u64, at: i64, k: i64| {
            let mut s = Span::new(
                Kind::Model {
                    provider: provider.into(),
                    model: model.into(),
                },
                at,
            );
            (s.trace, s.id, s.parent) = (trace, id, 1);
            s.end_ns = Some(at + (700 + 37 * ((k * 7 + i64::from(q)) % 23)) * MS);
            s.input_tokens = Some(2000 + (k as u64 * 131 + u64::from(q) * 17) % 900);
            s.max_tokens = Some(500);
            s.limits = (Some(500.0), Some(90_000.0));
            s
        };
        let first = model_call(2, at, 0);
        at = first.end_ns.unwrap_or(at);
        spans.push(first);
        let mut end = at;
        for (k, name) in tools.iter().enumerate() {
            let mut s = Span::new(
                Kind::Tool {
                    name: name.to_string(),
                    provider: None,
                },
                at,
            );
            (s.trace, s.id, s.parent) = (trace, 3 + k as u64, 1);
            let ms = match (bimodal, k) {
                (true, 0) => [10, 900][q as usize % 2] + q as i64 % 7,
                _ => 100 + 13 * ((i64::from(q) * (k as i64 + 3)) % 37),
            };
            s.end_ns = Some(at + ms * MS);
            end = end.max(at + ms * MS);
            spans.push(s);
        }
        let last = model_call(5, end, 1);
        let done = last.end_ns.unwrap_or(end);
        spans.push(last);
        let mut root = Span::new(Kind::Agent, t);
        (root.trace, root.id) = (trace, 1);
        root.end_ns = Some(done + MS);
        root.session = Some(format!("s{}", q % 4));
        c.add(root, View::ALL);
        for s in spans {
            c.add(s, View::ALL);
        }
        t = done + (2000 + i64::from(q % 5) * 300) * MS;
    }
    c.finish();
    calibrate::calibrate(c, Vec::new())
}

/// A fitted latency as the scenario must give it back: each parameter to 4 digits.
fn expected(f: &Fitted) -> Latency {
    match &f.fit.family {
        Family::Constant(c) => Latency::Constant(sig(*c)),
        Family::Uniform(a, b) => Latency::Uniform(sig(*a), sig(*b)),
        Family::Normal(m, s) => Latency::Normal(sig(*m), sig(*s)),
        Family::LogNormal(mu, s) => Latency::LogNormal(sig(*mu), sig(*s)),
        Family::Exponential(m) => Latency::Exponential(sig(*m)),
        Family::Empirical(v) => Latency::Empirical(v.iter().map(|x| sig(*x)).collect()),
    }
}

/// `cal` written and read back in memory, with its text.
fn read_back(cal: &Calibration, name: &str) -> (String, Scenario) {
    let written = written_scenario(cal, name, "traces.jsonl").unwrap();
    verify::parse(&written, Path::new("out/scenario.toml"), "traces.jsonl").unwrap()
}

/// Asserts that `s` carries `cal`'s fitted values.
fn assert_fitted(cal: &Calibration, s: &Scenario, name: &str) {
    let p = cal.provider.as_ref().unwrap();
    assert_eq!(s.name, name);
    assert_eq!(s.providers.len(), 1);
    let config = &s.providers[0].config;
    assert_eq!(s.providers[0].name, p.name);
    assert_eq!((config.rpm, config.tpm), (Some(500.0), Some(90_000.0)));
    assert_eq!(config.latency, expected(p.latency.as_ref().unwrap()));
    let w = &s.workload;
    assert_eq!(w.rounds, 1);
    let turn = w.model_turn.as_ref().unwrap();
    assert_eq!(turn.at, TurnPlacement::Around);
    let prompt = p.input.as_ref().unwrap().observed.mean.round() as u64;
    assert_eq!((turn.tokens, turn.max_tokens), (prompt + 500, Some(500)));
    let tool_names = names::tools(cal);
    assert_eq!(w.tools.len(), 2);
    for ((tool, fit), name) in w.tools.iter().zip(&cal.tools).zip(&tool_names) {
        assert_eq!(&tool.name, name);
        assert!(scenario::providers::good_name(&tool.name), "{}", tool.name);
        assert_eq!(tool.weight, fit.calls as f64);
        assert_eq!(tool.target, Target::Unlimited);
        assert_eq!(tool.latency, Some(expected(fit.latency.as_ref().unwrap())));
    }
    assert_ne!(w.tools[0].name, w.tools[1].name);
}

/// A name as hostile as an input can make one.
fn hostile() -> impl Strategy<Value = String> {
    let parts = prop_oneof![
        any::<char>().prop_map(String::from),
        prop::sample::select(vec![
            "\n",
            "\r",
            "\t",
            "\u{2028}",
            "\u{2029}",
            "\0",
            "\u{1b}",
            "\u{7f}",
            "\u{85}",
            "\u{202e}",
            "\"",
            "\"\"\"",
            "'''",
            "#",
            "[",
            "]",
            "=",
            ".",
            "\\",
            "/",
            " ",
            "{",
            "\nrpm = 7\nerror_rate = 0.9\n#",
            "\n[workload]\nrounds = 9\n",
        ])
        .prop_map(String::from),
        "[a-z_]{1,8}",
    ];
    prop::collection::vec(parts, 0..12).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn hostile_names_are_text_and_every_value_reads_back_as_fitted(
        provider in hostile(),
        model in hostile(),
        a in hostile(),
        b in hostile(),
    ) {
        // Two tools the input names alike are one tool.
        prop_assume!(a != b);
        let cal = calibration(&provider, &model, [&a, &b], false);
        let (text, s) = read_back(&cal, "calibrated");
        assert_fitted(&cal, &s, "calibrated");
        // Nothing but the keys the writer puts: no name added one.
        let table: toml::Table = text.parse().unwrap();
        let keys = |v: &toml::Value| -> Vec<String> {
            v.as_table().unwrap().keys().cloned().collect()
        };
        let p = cal.provider.as_ref().unwrap();
        prop_assert_eq!(keys(&table["providers"]), vec![p.name.clone()]);
        prop_assert_eq!(
            keys(&table["providers"][&p.name]),
            ["latency", "rpm", "tpm"].map(String::from).to_vec()
        );
        prop_assert_eq!(
            table.keys().cloned().collect::<Vec<_>>(),
            ["name", "description", "seed", "providers", "workload", "scheduler"]
                .map(String::from).to_vec()
        );
        // Every line is one line: no name's control character or separator is in the text.
        prop_assert!(
            !text.chars().any(|c| c != '\n' && (c.is_control() || c == '\u{2028}')),
            "{}", text
        );
        // And the same traces with plain names give the same scenario, but for the names.
        let plain = calibration("openai", "gpt-4o", ["kb_search", "crm_lookup"], false);
        let (_, mut expected) = read_back(&plain, "calibrated");
        expected.providers[0].name = s.providers[0].name.clone();
        for (t, name) in expected.workload.tools.iter_mut().zip(&s.workload.tools) {
            t.name = name.name.clone();
        }
        prop_assert_eq!(&s, &expected);
    }
}

#[test]
fn the_files_beside_it_read_back_from_disk_as_they_were_checked_in_memory() {
    let cal = calibration("open ai", "gpt\n4o", ["x/y", "../z"], true);
    let written = written_scenario(&cal, "calibrated", "traces.jsonl").unwrap();
    let dir = std::env::temp_dir().join(format!("capsize-cal-disk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let target = dir.join("scenario.toml");
    let (text, in_memory) = verify::parse(&written, &target, "traces.jsonl").unwrap();
    std::fs::write(&target, &text).unwrap();
    let files: Vec<&str> = written.files.iter().map(|(n, _)| n).collect();
    assert_eq!(files, ["tool-x_y-latency.csv"]);
    for (name, values) in written.files.iter() {
        std::fs::write(dir.join(name), file_text(values)).unwrap();
    }
    let from_disk = scenario::load(&target, &[]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(from_disk.unwrap(), in_memory);
    assert_fitted(&cal, &in_memory, "calibrated");
    assert!(matches!(
        in_memory.workload.tools[0].latency,
        Some(Latency::Empirical(_))
    ));
    assert_eq!(in_memory.providers[0].name, "open_ai");
    assert!(
        text.contains("# open ai model gpt\\n4o: 120 calls seen"),
        "{text}"
    );
    assert!(
        text.contains("# as the input names it: x/y;") && text.contains("name = \"x_y\""),
        "{text}"
    );
}

#[test]
fn a_scenario_that_does_not_read_back_is_refused_naming_where_its_value_came_from() {
    let cal = calibration("openai", "gpt-4o", ["kb", "crm"], false);
    let mut written = written_scenario(&cal, "calibrated", "traces.jsonl").unwrap();
    let target = Path::new("out/scenario.toml");
    let w = written.doc.table_mut(&["workload"]).unwrap();
    let e = w.entries.iter_mut().find(|e| e.key == ["duration_s"]);
    e.unwrap().value = Some(toml::Value::Float(1e12));
    assert_eq!(
        verify::parse(&written, target, "traces.jsonl").unwrap_err(),
        "traces.jsonl: the calibrated workload.duration_s (written from: as long as the input: \
         its first query's start to its last one's): must be a number above 0 and at most \
         31536000, got 1000000000000"
    );
    let mut written = written_scenario(&cal, "calibrated", "traces.jsonl").unwrap();
    written.doc.apply_set("workload.rounds=0").unwrap();
    assert_eq!(
        verify::parse(&written, target, "traces.jsonl").unwrap_err(),
        "--set workload.rounds=0: workload.rounds: must be from 1 to 1000, got 0"
    );
}

//! What `capsize calibrate` writes from hostile input (the third robustness round's W2, U1,
//! U2, W4, P2): names with line breaks are text, never keys; tool names as agents name them
//! are mapped, not refused; values beyond the scenario's bounds are written at them and said;
//! a turn then tools with no answer is written as turns before rounds; and a signal while it
//! writes leaves nothing in --out. Every scenario written loads as `capsize run` loads it.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // polls a real process on the real clock

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use capsize::api::scenario::{load, Scenario};
use common::calib::{calibrate, report, span_json};
use common::stderr;
use common::temp::Temp;
use serde_json::{json, Value};

/// OTLP JSON attributes: string values, and integers where they parse as one.
fn attrs(pairs: &[(&str, &str)]) -> String {
    let one = |(k, v): &(&str, &str)| match v.parse::<i64>() {
        Ok(n) => json!({"key": k, "value": {"intValue": n.to_string()}}),
        Err(_) => json!({"key": k, "value": {"stringValue": v}}),
    };
    pairs
        .iter()
        .map(one)
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// `queries` queries in 4 sessions, one export a line: a model turn (`provider`, `model`),
/// one call of each tool, and an answering turn unless `answer` is false. `ms(q, k)` is the
/// time of tool `k` in query `q`.
fn traces(
    queries: u32,
    provider: &str,
    model: &str,
    tools: &[&str],
    answer: bool,
    ms: impl Fn(u32, usize) -> u64,
) -> String {
    let chat = attrs(&[
        ("gen_ai.operation.name", "chat"),
        ("gen_ai.provider.name", provider),
        ("gen_ai.request.model", model),
        ("gen_ai.usage.input_tokens", "1500"),
    ]);
    let mut text = String::new();
    let mut t = 0u64;
    for q in 0..queries {
        let trace = q + 1;
        let turn = 700 + u64::from(q * 37 % 400);
        let mut spans = vec![span_json(trace, 2, 1, t, t + turn, &chat)];
        let mut end = t + turn;
        for (k, tool) in tools.iter().enumerate() {
            let a = attrs(&[
                ("gen_ai.operation.name", "execute_tool"),
                ("gen_ai.tool.name", tool),
            ]);
            let d = ms(q, k);
            spans.push(span_json(
                trace,
                3 + k as u32,
                1,
                t + turn,
                t + turn + d,
                &a,
            ));
            end = end.max(t + turn + d);
        }
        if answer {
            let last = 3 + tools.len() as u32;
            spans.push(span_json(trace, last, 1, end, end + turn, &chat));
            end += turn;
        }
        let session = format!("s{}", q % 4);
        let root = attrs(&[
            ("gen_ai.operation.name", "invoke_agent"),
            ("session.id", &session),
        ]);
        spans.insert(0, span_json(trace, 1, 0, t, end + 1, &root));
        text.push_str(&format!(
            "{{\"resourceSpans\":[{{\"scopeSpans\":[{{\"spans\":[{}]}}]}}]}}\n",
            spans.join(",")
        ));
        t = end + 2000 + u64::from(q % 7) * 500;
    }
    text
}

/// Tool times spread over 100..600 ms.
fn spread(q: u32, k: usize) -> u64 {
    100 + u64::from(q * (k as u32 * 7 + 11) % 500)
}

/// The text's comments, joined as one line (a long comment is wrapped over several).
fn comments(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("# "))
        .collect();
    lines.join(" ")
}

/// Calibrates `inputs` into `t`'s `out`, which must succeed, and loads the scenario written.
fn calibrated(t: &Temp, inputs: &[&Path], extra: &[&str]) -> (PathBuf, String, Scenario) {
    let out = t.path("out");
    let o = calibrate(inputs, &out, extra);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(out.join("scenario.toml")).unwrap();
    let scenario = load(&out.join("scenario.toml"), &[]).unwrap_or_else(|e| panic!("{e}\n{text}"));
    (out, text, scenario)
}

/// Refuses `inputs` with exit 2 and `message`, writing nothing.
fn refused(t: &Temp, inputs: &[&Path], extra: &[&str], message: &str) {
    let out = t.path("refused");
    let o = calibrate(inputs, &out, extra);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(stderr(&o).trim(), message);
    assert!(!out.exists());
}

#[test]
fn a_name_with_line_breaks_is_text_in_the_scenario_never_a_key() {
    let t = Temp::new("calhostile", "inject");
    let model = "gpt-4o\nrpm = 7\nerror_rate = 0.9\n#";
    let provider = "open\nai\n[workload]\nrounds = 9";
    let input = t.write(
        "t.jsonl",
        &traces(80, provider, model, &["kb_search", "crm"], true, spread),
    );
    let (out, text, s) = calibrated(&t, &[&input], &["--no-check"]);
    let table: toml::Table = text.parse().unwrap();
    let p = table["providers"].as_table().unwrap();
    assert_eq!(
        p.keys().collect::<Vec<_>>(),
        ["open_ai__workload__rounds___9"]
    );
    let keys: Vec<&String> = p["open_ai__workload__rounds___9"]
        .as_table()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["latency"]);
    assert_eq!(s.workload.rounds, 1);
    let config = &s.providers[0].config;
    assert_eq!((config.rpm, config.error_rate), (None, 0.0));
    assert!(
        comments(&text).contains(
            "open\\nai\\n[workload]\\nrounds = 9 model gpt-4o\\nrpm = 7\\nerror_rate = 0.9\\n#: 160"
        ),
        "{text}"
    );
    let r = report(&out);
    assert_eq!(r["provider"]["model"], model);
    assert_eq!(r["provider"]["as_input"], provider);

    // The same from a log's quoted cell, and from exec's calls.jsonl.
    let log = t.write(
        "log.csv",
        &("timestamp,model,latency_ms\n".to_string()
            + &(0..50)
                .map(|i| format!("{},\"gpt\nrpm = 3\n#\",{}\n", 1_700_000_000 + i, 400 + i))
                .collect::<String>()),
    );
    let t2 = Temp::new("calhostile", "inject-log");
    let (_, text, s) = calibrated(&t2, &[&log], &["--no-check"]);
    assert_eq!(s.providers[0].config.rpm, None, "{text}");
    assert!(
        comments(&text).contains("model gpt\\nrpm = 3\\n#: 50 calls seen"),
        "{text}"
    );
    let calls = t.write(
        "calls.jsonl",
        &(0..50)
            .map(|i| {
                json!({"capsize_call": 1, "unix_ns": 1_700_000_000_000_000_000u64 + i * 1_000_000_000,
                    "provider": "llm", "route": "model", "model": "m\nmax_in_flight = 1\n#",
                    "status": 200, "latency_ms": 500.0 + i as f64, "input_tokens": 100})
                .to_string()
                    + "\n"
            })
            .collect::<String>(),
    );
    let t3 = Temp::new("calhostile", "inject-calls");
    let (_, text, s) = calibrated(&t3, &[&calls], &["--no-check"]);
    assert_eq!(s.providers[0].config.max_in_flight, None, "{text}");
    assert!(
        comments(&text).contains("llm model m\\nmax_in_flight = 1\\n#: 50 calls seen"),
        "{text}"
    );
}

#[test]
fn tool_names_as_agents_name_them_are_mapped_and_kept() {
    let t = Temp::new("calhostile", "tools");
    let long = "t".repeat(65);
    let tools = [
        "web.search",
        "github:create_issue",
        "kb search",
        "x/y",
        long.as_str(),
        "web_search",
    ];
    // x/y takes 10 or 900 ms: an empirical fit, written to a file named after it.
    let ms = |q: u32, k: usize| match k {
        3 => [10, 900][q as usize % 2] + u64::from(q % 5),
        _ => spread(q, k),
    };
    let input = t.write(
        "t.jsonl",
        &traces(150, "openai", "gpt-4o", &tools, true, ms),
    );
    let (out, text, s) = calibrated(&t, &[&input], &["--no-check"]);
    let r = report(&out);
    let mapped: Vec<(&str, &str)> = r["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["as_input"].as_str().unwrap(), t["name"].as_str().unwrap()))
        .collect();
    let mut expected = vec![
        ("github:create_issue", "github_create_issue".to_string()),
        ("kb search", "kb_search".into()),
        (long.as_str(), "t".repeat(64)),
        ("web.search", "web_search-2".into()),
        ("web_search", "web_search".into()),
        ("x/y", "x_y".into()),
    ];
    expected.sort();
    let mut mapped: Vec<(&str, String)> = mapped
        .into_iter()
        .map(|(a, n)| (a, n.to_string()))
        .collect();
    mapped.sort();
    assert_eq!(mapped, expected);
    let mut names: Vec<&str> = s.workload.tools.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    let mut want: Vec<&str> = expected.iter().map(|(_, n)| n.as_str()).collect();
    want.sort_unstable();
    assert_eq!(names, want);
    assert!(out.join("tool-x_y-latency.csv").is_file());
    assert!(text.contains("# as the input names it: x/y;"), "{text}");
    let assumed = r["assumed"].to_string();
    assert!(
        assumed.contains("web_search-2 (\\\"web.search\\\")"),
        "{assumed}"
    );
    // Nothing was written outside --out.
    let mut outside: Vec<String> = std::fs::read_dir(t.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    outside.sort();
    assert_eq!(outside, ["out", "t.jsonl"]);
}

/// A CSV log of `rows` rows `timestamp,model,latency_ms,EXTRA` from `row(i)`.
fn log(t: &Temp, name: &str, header: &str, rows: u32, row: impl Fn(u32) -> String) -> PathBuf {
    let body: String = (0..rows).map(|i| row(i) + "\n").collect();
    t.write(name, &format!("{header}\n{body}"))
}

/// calibration.json's "assumed" lines.
fn assumed(out: &Path) -> Vec<String> {
    report(out)["assumed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn values_beyond_the_scenarios_bounds_are_written_at_them_and_said() {
    let t = Temp::new("calhostile", "century");
    let century = log(&t, "c.csv", "timestamp,model,latency_ms", 40, |i| {
        format!("{},gpt,500", 1_000_000_000u64 + u64::from(i) * 100_000_000)
    });
    let (out, _, s) = calibrated(&t, &[&century], &["--no-check"]);
    let year = Duration::from_secs(31_536_000);
    assert_eq!(
        s.workload.stop,
        capsize::api::scenario::Stop::Duration(year)
    );
    assert!(
        assumed(&out).contains(
            &"workload.duration_s: duration_s = 3,900,000,000 is outside 1..31,536,000 (a year): 31,536,000 written"
                .to_string()
        ),
        "{:?}",
        assumed(&out)
    );

    let t = Temp::new("calhostile", "tokens");
    let tokens = log(
        &t,
        "t.csv",
        "timestamp,model,latency_ms,input_tokens,output_tokens",
        100,
        |i| {
            format!(
                "{},gpt,500,{},{}",
                1_700_000_000 + i,
                10u64.pow(15),
                10u64.pow(15)
            )
        },
    );
    let (out, _, s) = calibrated(&t, &[&tokens], &["--no-check"]);
    assert_eq!(
        s.workload.tokens_per_call,
        capsize::api::scenario::Count::Fixed(1_000_000_000_000)
    );
    assert!(assumed(&out)
        .iter()
        .any(|a| a.starts_with("workload.tokens_per_call: tokens = 2e15")));

    let t = Temp::new("calhostile", "ttft");
    let ttft = log(
        &t,
        "f.csv",
        "timestamp,model,latency_ms,ttft_ms,output_tokens",
        100,
        // 9e12 ms: read (1e300 is no time at all, skipped by the reader), past the year
        // a scenario allows.
        |i| format!("{},gpt,500,9e12,100", 1_700_000_000 + i),
    );
    let (out, text, s) = calibrated(&t, &[&ttft], &["--no-check"]);
    let generation = s.providers[0].config.generation.as_ref().unwrap();
    assert_eq!(
        generation.ttft,
        capsize_mock::Latency::Constant(31_536_000_000.0),
        "{text}"
    );
    assert!(assumed(&out)
        .iter()
        .any(|a| a.starts_with("providers.llm.ttft: ms = ")));

    // Limits from calls.jsonl: a number too large or too small for a limit is written at its
    // bound, one that is no limit at all is left out.
    for (rpm, written) in [(1e300, Some(1e12)), (1e-300, Some(1.0)), (-5.0, None)] {
        let t = Temp::new("calhostile", "limits");
        let calls: String = (0..50u64)
            .map(|i| {
                json!({"capsize_call": 1, "unix_ns": 1_700_000_000_000_000_000u64 + i * 1_000_000_000,
                    "provider": "llm", "route": "model", "model": "m", "status": 200,
                    "latency_ms": 500.0, "input_tokens": 100, "rpm_limit": rpm})
                .to_string()
                    + "\n"
            })
            .collect();
        let input = t.write("calls.jsonl", &calls);
        let (_, text, s) = calibrated(&t, &[&input], &["--no-check"]);
        assert_eq!(s.providers[0].config.rpm, written, "{rpm}: {text}");
    }
}

#[test]
fn a_bad_name_or_set_is_refused_naming_its_flag_and_nothing_is_written() {
    let t = Temp::new("calhostile", "refused");
    let input = log(&t, "l.csv", "timestamp,model,latency_ms", 50, |i| {
        format!("{},gpt,{}", 1_700_000_000 + i, 400 + i)
    });
    refused(
        &t,
        &[&input],
        &["--name", "a/b"],
        "capsize: --name: names the output folder: no slashes or leading dot, got \"a/b\"",
    );
    refused(
        &t,
        &[&input],
        &["--set", "workload.rounds=0"],
        "capsize: --set workload.rounds=0: workload.rounds: must be from 1 to 1000, got 0",
    );
}

#[test]
fn a_turn_then_tools_and_no_answer_is_written_as_turns_before_rounds() {
    let t = Temp::new("calhostile", "before");
    let tools = ["send_email", "send_email", "send_email"];
    let input = t.write(
        "t.jsonl",
        &traces(200, "openai", "gpt-4o", &tools, false, spread),
    );
    let (out, text, s) = calibrated(&t, &[&input], &[]);
    let turn = s.workload.model_turn.as_ref().unwrap();
    assert_eq!(format!("{:?}", turn.at), "Before", "{text}");
    assert_eq!(s.workload.rounds, 1);
    assert_eq!(
        s.workload.calls_per_query,
        capsize::api::scenario::Count::Fixed(3)
    );
    assert!(!text.contains("no tool calls seen"), "{text}");
    let r = report(&out);
    assert_eq!(r["structure"]["shape"], "other");
    let row = |what: &str| -> Value {
        r["check"]
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["figure"] == what)
            .unwrap_or_else(|| panic!("no {what}: {r}"))
            .clone()
    };
    let p50 = row("query p50");
    assert_eq!(p50["met"], true, "{p50}");
    let requests = row("openai requests per query");
    assert_eq!(
        (
            requests["observed"].as_f64(),
            requests["predicted"].as_f64()
        ),
        (Some(1.0), Some(1.0))
    );
}

/// Starts calibrate on `input`, sends `signal` once its staging folder is in `out`, and
/// returns its exit code and stderr.
fn interrupted(input: &Path, out: &Path, signal: i32) -> (Option<i32>, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_capsize"))
        .args([
            "calibrate",
            input.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--no-check",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let staging = |out: &Path| {
        std::fs::read_dir(out).is_ok_and(|d| {
            d.flatten().any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(".capsize-staging-")
            })
        })
    };
    let start = Instant::now();
    while !staging(out) {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no staging folder in {out:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // SAFETY: kill only sends a signal to the capsize process this test started.
    unsafe {
        libc::kill(child.id() as i32, signal);
    }
    let o = child.wait_with_output().unwrap();
    (o.status.code(), stderr(&o))
}

#[test]
fn a_signal_while_calibrate_writes_leaves_nothing_in_out() {
    let t = Temp::new("calhostile", "signal");
    // 400 tools: 800 charts, written for a second or more.
    let tools: Vec<String> = (0..400).map(|i| format!("tool_{i}")).collect();
    let names: Vec<&str> = tools.iter().map(String::as_str).collect();
    let text = traces(2, "openai", "gpt-4o", &names, false, spread);
    let input = t.write("t.jsonl", &text);
    for (signal, code, name) in [
        (libc::SIGINT, 130, "SIGINT"),
        (libc::SIGTERM, 143, "SIGTERM"),
    ] {
        let out = t.path(&format!("out-{name}"));
        // The signal is sent once the staging folder is seen; a commit that finishes first
        // (a loaded machine, the tools folded to 50 charts) is tried again, a few times.
        let (exit, err) = (0..5)
            .map(|_| {
                let _ = std::fs::remove_dir_all(&out);
                interrupted(&input, &out, signal)
            })
            .find(|(exit, _)| *exit != Some(0))
            .expect("the signal reached calibrate while it wrote, in one of five tries");
        assert_eq!(exit, Some(code), "{err}");
        assert!(
            err.contains(&format!("interrupted by {name}: nothing written")),
            "{err}"
        );
        // The folder the commit created is gone with its staging folder.
        assert!(
            !out.exists(),
            "{:?}",
            std::fs::read_dir(&out).map(|d| d.count())
        );
    }
}

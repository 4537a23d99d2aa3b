//! `capsize calibrate`'s readers on hostile input (the third robustness round: W5, W6, X1, H1,
//! H2, U3): spans given twice, latencies that are no time, text where digits belong, deep and
//! cyclic traces, names without number, protobuf frames that do not decode, a stray byte that
//! is not UTF-8. Each is read (what could not be used counted by one reason of a bounded set)
//! or refused in one line, never a panic, in bounded time. Last, a property: generated traces
//! and logs of any structure and any names, in each format.
//!
//! The property runs `PROPTEST_CASES` cases (default 64): `PROPTEST_CASES=1000 cargo test
//! --release --test calibrate_hostile`.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // child processes, real clock

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::calib::{calibrate, report, span_json};
use common::otel::{to_proto, traces, Agent};
use common::stderr;
use common::temp::Temp;
use serde_json::Value;

#[path = "calibrate_hostile/gen.rs"]
mod hostile;

/// What a child run of `capsize ARGS` gave: its exit code (`None`: stopped at `limit`, or by a
/// signal), stderr, and how long it took.
fn limited(args: &[&str], limit: Duration) -> (Option<i32>, String, Duration) {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_capsize"));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe. 4 GiB of address space: memory is bounded.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 4 << 30,
                rlim_max: 4 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("the capsize binary runs");
    let mut err = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut err, &mut s).ok();
        s
    });
    let started = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status.code();
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    (code, reader.join().unwrap_or_default(), started.elapsed())
}

/// The count of the skip reason starting with `what` in calibration.json (0: none).
fn skipped(out: &Path, what: &str) -> u64 {
    report(out)["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["what"].as_str().unwrap().starts_with(what))
        .map(|s| s["count"].as_u64().unwrap())
        .sum()
}

/// Exit 2, one line holding each of `says`, nothing written.
fn refused(o: &std::process::Output, out: &Path, says: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    for s in says {
        assert!(err.contains(s), "{s:?} not in {err}");
    }
    assert!(!out.exists());
}

/// One OTLP JSON request line of these spans.
fn line(spans: &[String]) -> String {
    format!(
        r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{}]}}]}}]}}"#,
        spans.join(",")
    ) + "\n"
}

fn op(name: &str) -> String {
    format!(r#"{{"key":"gen_ai.operation.name","value":{{"stringValue":"{name}"}}}}"#)
}

fn chat() -> String {
    op("chat")
        + r#",{"key":"gen_ai.provider.name","value":{"stringValue":"openai"}},{"key":"gen_ai.usage.input_tokens","value":{"intValue":"900"}}"#
}

fn tool(name: &str) -> String {
    op("execute_tool")
        + &format!(r#",{{"key":"gen_ai.tool.name","value":{{"stringValue":"{name}"}}}}"#)
}

#[test]
fn spans_given_twice_or_resent_are_counted_once() {
    // W5: the same file twice gave 6 requests a query (true 3) and 5 rounds; a batch in five
    // re-sent gave 3.6. Now each span counts once, whatever the spelling of the path.
    let t = Temp::new("hostile", "twice");
    let text = traces(
        &Agent {
            duration_s: 600.0,
            ..Agent::default()
        },
        1,
    );
    let input = t.write("t.jsonl", &text);
    let resent: String = text
        .lines()
        .enumerate()
        .flat_map(|(i, l)| std::iter::repeat_n(l, if i % 5 == 0 { 2 } else { 1 }))
        .map(|l| format!("{l}\n"))
        .collect();
    let resent = t.write("resent.jsonl", &resent);
    let spans = text.matches("\"spanId\"").count() as u64;
    // The same spans in another file (its lines in another order: other bytes).
    let reordered: String = text.lines().rev().map(|l| format!("{l}\n")).collect();
    let reordered = t.write("reordered.jsonl", &reordered);
    let fitted = |out: &Path| {
        let r = report(out);
        (
            r["fits"].clone(),
            r["structure"].clone(),
            r["queries"].clone(),
        )
    };
    let (once, twice, again) = (t.path("once"), t.path("twice"), t.path("again"));
    for (inputs, out) in [
        (vec![input.as_path()], &once),
        (vec![input.as_path(), reordered.as_path()], &twice),
        (vec![resent.as_path()], &again),
    ] {
        let o = calibrate(&inputs, out, &["--no-check"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    assert_eq!(fitted(&twice), fitted(&once));
    assert_eq!(fitted(&again), fitted(&once));
    assert_eq!(skipped(&once, "a span given again"), 0);
    assert_eq!(skipped(&twice, "a span given again"), spans);
    // One file under two names, or a copy of its bytes, is refused before anything is read.
    let dotted = t.dir().join(".").join("t.jsonl");
    let copy = t.write("copy.jsonl", &text);
    for (second, words) in [(&dotted, "the same file as"), (&copy, "the same bytes as")] {
        let out = t.path("refused");
        let o = calibrate(&[input.as_path(), second.as_path()], &out, &["--no-check"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let e = stderr(&o);
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(
            e.contains(words) && e.contains("an input given twice"),
            "{e}"
        );
        assert!(!out.exists(), "nothing written");
    }
    let lines = text.lines().count() as u64;
    let resent_spans: u64 = text
        .lines()
        .step_by(5)
        .map(|l| l.matches("\"spanId\"").count() as u64)
        .sum();
    assert!(lines > 5 && resent_spans > 0);
    assert_eq!(skipped(&again, "a span given again"), resent_spans);
}

#[test]
fn a_latency_that_is_no_time_is_counted_by_kind_and_a_log_left_empty_is_refused() {
    // W6: negative, NaN and overflowing latencies vanished; 1 s was then assumed, or 50 of 100
    // rows fitted as if they were all.
    let t = Temp::new("hostile", "latency");
    let rows = |f: &dyn Fn(usize) -> String| {
        let body: String = (0..100)
            .map(|i| format!("{},gpt,{}\n", 1_700_000_000 + i, f(i)))
            .collect();
        format!("timestamp,model,latency_ms\n{body}")
    };
    let neg = t.write("neg.csv", &rows(&|i| format!("-{}", 500 + i)));
    let o = calibrate(&[&neg], &t.path("neg"), &[]);
    refused(&o, &t.path("neg"), &["neg.csv: no model or tool call could be read as request log (CSV): 100 skipped, a row whose latency is negative: not read (first at neg.csv:2)"]);
    let nan = t.write("nan.csv", &rows(&|i| ["NaN", "inf", "-inf"][i % 3].into()));
    let o = calibrate(&[&nan], &t.path("nan"), &[]);
    refused(
        &o,
        &t.path("nan"),
        &[
            "nan.csv",
            "100 skipped, a row whose latency is not a number",
        ],
    );
    let half = t.write(
        "half.csv",
        &rows(&|i| {
            if i % 2 == 1 {
                "9e15".into()
            } else {
                "500".into()
            }
        }),
    );
    let out = t.path("half");
    let o = calibrate(&[&half], &out, &["--no-check"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(skipped(&out, "a row whose latency is too large"), 50);
    let fits = report(&out)["fits"].to_string();
    assert!(fits.contains("\"n\":50"), "{fits}");
    // exec's calls: the same kinds, counted.
    let calls = t.write(
        "calls.jsonl",
        &(0..10)
            .map(|i| format!("{{\"capsize_call\":1,\"unix_ns\":{},\"provider\":\"llm\",\"route\":\"model\",\"status\":200,\"latency_ms\":{}}}\n", 1_700_000_000_000_000_000i64 + i * 1_000_000_000, if i < 3 { "-1" } else { "400" }))
            .collect::<String>(),
    );
    let out = t.path("calls");
    let o = calibrate(&[&calls], &out, &["--no-check"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(skipped(&out, "a call whose latency_ms is negative"), 3);
}

#[test]
fn text_where_digits_belong_is_no_date_and_a_version_not_read_is_said() {
    // X1: `+aé00` panicked (a byte slice inside 'é'); 30 February and `capsize_call: 2` were
    // read.
    let t = Temp::new("hostile", "dates");
    let log = t.write(
        "t.csv",
        "timestamp,model,latency_ms\n2023-11-16 18:15:46+a\u{e9}00,gpt,500\n2023-02-30 10:00:00,gpt,500\n\u{e9}023-11-16 18:15:46,gpt,500\n",
    );
    let out = t.path("out");
    let o = calibrate(&[&log], &out, &[]);
    refused(&o, &out, &["t.csv: no model or tool call could be read as request log (CSV): 3 skipped, a row whose timestamp cannot be read (first at t.csv:2 (\"2023-11-16 18:15:46+a\u{e9}00\"))"]);
    let calls = t.write(
        "calls.jsonl",
        "{\"capsize_call\":2,\"unix_ns\":1700000000000000000,\"provider\":\"llm\",\"route\":\"model\",\"status\":200}\n",
    );
    let o = calibrate(&[&calls], &out, &[]);
    refused(
        &o,
        &out,
        &[
            "calls.jsonl",
            "a line of another version of exec's calls (capsize_call is not 1)",
            "(\"2\")",
        ],
    );
}

/// A trace whose 200,000 spans would each have walked their ancestors (two queries: the big
/// one and one beside it), as a file.
fn deep(t: &Temp, name: &str, cycle: bool) -> std::path::PathBuf {
    let n = 200_000u32;
    let mut text = String::new();
    let mut spans = vec![
        span_json(1, 1, 0, 0, 10_000, &op("invoke_agent")),
        span_json(1, 2, 1, 0, 1_000, &chat()),
        span_json(1, 3, 1, 1_000, 9_000, &tool("kb")),
        span_json(1, 4, 1, 9_000, 10_000, &chat()),
    ];
    if cycle {
        // Spans 5 and 6 each other's parent, every other span under 5.
        spans.push(span_json(1, 5, 6, 1_000, 2_000, &op("x")));
        spans.push(span_json(1, 6, 5, 1_000, 2_000, &op("y")));
    }
    for i in 0..n {
        // A chain under the tool (each the parent of the next), or a fan under the cycle.
        let parent = if cycle {
            5
        } else if i == 0 {
            3
        } else {
            10 + i - 1
        };
        spans.push(span_json(1, 10 + i, parent, 1_001, 8_999, &op("chat")));
        if spans.len() == 1_000 {
            text.push_str(&line(&spans));
            spans.clear();
        }
    }
    spans.push(span_json(2, 1, 0, 60_000, 61_000, &op("invoke_agent")));
    spans.push(span_json(2, 2, 1, 60_000, 60_300, &chat()));
    spans.push(span_json(2, 3, 1, 60_300, 60_600, &tool("kb")));
    spans.push(span_json(2, 4, 1, 60_600, 61_000, &chat()));
    text.push_str(&line(&spans));
    t.write(name, &text)
}

#[test]
fn a_deep_chain_and_a_parent_cycle_are_assembled_in_linear_time() {
    // H1: 50,000 spans took 141 s (chain) and 151 s (cycle): quadratic; 200,000 would take
    // about 40 minutes. Each now finishes well within a minute (in a test build too).
    let t = Temp::new("hostile", "deep");
    for cycle in [false, true] {
        let input = deep(&t, if cycle { "cycle.jsonl" } else { "chain.jsonl" }, cycle);
        let out = t.path(if cycle { "o-cycle" } else { "o-chain" });
        let args = [
            "calibrate",
            input.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--no-check",
        ];
        let (code, err, took) = limited(&args, Duration::from_secs(60));
        assert_eq!(code, Some(0), "cycle {cycle}: {err} after {took:?}");
        let r = report(&out);
        assert_eq!(r["queries"], 2);
        // One round of one tool between two turns: the chain is nested inside the tool,
        // the cycle (and what hangs from it) is placed nowhere.
        assert_eq!(r["structure"]["shape"], "around");
        assert_eq!(r["structure"]["rounds"], 1);
        let cyclic = skipped(&out, "a span on or under a parent cycle");
        assert_eq!(cyclic, if cycle { 200_002 } else { 0 });
    }
}

#[test]
fn outputs_stay_bounded_however_many_names_an_input_holds() {
    // H2: 2,000 tool names gave 4,008 files (201 MB); 200,000 unknown operation names gave
    // 200,000 skip reasons in each report (57-68 MB).
    let t = Temp::new("hostile", "names");
    let mut text = String::new();
    for q in 0..200u32 {
        let at = u64::from(q) * 10_000;
        let mut spans = vec![
            span_json(q + 1, 1, 0, at, at + 5_000, &op("invoke_agent")),
            span_json(q + 1, 2, 1, at, at + 1_000, &chat()),
        ];
        for k in 0..10u32 {
            let d = 100 + u64::from((q * 7 + k * 13) % 500);
            spans.push(span_json(
                q + 1,
                3 + k,
                1,
                at + 1_000,
                at + 1_000 + d,
                &tool(&format!("tool_{}", q * 10 + k)),
            ));
        }
        // And 100 operations capsize does not know, each named differently.
        for k in 0..100u32 {
            spans.push(span_json(
                q + 1,
                100 + k,
                1,
                at,
                at + 1,
                &op(&format!("op{q}-{k}-{}", "x".repeat(200))),
            ));
        }
        text.push_str(&line(&spans));
    }
    let input = t.write("names.jsonl", &text);
    let out = t.path("out");
    let o = calibrate(&[&input], &out, &["--no-check"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let scenario = std::fs::read_to_string(out.join("scenario.toml")).unwrap();
    let tools = scenario.matches("{ name = \"").count();
    assert_eq!(tools, 51, "50 tools and the rest folded");
    assert!(scenario.contains("other_tools"), "{scenario}");
    assert_eq!(skipped(&out, "a call to a tool past the 50"), 2_000 - 50);
    let files = std::fs::read_dir(&out).unwrap().count();
    assert!(files <= 2 * 60 + 10, "{files} files");
    assert_eq!(
        skipped(&out, "a gen_ai.operation.name that is neither"),
        20_000
    );
    let json = std::fs::metadata(out.join("calibration.json"))
        .unwrap()
        .len();
    assert!(json < 200_000, "calibration.json {json} bytes");
}

#[test]
fn one_json_document_past_256_mib_is_refused_naming_the_cap() {
    let t = Temp::new("hostile", "doc");
    let path = t.path("big.json");
    // A document whose first line is cut: then the whole file is one document. The rest is a
    // hole, read as zeros: no disk used.
    std::fs::write(&path, "{\"resourceSpans\": [\n").unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len((256 << 20) + 10).unwrap();
    let out = t.path("out");
    let o = calibrate(&[&path], &out, &[]);
    refused(
        &o,
        &out,
        &["big.json: one OTLP JSON document of more than 268435456 bytes (256 MiB)"],
    );
}

#[test]
fn a_bad_frame_a_stray_byte_and_a_cut_document_are_each_named_for_what_they_are() {
    // U3: each of these said "invalid tag value: 0".
    let t = Temp::new("hostile", "u3");
    let good = to_proto(&traces(
        &Agent {
            duration_s: 300.0,
            ..Agent::default()
        },
        1,
    ));
    let mut bytes = [0, 0, 0, 3, 0xff, 0xff, 0xff].to_vec();
    bytes.extend(&good);
    let input = t.path("bad-first.otlp");
    std::fs::write(&input, &bytes).unwrap();
    let out = t.path("o1");
    let o = calibrate(&[&input], &out, &["--no-check"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        skipped(&out, "a message that is not an OTLP trace request"),
        1
    );
    let zeros = t.path("zeros.otlp");
    std::fs::write(&zeros, [0u8; 20]).unwrap();
    let o = calibrate(&[&zeros], &out.with_extension("z"), &[]);
    refused(
        &o,
        &out.with_extension("z"),
        &["5 skipped, an empty message (a length prefix of 0)"],
    );
    let latin1 = t.write(
        "latin1.csv",
        "timestamp,model,latency_ms\n1700000000,gpt\u{e9},500\n",
    );
    std::fs::write(
        &latin1,
        b"timestamp,model,latency_ms\n1700000000,gpt\xe9,500\n",
    )
    .unwrap();
    let o = calibrate(&[&latin1], &t.path("o3"), &[]);
    refused(
        &o,
        &t.path("o3"),
        &["as request log (CSV): 1 skipped, a row that is not UTF-8 (first at latin1.csv:2)"],
    );
    let doc = serde_json::to_string_pretty(
        &serde_json::from_str::<Value>(traces(&Agent::default(), 1).lines().next().unwrap())
            .unwrap(),
    )
    .unwrap();
    let cut = t.write("cut.json", &doc[..doc.len() / 2]);
    let o = calibrate(&[&cut], &t.path("o4"), &[]);
    refused(
        &o,
        &t.path("o4"),
        &["truncated: the file ends inside its JSON document"],
    );
}

#[test]
fn generated_traces_and_logs_are_read_or_refused_in_one_line_in_bounded_time() {
    hostile::property(&|input: &Path, out: &Path| {
        let args = [
            "calibrate",
            input.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--no-check",
        ];
        limited(&args, Duration::from_secs(60))
    });
}

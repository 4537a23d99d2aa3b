//! Pins `capsize run --timeseries` from the outside: timeseries.csv's rows for scenarios small
//! enough to work out by hand, its sums against summary.json, its determinism, and the flag's
//! errors. Every test writes into its own temp folder.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

mod common;
use common::temp::Temp;

/// One session, three queries of two parallel calls, one permit, 400 ms per call, no 429s: calls
/// run back to back from 0 to 2.4 s, the second of each pair queued while the first is served.
const BACK_TO_BACK: &str = r#"name = "ts"
seed = 1

[provider]
rpm = 600
tpm = 100000
latency = { dist = "constant", ms = 400 }

[workload]
sessions = 1
queries = 3
calls_per_query = 2
tokens_per_call = 10

[scheduler]
max_concurrency = 1
headroom = 0.7
"#;

/// Three calls of 100 ms one after the other against 2 RPM (a sliding minute) with no client
/// limiter: the third, at 0.2 s, is refused with 429 and retried after the minute, at 60 s.
const REFUSED: &str = r#"name = "ts429"
seed = 1

[provider]
rpm = 2
tpm = 100000
latency = { dist = "constant", ms = 100 }

[workload]
sessions = 1
queries = 3
calls_per_query = 1
tokens_per_call = 10

[scheduler]
max_concurrency = 1
rate_limit = false
"#;

const HEADER: &str = "t_s,bin_s,requests,charged,rate_limited,tokens,completed,failed,cancelled,\
in_flight_mean,queue_len_mean,concurrency_limit_mean,limiter_balance,call_p50_ms,call_p95_ms,\
call_p99_ms";

/// Runs `capsize run <scenario> <extra>... --out <out>`.
fn run(scenario: &Path, extra: &[&str], out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_capsize"))
        .arg("run")
        .arg(scenario)
        .args(extra)
        .arg("--out")
        .arg(out)
        .output()
        .expect("the capsize binary runs")
}

/// Runs `text` with --timeseries into `<temp>/<name>` and returns timeseries.csv and
/// summary.json.
fn timeseries(t: &Temp, name: &str, text: &str) -> (String, Value) {
    let scenario = t.write(&format!("{name}.toml"), text);
    let out = t.path(name);
    let o = run(&scenario, &["--timeseries"], &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("timeseries.csv}"), "{stdout}");
    let csv = std::fs::read_to_string(out.join("timeseries.csv")).expect("timeseries.csv");
    let summary = std::fs::read_to_string(out.join("summary.json")).expect("summary.json");
    (
        csv,
        serde_json::from_str(&summary).expect("summary.json is JSON"),
    )
}

/// The sum of column `name` over the rows.
fn column_sum(csv: &str, name: &str) -> u64 {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let i = header.iter().position(|h| *h == name).expect("the column");
    lines
        .map(|l| {
            l.split(',')
                .nth(i)
                .unwrap_or_default()
                .parse::<u64>()
                .unwrap()
        })
        .sum()
}

#[test]
fn back_to_back_calls_give_rows_worked_out_by_hand() {
    let t = Temp::new("timeseries", "by_hand");
    let (csv, _) = timeseries(&t, "a", BACK_TO_BACK);
    // Sent at 0, 0.4, 0.8 | 1.2, 1.6 | 2.0; ended at 0.4, 0.8 | 1.2, 1.6 | 2.0, 2.4. One call
    // always holds the permit; the second of a pair waits 0-0.4, 0.8-1.2 and 1.6-2.0 s: 0.6
    // of the first second, 0.6 of the next, none of the last 0.4 s. Latencies 400 and 800 ms
    // in every bin, to 2 significant digits (the highest value of their HDR bucket).
    let expected = format!(
        "{HEADER}\n\
         0,1,3,3,0,30,2,0,0,1.000,0.600,,,401.407,802.815,802.815\n\
         1,1,2,2,0,20,2,0,0,1.000,0.600,,,401.407,802.815,802.815\n\
         2,1,1,1,0,10,2,0,0,1.000,0.000,,,401.407,802.815,802.815\n"
    );
    assert_eq!(csv, expected);
}

/// 60 RPM at headroom 1 through the client's own bucket (1 request a second, a burst of 1),
/// two queries of two parallel calls of 500 ms.
const BUCKET: &str = r#"name = "tsbucket"
seed = 1

[provider]
rpm = 60
latency = { dist = "constant", ms = 500 }

[workload]
sessions = 1
queries = 2
calls_per_query = 2
tokens_per_call = 10

[scheduler]
max_concurrency = 2
headroom = 1.0
rate_limit = true
"#;

#[test]
fn the_limiter_balance_is_what_each_bins_last_call_end_left() {
    let t = Temp::new("timeseries", "bucket");
    let (csv, _) = timeseries(&t, "c", BUCKET);
    // t=0: the first call takes the one request (0), the second owes one (-1) and goes at 1 s.
    // 0.5: the first ends: -1 + 0.5 = -0.5. 1.5: the second ends: 0.5. The next query then
    // owes two (-1.5): its calls go at 2 and 3 s and end at 2.5 (-0.5) and 3.5 (0.5).
    let balances: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(12).unwrap())
        .collect();
    assert_eq!(balances, ["-0.500", "0.500", "-0.500", "0.500"], "{csv}");
    // Reading the balance changes nothing of the run: the same summary.json without the flag.
    let with = std::fs::read(t.path("c").join("summary.json")).unwrap();
    let out = t.path("without");
    let o = run(&t.path("c.toml"), &[], &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::read(out.join("summary.json")).unwrap() == with);
}

#[test]
fn a_429_lands_in_its_second_and_the_retry_a_minute_later() {
    let t = Temp::new("timeseries", "refused");
    let (csv, summary) = timeseries(&t, "b", REFUSED);
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows[0], HEADER);
    // 0-60.1 s: 61 bins.
    assert_eq!(rows.len(), 1 + 61, "{csv}");
    assert_eq!(
        rows[1],
        "0,1,3,2,1,20,2,0,0,1.000,0.000,,,100.351,100.351,100.351"
    );
    // The refused call holds its permit while it backs off; nothing is sent meanwhile.
    for (s, row) in rows[2..61].iter().enumerate() {
        assert_eq!(*row, format!("{},1,0,0,0,0,0,0,0,1.000,0.000,,,,,", s + 1));
    }
    assert!(
        rows[61].starts_with("60,1,1,1,0,10,1,0,0,1.000,0.000,,,"),
        "{}",
        rows[61]
    );
    // The columns add up to what the provider counted.
    let provider = &summary["provider"];
    assert_eq!(
        column_sum(&csv, "requests"),
        provider["received"].as_u64().unwrap()
    );
    assert_eq!(
        column_sum(&csv, "rate_limited"),
        provider["rate_limited"].as_u64().unwrap()
    );
    assert_eq!(column_sum(&csv, "completed"), 3);
}

#[test]
fn the_requests_column_adds_up_to_the_provider_received() {
    let t = Temp::new("timeseries", "sums");
    let (csv, summary) = timeseries(&t, "a", BACK_TO_BACK);
    assert_eq!(
        column_sum(&csv, "requests"),
        summary["provider"]["received"].as_u64().unwrap()
    );
    assert_eq!(column_sum(&csv, "requests"), 6);
}

#[test]
fn the_same_seed_writes_the_same_bytes() {
    let t = Temp::new("timeseries", "determinism");
    let (first, _) = timeseries(&t, "one", REFUSED);
    let (second, _) = timeseries(&t, "two", REFUSED);
    assert_eq!(first, second);
}

#[test]
fn without_the_flag_no_timeseries_is_written() {
    let t = Temp::new("timeseries", "absent");
    let scenario = t.write("a.toml", BACK_TO_BACK);
    let out = t.path("a");
    let o = run(&scenario, &[], &out);
    assert!(o.status.success());
    assert!(out.join("summary.json").exists());
    assert!(!out.join("timeseries.csv").exists());
    // Not a terminal: no live view, no escape codes, nothing on stderr.
    assert_eq!(String::from_utf8_lossy(&o.stderr), "");
}

#[test]
fn a_value_for_the_flag_is_a_one_line_error() {
    let t = Temp::new("timeseries", "bad_flag");
    let scenario = t.write("a.toml", BACK_TO_BACK);
    let out = t.path("a");
    let o = run(&scenario, &["--timeseries=yes"], &out);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("capsize: ") && stderr.contains("--timeseries"),
        "{stderr}"
    );
    assert!(!out.exists());
}

//! Incidents in scenarios (`[[provider.phases]]`): one test body on both arms (virtual time,
//! and real time against the mock over HTTP) sees an outage exactly where the phase puts it;
//! a limit cut in half brings 429s to a client sized for the provider's own limit, and only
//! during the cut; bad phases are refused before anything runs, naming the key.

mod common;

use std::path::Path;
use std::sync::Mutex;

use common::temp::Temp;

use capsize::api::scenario::{parse, Scenario};
use capsize::api::sim::{self, RealtimeOptions};
use capsize::api::summary::Summary;

fn scenario(toml: &str) -> Result<Scenario, String> {
    parse(toml, Path::new("test.toml"), &[]).map_err(|e| e.to_string())
}

/// The real-time arm alone on the machine: a virtual run beside it would skew its clock.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const OUTAGE: &str = r#"
name = "outage"
seed = 1
[provider]
rpm = 6000
latency = { dist = "constant", ms = 100 }
[[provider.phases]]
from_s = 9.5
to_s = 19.5
outage = "503"
[workload]
mode = "open"
arrival = "constant"
arrival_rate = 1
duration_s = 30
calls_per_query = 1
tokens_per_call = 10
[scheduler]
max_concurrency = 4
retry = { max_retries = 0 }
"#;

fn outage_body(realtime: Option<f64>) {
    let s = scenario(OUTAGE).unwrap();
    let out = match realtime {
        None => sim::run(&s),
        Some(f) => sim::run_realtime(
            &s,
            &RealtimeOptions {
                time_scale: f,
                target: None,
                fleet_redis: None,
                single_run: true,
                replica: None,
                announce: None,
            },
        ),
    }
    .unwrap();
    let sum = Summary::new(&s, &out);
    // One call a second from 0 s: those of 10..19 s meet the outage, none other does.
    assert_eq!(sum.queries_failed, 10, "{realtime:?}");
    let p = &sum.provider;
    assert_eq!((p.counters.received, p.counters.served), (30, 20));
    assert_eq!(p.counters.tokens_charged, 200, "an outage charges nothing");
    assert_eq!(p.phases.len(), 1);
    let ph = &p.phases[0];
    assert_eq!((ph.from_s, ph.to_s), (9.5, Some(19.5)));
    assert_eq!((ph.counters.received, ph.counters.errored), (10, 10));
}

#[test]
fn an_outage_fails_exactly_the_calls_of_its_phase_in_virtual_time() {
    let _one = ONE_AT_A_TIME.lock();
    outage_body(None);
}

#[test]
fn an_outage_fails_exactly_the_calls_of_its_phase_in_real_time() {
    let _one = ONE_AT_A_TIME.lock();
    // 30 s of model time in 3 s; the phase's edges are half a second from any call.
    outage_body(Some(10.0));
}

#[test]
fn a_limit_cut_in_half_brings_429s_only_while_it_lasts() {
    let _one = ONE_AT_A_TIME.lock();
    let s = scenario(
        r#"
name = "cut"
seed = 3
[provider]
rpm = 120
window = "sliding"
latency = { dist = "constant", ms = 200 }
[[provider.phases]]
from_s = 300
to_s = 600
rpm = 60
[workload]
mode = "open"
arrival = "constant"
arrival_rate = 1.5
duration_s = 900
calls_per_query = 1
tokens_per_call = 10
[scheduler]
max_concurrency = 8
headroom = 0.9
retry = { max_retries = 0 }
"#,
    )
    .unwrap();
    let sum = Summary::new(&s, &sim::run(&s).unwrap());
    let (all, cut) = (&sum.provider.counters, &sum.provider.phases[0].counters);
    // 90 a minute arrive, within the client's 108 (120 x 0.9) and over the cut's 60: for the
    // five minutes of the cut the sliding window admits 60 a minute and refuses the other 30
    // (no retries), and nothing is refused before or after.
    assert_eq!(
        (cut.received, cut.served, cut.rate_limited),
        (450, 300, 150)
    );
    assert_eq!(all.rate_limited, cut.rate_limited, "429s only in the phase");
    assert_eq!(all.received, 1350);
}

#[test]
fn a_baseline_with_phases_is_a_baseline_check_accepts_and_a_sweep_tables_them() {
    let t = Temp::new("incidents", "baseline");
    let swept = format!("{OUTAGE}\n[sweep]\n\"scheduler.max_concurrency\" = [2, 4]\n");
    let scenario = t.write("outage.toml", &swept);
    let (s, base) = (scenario.to_str().unwrap(), t.path("base.json"));
    let base = base.to_str().unwrap();
    let o = common::capsize(&["baseline", s, "--out", base]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let o = common::capsize(&[
        "check",
        s,
        "--baseline",
        base,
        "--out",
        t.path("check").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let out = t.path("sweep");
    let o = common::capsize(&["sweep", s, "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let table = md
        .split("## Through the incidents")
        .nth(1)
        .expect("the section")
        .to_string();
    assert!(
        table.contains("| max_concurrency | queries failed | 9.5-19.5 s |"),
        "{table}"
    );
    assert!(table.contains("| 2 | 10 | 0 / 10 |"), "{table}");
    assert!(table.contains("| 4 | 10 | 0 / 10 |"), "{table}");
}

#[test]
fn bad_phases_are_one_line_naming_the_key() {
    let with = |phases: &str| OUTAGE.replace("outage = \"503\"\n", phases);
    let cases = [
        (
            OUTAGE.replace("from_s = 9.5\nto_s = 19.5", "at_s = 30"),
            "provider.phases[0]: starts at 30 s, when the run is over (workload.duration_s = 30 s)",
        ),
        (
            OUTAGE
                .replace(
                    "[[provider.phases]]",
                    "[[provider.phases]] # a comment\nat_s = 1\n[[provider.phases]] # another",
                )
                .replace("outage = \"503\"", "rpm = \"many\""),
            "test.toml:12:7: provider.phases[1].rpm: invalid type",
        ),
        (
            OUTAGE
                .replace("duration_s = 30", "duration_s = 60\nstop_at_s = 15")
                .replace("from_s = 9.5\nto_s = 19.5", "at_s = 20"),
            "provider.phases[0]: starts at 20 s, when the run is over (workload.stop_at_s = 15 s)",
        ),
        (
            with("rpm = 0\n"),
            "provider.phases[0].rpm: must be a number in [1",
        ),
        (
            with("latency = { dist = \"constant\" }\n"),
            "provider.phases[0].latency: missing field `ms`",
        ),
        (
            OUTAGE
                .replace("[provider]", "[providers.llm]")
                .replace("[[provider.phases]]", "[[providers.llm.phases]]")
                .replace("outage = \"503\"", "tpm = -1"),
            "providers.llm.phases[0].tpm: must be a number",
        ),
    ];
    for (toml, want) in cases {
        let err = scenario(&toml).expect_err(want);
        assert!(err.contains(want), "want {want:?} in: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

//! `[provider] clock_from` under `capsize exec`, in real time: the agent starts after the mock,
//! and the provider's fixed minute counts from the mock's start or from the agent's first
//! request, as the scenario says.

#![allow(clippy::disallowed_methods)] // a real agent on the real clock

mod common;
use common::capsize;
use common::temp::Temp;

/// The agent: waits 2 s, sends three requests one after another and writes what each got
/// (200, or the refusal's Retry-After) into the file it is given.
const AGENT: &str = r#"
import os, sys, time, urllib.error, urllib.request
time.sleep(2)
def post():
    req = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=b'{"model":"m","messages":[{"role":"user","content":"hi"}]}',
        headers={"content-type": "application/json"},
    )
    try:
        urllib.request.urlopen(req).read()
        return "200"
    except urllib.error.HTTPError as e:
        return e.headers.get("retry-after")
open(sys.argv[1], "w").write(" ".join(post() for _ in range(3)))
"#;

/// What the agent's three requests got against 2 requests a minute in fixed minutes counted
/// from `clock_from`.
fn three_requests(clock_from: &str) -> Vec<String> {
    let t = Temp::new("exec-clock", clock_from);
    let scenario = t.write(
        "s.toml",
        &format!(
            "name = \"clock\"\n[provider]\nrpm = 2\nwindow = \"fixed\"\nretry_after = \"auto\"\n\
             latency = {{ dist = \"constant\", ms = 5 }}\nclock_from = \"{clock_from}\"\n"
        ),
    );
    let seen = t.path("seen.txt");
    let out = capsize(&[
        "exec",
        scenario.to_str().unwrap(),
        "--out",
        t.path("out").to_str().unwrap(),
        "--",
        "python3",
        "-c",
        AGENT,
        seen.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&seen).expect("the agent wrote what it got");
    text.split(' ').map(str::to_string).collect()
}

#[test]
fn the_fixed_minute_counts_from_the_agents_first_request_where_the_scenario_says() {
    // From the mock's start, the minute ends 58 s or less after the agent's first request,
    // which came 2 s in; from that first request, 60 s after it (whole seconds, rounded up).
    let seen = three_requests("start");
    assert_eq!(seen[..2], ["200", "200"]);
    let wait: u64 = seen[2].parse().expect("a Retry-After in seconds");
    assert!((1..=58).contains(&wait), "{seen:?}");
    assert_eq!(three_requests("first_request"), ["200", "200", "60"]);
}

//! `capsize sweep` and `capsize plan` from the outside: deterministic outputs whatever the
//! number of jobs, repeats with confidence intervals, the research-agent recommendation, and
//! bad input refused in one line with exit 2 and nothing written.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::capsize;
use common::temp::Temp;

const AGENT: &str = "scenarios/research-agent.toml";

fn sweep(out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["sweep", AGENT, "--out", out.to_str().expect("UTF-8 path")];
    args.extend_from_slice(extra);
    let o = capsize(&args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// Asserts that each of `files` has the same bytes in folders `a` and `b`.
fn same_files(a: &Path, b: &Path, files: &[&str], why: &str) {
    for file in files {
        let bytes =
            |d: &Path| std::fs::read(d.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(bytes(a) == bytes(b), "{file}: {why}");
    }
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn outputs_do_not_depend_on_jobs_and_recommend_the_articles_point() {
    let t = Temp::new("sweep", "jobs");
    let (one, two) = (t.path("one"), t.path("two"));
    let q = ["--set", "workload.queries=300"];
    let out = sweep(&one, &[&q[..], &["--jobs", "1"]].concat());
    sweep(&two, &[&q[..], &["--jobs", "2"]].concat());
    same_files(
        &one,
        &two,
        &[
            "sweep.csv",
            "report.md",
            "report.html",
            "throughput.svg",
            "latency.png",
        ],
        "differs between --jobs 1 and 2",
    );
    let csv = read(one.join("sweep.csv"));
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 5 * 4, "a header and 20 points");
    assert!(
        lines[0].starts_with("scheduler.max_concurrency,scheduler.headroom,seed,queries_per_s,")
    );
    assert!(lines[1].starts_with("1,0.5,"), "{}", lines[1]);
    // Every point has its own seed.
    let seeds: std::collections::BTreeSet<&str> = lines[1..]
        .iter()
        .map(|l| l.split(',').nth(2).unwrap_or(""))
        .collect();
    assert_eq!(seeds.len(), 20);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("max_concurrency = 4 at headroom = 0.7"),
        "{stdout}"
    );
    let report = read(one.join("report.md"));
    assert!(
        report.contains("| Queries at 70 % headroom | 420 / 8 | 52.5 queries/min |"),
        "{report}"
    );
    for chart in [
        "latency",
        "throughput",
        "rate_limited",
        "latency_distribution",
        "rpm_over_time",
    ] {
        for ext in ["svg", "png"] {
            assert!(one.join(format!("{chart}.{ext}")).exists(), "{chart}.{ext}");
        }
    }
    assert!(
        read(one.join("report.html")).contains("<svg"),
        "charts are inlined"
    );
}

#[test]
fn repeats_report_means_with_intervals() {
    let t = Temp::new("sweep", "repeats");
    let out = t.path("out");
    sweep(
        &out,
        &[
            "--set",
            "workload.queries=50",
            "--sweep",
            "scheduler.max_concurrency=2,4",
            "--sweep",
            "scheduler.headroom=0.7",
            "--repeats",
            "3",
        ],
    );
    let csv = read(out.join("sweep.csv"));
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    assert!(
        header.contains(&"seeds") && header.contains(&"query_p95_ms_ci95"),
        "{header:?}"
    );
    let ci = header
        .iter()
        .position(|h| *h == "query_p95_ms_ci95")
        .unwrap_or(0);
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells[2].split(' ').count(), 3, "three seeds: {line}");
        let half: f64 = cells[ci].parse().unwrap_or(0.0);
        assert!(half > 0.0, "three different seeds give an interval: {line}");
    }
}

#[test]
fn a_key_of_words_is_swept_after_one_of_numbers() {
    // fleet.limiter takes words: each point sets one, quoted, and the table shows them.
    let t = Temp::new("sweep", "words");
    let out = t.path("out");
    let o = out.to_str().expect("UTF-8");
    let r = capsize(&[
        "sweep",
        "scenarios/fleet.toml",
        "--out",
        o,
        "--sweep",
        "fleet.replicas=1,4",
        "--sweep",
        "fleet.limiter=local,shared",
        "--set",
        "workload.duration_s=60",
    ]);
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let report = read(out.join("report.md"));
    assert!(report.contains("| 4 | local |"), "{report}");
    assert!(report.contains("| 4 | shared |"), "{report}");
    // Words cannot be the charts' x axis: a sweep whose first key takes words is refused.
    let r = capsize(&[
        "sweep",
        "scenarios/stock-quotes.toml",
        "--out",
        o,
        "--sweep",
        "fleet.limiter=local,shared",
    ]);
    assert_eq!(r.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(
        stderr.contains("sweep.\"fleet.limiter\": the first swept key must take numbers"),
        "{stderr}"
    );
}

#[test]
fn bad_grids_are_refused_in_one_line() {
    let t = Temp::new("sweep", "bad");
    let out = t.path("out");
    let o = out.to_str().expect("UTF-8");
    for (args, says) in [
        (
            vec!["--sweep", "scheduler.max_concurency=1,2"],
            "max_concurency",
        ),
        (
            vec!["--sweep", "scheduler.max_concurrency=a,b"],
            "scheduler.max_concurrency",
        ),
        (vec!["--sweep", "scheduler.max_concurrency=[]"], "no values"),
        (
            vec!["--sweep", "scheduler.max_concurrency"],
            "key.path=values",
        ),
        (vec!["--sweep", "workload.queries=1..=20000"], "--force"),
        (vec!["--sweep", "scheduler.headroom=0.5,1.5"], "headroom"),
        (
            vec![
                "--set",
                "scheduler.headroom=0.7",
                "--sweep",
                "scheduler.headroom=0.5,0.9",
            ],
            "--set scheduler.headroom=0.7 and --sweep scheduler.headroom=0.5,0.9 both give scheduler.headroom: keep one",
        ),
    ] {
        let mut all = vec!["sweep", AGENT, "--out", o];
        all.extend(args.iter().copied());
        let r = capsize(&all);
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.matches('\n').count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!out.exists(), "{args:?} wrote output");
    }
    // A scenario with nothing to sweep.
    let r = capsize(&["sweep", "scenarios/stock-quotes.toml", "--out", o]);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("nothing to sweep"));
    // An objective on a metric summary.json does not have (a typo) is refused before any run.
    let agent = std::fs::read_to_string(AGENT).expect("the research agent");
    let typo = t.path("typo.toml");
    std::fs::write(
        &typo,
        agent.replace("latency_ms.query.p95", "latency_ms.query.p59"),
    )
    .expect("write");
    let r = capsize(&["sweep", typo.to_str().expect("UTF-8"), "--out", o]);
    assert_eq!(r.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(
        stderr.contains("\"latency_ms.query.p59\" is not a summary.json metric"),
        "{stderr}"
    );
    assert!(!out.exists(), "wrote output");
}

#[test]
fn a_set_pins_a_swept_key_and_says_so() {
    let t = Temp::new("sweep", "pin");
    let out = t.path("out");
    let o = sweep(
        &out,
        &[
            "--set",
            "scheduler.headroom=0.7",
            "--set",
            "workload.queries=50",
        ],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains(
            "--set scheduler.headroom=0.7 pins scheduler.headroom: it is not swept (5 points)"
        ),
        "{stderr}"
    );
    // Five points of max_concurrency alone, each at headroom 0.7: not 5 x 4 with 0.7 ignored.
    let csv = read(out.join("sweep.csv"));
    let header = csv.lines().next().expect("a header");
    assert!(
        header.starts_with("scheduler.max_concurrency,seed,"),
        "{header}"
    );
    assert_eq!(csv.lines().count(), 1 + 5, "{csv}");
    // Pinning every swept key leaves nothing to sweep.
    let r = capsize(&[
        "sweep",
        AGENT,
        "--out",
        out.to_str().expect("UTF-8"),
        "--set",
        "scheduler.headroom=0.7",
        "--set",
        "scheduler.max_concurrency=4",
    ]);
    assert_eq!(r.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&r.stderr).contains(
            "(--set pinned every swept key: scheduler.max_concurrency, scheduler.headroom)"
        ),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
}

#[test]
fn prefer_chooses_which_passing_point_is_recommended() {
    let t = Temp::new("sweep", "prefer");
    let agent = std::fs::read_to_string(AGENT).expect("the research agent");
    let with = |prefer: &str| {
        t.write(
            "prefer.toml",
            &agent.replace("[sweep]\n", &format!("[sweep]\nprefer = {prefer:?}\n")),
        )
    };
    let out = t.path("out");
    let o = out.to_str().expect("UTF-8");
    let file = with("max scheduler.max_concurrency");
    let r = capsize(&[
        "sweep",
        file.to_str().unwrap(),
        "--out",
        o,
        "--set",
        "workload.queries=300",
    ]);
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let md = read(out.join("report.md"));
    // Of the passing points (4 at 0.7, 0.9, 1.0; 8 and 16 at 1.0), the largest concurrency.
    assert!(
        md.contains("**max_concurrency = 16 at headroom = 1.0**"),
        "{md}"
    );
    assert!(
        md.contains("Chosen by the largest `scheduler.max_concurrency` (`[sweep] prefer`)"),
        "{md}"
    );
    for (prefer, says) in [
        (
            "max workload.sessions",
            "sweep.prefer: \"max workload.sessions\" names neither a swept key of numbers nor a metric of summary.json",
        ),
        (
            "most scheduler.headroom",
            "sweep.prefer: \"most scheduler.headroom\": \"most\" is not min or max",
        ),
    ] {
        let file = with(prefer);
        let r = capsize(&["sweep", file.to_str().unwrap(), "--out", o]);
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{prefer}: {stderr}");
        assert!(stderr.contains(says), "{prefer}: {stderr}");
    }
}

#[test]
fn plan_prints_the_arithmetic() {
    let r = capsize(&[
        "plan",
        "--rpm",
        "600",
        "--calls-per-query",
        "8",
        "--headroom",
        "0.7",
        "--latency-ms",
        "550",
    ]);
    assert_eq!(r.status.code(), Some(0));
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(
        text.contains("52.5") && text.contains("420 / 8") && text.contains("180"),
        "{text}"
    );
    let r = capsize(&["plan", AGENT, "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&r.stdout).expect("JSON");
    let max = rows
        .as_array()
        .and_then(|a| a.iter().find(|r| r["key"] == "fanout_expected_max_ms"))
        .and_then(|r| r["value"].as_f64())
        .unwrap_or(0.0);
    assert!((max - 822.222).abs() < 0.001, "{max}");
    for bad in [
        &["plan", "--rpm", "0"][..],
        &["plan", "--headroom", "1.5"],
        &["plan"],
    ] {
        let r = capsize(bad);
        assert_eq!(r.status.code(), Some(2), "{bad:?}");
        assert_eq!(String::from_utf8_lossy(&r.stderr).matches('\n').count(), 1);
    }
}

#[test]
fn the_committed_research_agent_report_is_what_the_command_writes() {
    let t = Temp::new("sweep", "committed");
    let out = t.path("out");
    sweep(&out, &[]);
    let committed = Path::new("reports/research-agent");
    same_files(
        &out,
        committed,
        &[
            "sweep.csv",
            "report.md",
            "report.html",
            "throughput.svg",
            "latency.png",
            "rpm_over_time.svg",
        ],
        "reports/research-agent is stale: run scripts/regenerate-reports.sh",
    );
}

#[test]
fn the_committed_two_provider_agent_report_is_what_the_command_writes() {
    // The README's worked example: a model plus tools, the model's TPM binding.
    let t = Temp::new("sweep", "committed-agent");
    let out = t.path("out");
    let o = capsize(&[
        "sweep",
        "scenarios/agent.toml",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("sessions = 8: 10.3 queries/min sustained, p95 26.6 s, no 429s; llm TPM binds at 14.5 queries/min (70.7 % used)."),
        "{stdout}"
    );
    same_files(
        &out,
        Path::new("reports/agent"),
        &[
            "sweep.csv",
            "report.md",
            "report.html",
            "throughput.svg",
            "rpm_over_time.svg",
            "tokens_over_time.svg",
            "call_time.svg",
        ],
        "reports/agent is stale: run scripts/regenerate-reports.sh",
    );
}

/// Three concurrencies whose query p95 varies widely from seed to seed (60 queries a run).
const NOISY: &str = r#"
name = "noisy"
seed = 2
[provider]
rpm = 600
latency = { dist = "lognormal", mean_ms = 1500, p95_ms = 5000 }
[workload]
sessions = 6
queries = 60
calls_per_query = 4
tokens_per_call = 0
[scheduler]
max_concurrency = 4
rate_limit = true
[sweep]
"scheduler.max_concurrency" = [2, 4, 8]
"#;

#[test]
fn a_point_met_only_on_average_is_never_the_unqualified_answer() {
    let t = Temp::new("sweep_cli", "noisy");
    let sweep = |slo: &str, name: &str| {
        let scenario = t.write(
            name,
            &format!("{NOISY}[slo]\n\"latency_ms.query.p95\" = \"{slo}\"\n"),
        );
        let out = t.path(&format!("{name}.out"));
        let o = capsize(&[
            "sweep",
            scenario.to_str().unwrap(),
            "--repeats",
            "3",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let md = std::fs::read_to_string(out.join("report.md")).unwrap();
        (String::from_utf8_lossy(&o.stdout).into_owned(), md)
    };
    // p95 over 3 runs: 2 slots 26,727.8 ± 12,534; 4 slots 13,833.6 ± 2,360.8; 8 slots
    // 10,552.7 ± 6,295.6. At < 30,000 the smallest passing point (2) is a coin flip (its
    // interval reaches 39,261.8): 4, which meets it across its interval, is recommended.
    let (stdout, md) = sweep("< 30000", "wide.toml");
    assert!(stdout.contains("max_concurrency = 4: "), "{stdout}");
    assert!(md.contains("| 2 | 0.349 ± 0.0857 | 26,727.8 ± 12,534 | 0 ± 0 | marginal: `latency_ms.query.p95` ± 12,534 |"), "{md}");
    assert!(!md.contains("**Marginal**"), "{md}");
    // At < 16,000 no point meets it across its interval: the smallest passing one is
    // recommended, and the report and the terminal say it is marginal, and by how much.
    let (stdout, md) = sweep("< 16000", "tight.toml");
    let line = "**Marginal** (no point meets the objectives across its interval over 3 runs): `latency_ms.query.p95 < 16000` is met on average (13,833.6 ± 2,360.8) but its 95 % interval reaches 16,194.4.";
    assert!(md.contains(line), "{md}");
    assert!(stdout.contains("max_concurrency = 4: "), "{stdout}");
    assert!(stdout.contains("Marginal (no point meets"), "{stdout}");
}

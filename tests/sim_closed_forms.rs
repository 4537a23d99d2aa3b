//! The virtual-time simulator against closed forms: what queueing theory and the article's
//! arithmetic say, measured through the real scheduler and the provider model.

use std::path::Path;

use capsize::api::scenario::{parse, Scenario};
use capsize::api::sim::{self, SimOutcome};
use capsize::api::summary::Summary;

fn scenario(toml: &str) -> Scenario {
    parse(toml, Path::new("test.toml"), &[]).unwrap_or_else(|e| panic!("{e}"))
}

fn run(s: &Scenario) -> SimOutcome {
    sim::run(s).unwrap_or_else(|e| panic!("{e}"))
}

/// Erlang C: the probability that an arrival waits in an M/M/c queue with offered load `a`.
fn erlang_c(c: u32, a: f64) -> f64 {
    let mut term = 1.0; // a^k / k!
    let mut sum = 0.0;
    for k in 0..c {
        if k > 0 {
            term *= a / f64::from(k);
        }
        sum += term;
    }
    let top = term * a / f64::from(c) * f64::from(c) / (f64::from(c) - a);
    top / (sum + top)
}

#[test]
fn eight_parallel_uniform_calls_take_the_expected_max() {
    // E[max of n U[a, b]] = a + (b − a)·n/(n + 1) = 200 + 700·8/9 = 822.2 ms. The max of 8 has an
    // sd of 700·√(8/(81·10)) ≈ 70 ms, so the mean of 10,000 queries is within ±0.7 ms (1 σ).
    let s = scenario(
        r#"
        name = "max-of-8"
        seed = 1
        [provider]
        latency = { dist = "uniform", min_ms = 200, max_ms = 900 }
        [workload]
        queries = 10000
        calls_per_query = 8
        tokens_per_call = 100
        "#,
    );
    let out = run(&s);
    let mean = out.recording.query.mean() / 1000.0;
    let want = 200.0 + 700.0 * 8.0 / 9.0;
    assert!(
        (mean - want).abs() / want < 0.01,
        "mean query latency {mean} ms, want {want} ± 1 %"
    );
    assert_eq!(out.recording.queries_completed, 10_000);
    assert_eq!(out.provider.received, 80_000);
}

#[test]
fn an_mm10_queue_waits_as_erlang_c_says() {
    // M/M/10 at 80 % load: λ = 80/s, 1/μ = 100 ms, so Wq = C(10, 8) / (cμ − λ) = 20.46 ms. The
    // provider's ten servers queue FIFO and report each request's wait for a server. Waits are
    // strongly autocorrelated at this load: one run of 250,000 queries has a seed-to-seed sd of
    // about 3.7 % (measured over 8 seeds), so 8 runs are pooled (sd of the pooled mean ≈ 1.3 %).
    let (c, lambda, mu) = (10, 80.0, 10.0);
    let wq = erlang_c(c, lambda / mu) / (f64::from(c) * mu - lambda) * 1000.0;
    let mut total = 0.0;
    let mut count = 0;
    for seed in 1..=8 {
        let s = scenario(&format!(
            r#"
            name = "mm10"
            seed = {seed}
            [provider]
            latency = {{ dist = "exponential", mean_ms = 100 }}
            max_in_flight = 10
            overload = "queue"
            [workload]
            mode = "open"
            arrival_rate = 80
            arrival = "poisson"
            queries = 250000
            calls_per_query = 1
            tokens_per_call = 1
            "#
        ));
        let out = run(&s);
        let h = &out.recording.provider_queue;
        total += h.mean() * h.len() as f64;
        count += h.len();
    }
    assert_eq!(count, 2_000_000);
    let measured = total / count as f64 / 1000.0;
    assert!(
        (measured - wq).abs() / wq < 0.03,
        "mean wait {measured:.3} ms, Erlang C says {wq:.3} ms ± 3 %"
    );
}

#[test]
fn a_200_per_second_burst_spends_a_fixed_tpm_window_in_25_seconds() {
    // 10M TPM at 2,000 tokens a call is 5,000 calls a minute; at 200 calls/s the minute's
    // budget is gone after 25 s, and every call in the remaining 35 s is refused.
    let s = scenario(
        r#"
        name = "tpm-burst"
        [provider]
        tpm = 10_000_000
        window = "fixed"
        latency = { dist = "constant", ms = 50 }
        [workload]
        mode = "open"
        arrival_rate = 200
        arrival = "constant"
        duration_s = 70
        calls_per_query = 1
        tokens_per_call = 2000
        [scheduler]
        retry = { max_retries = 0 }
        "#,
    );
    let out = run(&s);
    assert_eq!(out.recording.series.bin_s, 1);
    let seconds = &out.recording.series.bins;
    let first_429 = seconds.iter().position(|s| s.rate_limited > 0);
    assert_eq!(first_429, Some(25), "first 429 in second {first_429:?}");
    assert_eq!(seconds[..25].iter().map(|s| s.charged).sum::<u64>(), 5_000);
    assert!(
        seconds[25..60].iter().all(|s| s.charged == 0),
        "a call was served in 25..60 s"
    );
    assert!(seconds[60].charged > 0, "the next minute serves again");
    assert_eq!(out.provider.rate_limited, 35 * 200);
}

#[test]
fn the_client_limiter_keeps_every_minute_under_the_headroom() {
    // Closed loop, demand well above the limit: four sessions of 8 calls at 600 RPM. The client
    // bucket at headroom 0.7 (capacity 1: burst_s is tiny) lets 420 requests through a minute.
    let s = scenario(
        r#"
        name = "headroom"
        seed = 3
        [provider]
        rpm = 600
        latency = { dist = "uniform", min_ms = 200, max_ms = 900 }
        [workload]
        sessions = 4
        queries = 600
        calls_per_query = 8
        tokens_per_call = 2000
        [scheduler]
        max_concurrency = 16
        headroom = 0.7
        rate_limit = true
        burst_s = 0.01
        "#,
    );
    let out = run(&s);
    let summary = Summary::new(&s, &out);
    assert!(
        summary.provider.peak_requests_per_60s <= 420,
        "{:?}",
        summary.provider
    );
    assert_eq!(summary.provider.counters.rate_limited, 0);
    // Not vacuous: the limiter is the bottleneck, so the run sits right at the headroom.
    let util = summary.rpm_utilization.unwrap();
    assert!((0.68..=0.7).contains(&util), "RPM utilization {util}");
}

#[test]
fn one_seed_gives_one_summary_and_another_seed_another() {
    let text = std::fs::read_to_string("scenarios/research-agent.toml").unwrap();
    let summary = |seed: &str| {
        let sets = vec!["workload.queries=300".to_string(), format!("seed={seed}")];
        let s = parse(&text, Path::new("scenarios/research-agent.toml"), &sets).unwrap();
        Summary::new(&s, &run(&s)).to_json()
    };
    let a = summary("42");
    assert_eq!(a, summary("42"));
    assert_ne!(a, summary("43"));
}

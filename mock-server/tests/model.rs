//! Pins the provider model's answers, request by request: fixed, sliding and token-bucket
//! windows (when the first 429 comes, its Retry-After, when service resumes, the counters), the
//! `retry_after` settings and the rate-limit headers, quota charged at arrival (and not for
//! refusals), the error and timeout shares, `max_in_flight` queueing and refusals, determinism
//! under a seed, and a per-request latency override.
//!
//! Time is a `Duration` since the model started, so every window boundary is exact. The random
//! shares are checked over 1e5 requests with tolerances stated in Monte-Carlo standard errors (SE).

use std::path::Path;
use std::time::Duration;

use capsize_mock::{
    ConfigError, Decision, Latency, Limit, Outcome, ProviderModel, RawProvider, Service,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Builds a `[provider]` table; `latency` defaults to a constant 100 ms.
fn config(table: &str) -> Result<capsize_mock::ProviderConfig, ConfigError> {
    let table = if table.contains("latency") {
        table.to_string()
    } else {
        format!("latency = {{ dist = \"constant\", ms = 100 }}\n{table}")
    };
    let raw: RawProvider = toml::from_str(&table).expect("the table parses");
    raw.build(Path::new("."))
}

fn model(table: &str, seed: u64) -> ProviderModel {
    ProviderModel::new(config(table).expect("the table builds"), seed)
}

fn header<'a>(h: &'a [(&'static str, String)], name: &str) -> Option<&'a str> {
    h.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
}

#[test]
fn fixed_window_refuses_from_the_quota_until_the_next_minute() {
    let mut m = model(
        "tpm = 10_000_000\nwindow = \"fixed\"\nretry_after = \"auto\"",
        1,
    );
    // 200 requests/s of 2,000 tokens: 400,000 tokens/s, so 10M last exactly 25 s.
    for k in 0..13_000u64 {
        let now = ms(5 * k);
        let d = m.on_request(now, 2_000);
        if now < secs(25) || now >= secs(60) {
            assert_eq!(d.outcome, Outcome::Served, "at {now:?}");
            assert_eq!(d.retry_after, None, "at {now:?}");
        } else {
            assert_eq!(d.outcome, Outcome::RateLimited, "at {now:?}");
            assert_eq!(d.retry_after, Some(secs(60) - now), "at {now:?}");
        }
        if now == secs(25) {
            assert_eq!(d.retry_after, Some(secs(35)));
        }
    }
    let c = m.counters();
    // 5,000 served in [0, 25 s), 7,000 refused in [25 s, 60 s), 1,000 served in [60 s, 65 s).
    assert_eq!(
        (c.received, c.served, c.rate_limited, c.errored, c.timed_out),
        (13_000, 6_000, 7_000, 0, 0)
    );
    assert_eq!(c.tokens_charged, 12_000_000);

    // Minutes are whole minutes from the start, not from the first request after a reset.
    let mut m = model("tpm = 10_000_000\nwindow = \"fixed\"", 1);
    assert_eq!(m.on_request(secs(1), 10_000_000).outcome, Outcome::Served);
    assert_eq!(
        m.on_request(ms(61_500), 10_000_000).outcome,
        Outcome::Served
    );
    assert_eq!(m.on_request(secs(70), 1).retry_after, Some(secs(50)));
    assert_eq!(m.on_request(secs(120), 10_000_000).outcome, Outcome::Served);
}

#[test]
fn sliding_window_frees_each_request_sixty_seconds_after_it_arrived() {
    let mut m = model("rpm = 600", 1);
    for i in 0..600 {
        assert_eq!(
            m.on_request(Duration::ZERO, 1).outcome,
            Outcome::Served,
            "#{i}"
        );
    }
    let d = m.on_request(secs(10), 1);
    assert_eq!(d.outcome, Outcome::RateLimited);
    assert_eq!(d.retry_after, Some(secs(50)));
    let d = m.on_request(ms(59_999), 1);
    assert_eq!(d.retry_after, Some(ms(1)));
    let d = m.on_request(secs(60), 1);
    assert_eq!(d.outcome, Outcome::Served);
    assert_eq!(m.counters().served, 601);
    assert_eq!(m.counters().rate_limited, 2);

    // The wait is until the oldest request in the window expires, not the newest.
    let mut m = model("rpm = 2", 1);
    m.on_request(Duration::ZERO, 1);
    m.on_request(secs(10), 1);
    assert_eq!(m.on_request(secs(20), 1).retry_after, Some(secs(40)));
    assert_eq!(m.on_request(secs(60), 1).outcome, Outcome::Served);
    assert_eq!(m.on_request(secs(61), 1).retry_after, Some(secs(9)));
}

#[test]
fn token_bucket_refills_continuously() {
    let mut m = model("rpm = 60\nwindow = \"token_bucket\"", 1);
    for _ in 0..60 {
        assert_eq!(m.on_request(Duration::ZERO, 1).outcome, Outcome::Served);
    }
    assert_eq!(m.on_request(Duration::ZERO, 1).retry_after, Some(secs(1)));
    // Drained, it serves one request a second, and half a second after one, it is half refilled.
    for k in 1..=10 {
        let d = m.on_request(secs(k), 1);
        assert_eq!(d.outcome, Outcome::Served, "at {k} s");
        let d = m.on_request(secs(k) + ms(500), 1);
        assert_eq!(d.outcome, Outcome::RateLimited, "at {k}.5 s");
        let wait = d.retry_after.expect("auto retry_after");
        assert!(
            wait.abs_diff(ms(500)) < Duration::from_micros(1),
            "{wait:?}"
        );
    }
}

#[test]
fn token_bucket_retry_after_is_enough_to_fit() {
    // rpm = 7: the 8th request at 0 must wait 60/7 s = 8.571428571428… s. Every window's auto
    // retry_after is "the time until the request would fit", so a retry then must be served.
    for table in ["rpm = 7", "tpm = 7000"] {
        let mut m = model(&format!("{table}\nwindow = \"token_bucket\""), 1);
        for _ in 0..7 {
            assert_eq!(m.on_request(Duration::ZERO, 1_000).outcome, Outcome::Served);
        }
        let wait = m
            .on_request(Duration::ZERO, 1_000)
            .retry_after
            .expect("auto");
        let d = m.on_request(wait, 1_000);
        assert_eq!(
            d.outcome,
            Outcome::Served,
            "{table}: retried at {wait:?}, got {d:?}"
        );
    }
}

#[test]
fn fixed_and_absent_retry_after() {
    for (setting, want) in [
        ("7", Some(secs(7))),
        ("2.5", Some(ms(2_500))),
        ("\"none\"", None),
        ("\"auto\"", Some(secs(59))),
    ] {
        let mut m = model(&format!("rpm = 1\nretry_after = {setting}"), 1);
        m.on_request(Duration::ZERO, 1);
        let d = m.on_request(secs(1), 1);
        assert_eq!(d.outcome, Outcome::RateLimited, "{setting}");
        assert_eq!(d.retry_after, want, "{setting}");
    }
    for bad in ["-1", "\"soon\""] {
        let e = config(&format!("rpm = 1\nretry_after = {bad}")).expect_err(bad);
        assert_eq!(e.key, "provider.retry_after");
    }
}

#[test]
fn headers_report_retry_after_and_both_limits_as_go_durations() {
    let mut m = model("rpm = 1\ntpm = 1000", 1);
    let served = m.on_request(Duration::ZERO, 400);
    let refused = m.on_request(ms(58_500), 400);
    let h = |v: [&str; 6]| -> Vec<(&'static str, String)> {
        let names = [
            "x-ratelimit-limit-requests",
            "x-ratelimit-remaining-requests",
            "x-ratelimit-reset-requests",
            "x-ratelimit-limit-tokens",
            "x-ratelimit-remaining-tokens",
            "x-ratelimit-reset-tokens",
        ];
        names.into_iter().zip(v.map(String::from)).collect()
    };
    assert_eq!(
        served.headers(),
        h(["1", "0", "1m0s", "1000", "600", "1m0s"])
    );
    let mut want = vec![
        ("retry-after", "2".to_string()), // 1.5 s, rounded up
        ("retry-after-ms", "1500".to_string()),
    ];
    want.extend(h(["1", "0", "1.5s", "1000", "600", "1.5s"]));
    assert_eq!(refused.headers(), want);
    assert_eq!(refused.status(), 429);

    // Fractional remaining is floored; an unlimited dimension has no headers.
    let mut b = model("rpm = 60\nwindow = \"token_bucket\"", 1);
    b.on_request(Duration::ZERO, 5);
    let d = b.on_request(ms(500), 5); // 59 + 0.5 refilled − 1 = 58.5
    let hs = d.headers();
    assert_eq!(header(&hs, "x-ratelimit-remaining-requests"), Some("58"));
    assert_eq!(header(&hs, "x-ratelimit-reset-requests"), Some("1.5s"));
    assert!(hs.iter().all(|(n, _)| !n.ends_with("-tokens")), "{hs:?}");

    let mut free = model("", 1);
    assert!(free.on_request(Duration::ZERO, 5).headers().is_empty());
    // retry_after = "none": a 429 still reports its limits, but no Retry-After.
    let mut quiet = model("rpm = 1\nretry_after = \"none\"", 1);
    quiet.on_request(Duration::ZERO, 5);
    let hs = quiet.on_request(secs(1), 5).headers();
    assert_eq!(header(&hs, "x-ratelimit-reset-requests"), Some("59s"));
    assert!(
        hs.iter().all(|(n, _)| !n.starts_with("retry-after")),
        "{hs:?}"
    );
}

#[test]
fn quota_is_charged_at_arrival_for_every_accepted_request_but_not_for_429s() {
    for (fate, outcome) in [
        ("", Outcome::Served),
        (
            "error_rate = 1.0\nerror_mix = { \"529\" = 1 }",
            Outcome::Error(529),
        ),
        ("timeout_rate = 1.0", Outcome::Timeout),
    ] {
        let mut m = model(&format!("rpm = 2\n{fate}"), 1);
        let d = [100, 250, 999].map(|t| m.on_request(Duration::ZERO, t));
        assert_eq!(
            d.each_ref().map(|d| (d.outcome, d.charged)),
            [
                (outcome, true),
                (outcome, true),
                (Outcome::RateLimited, false)
            ],
            "{fate}"
        );
        assert_eq!(m.counters().tokens_charged, 350, "{fate}");
        assert_eq!(m.counters().received, 3);
        assert_eq!(m.counters().rate_limited, 1);
    }
    // Counted from arrival, not completion: a 10 s request at 0 frees its slot at 60 s, not 70 s.
    let mut m = model("rpm = 1\nlatency = { dist = \"constant\", ms = 10_000 }", 1);
    assert_eq!(m.on_request(Duration::ZERO, 1).latency, Some(secs(10)));
    assert_eq!(m.on_request(secs(5), 1).retry_after, Some(secs(55)));
    assert_eq!(m.on_request(secs(60), 1).outcome, Outcome::Served);
}

#[test]
fn errors_and_timeouts_come_at_their_rates_and_mix() {
    let mut m = model(
        "error_rate = 0.3\ntimeout_rate = 0.1\nerror_mix = { \"500\" = 1, \"503\" = 1, \"529\" = 2 }",
        7,
    );
    let n = 100_000;
    let (mut s500, mut s503, mut s529, mut timeouts) = (0.0, 0.0, 0.0, 0.0);
    for i in 0..n {
        let d = m.on_request(ms(i), 10);
        match d.outcome {
            Outcome::Error(500) => s500 += 1.0,
            Outcome::Error(503) => s503 += 1.0,
            Outcome::Error(529) => s529 += 1.0,
            Outcome::Timeout => timeouts += 1.0,
            Outcome::Served => {}
            other => panic!("unexpected {other:?}"),
        }
        assert!(d.charged);
        assert_eq!(d.latency.is_none(), d.outcome == Outcome::Timeout, "{d:?}");
    }
    let errors = s500 + s503 + s529;
    let n = n as f64;
    // Error share: SE = sqrt(.3·.7/1e5) ≈ 0.0014, ±0.007 is 5 SE.
    assert!(
        (errors / n - 0.3).abs() < 0.007,
        "error share {}",
        errors / n
    );
    // Within ~30,000 errors, 500 and 503 take 1/4 each (SE ≈ 0.0025), 529 half (SE ≈ 0.0029):
    // ±0.013 is ≥ 4.5 SE.
    for (got, want) in [(s500, 0.25), (s503, 0.25), (s529, 0.5)] {
        assert!((got / errors - want).abs() < 0.013, "{got} of {errors}");
    }
    // Timeout share: SE = sqrt(.1·.9/1e5) ≈ 0.00095, ±0.005 is ~5 SE.
    assert!(
        (timeouts / n - 0.1).abs() < 0.005,
        "timeout share {}",
        timeouts / n
    );
    let c = m.counters();
    assert_eq!((c.errored, c.timed_out), (errors as u64, timeouts as u64));
    assert_eq!(c.served + c.errored + c.timed_out, c.received);

    let e = config("error_rate = 0.6\ntimeout_rate = 0.5").expect_err("sum above 1");
    assert_eq!(e.key, "provider.timeout_rate");
    assert!(config("error_rate = 0.6\ntimeout_rate = 0.4").is_ok());
}

#[test]
fn max_in_flight_queues_fifo_on_free_servers() {
    let mut m = model("max_in_flight = 2\noverload = \"queue\"", 1);
    let lat = |m: &mut ProviderModel, at: Duration| m.on_request(at, 1).latency.unwrap();
    assert_eq!(
        [0; 4].map(|_| lat(&mut m, Duration::ZERO)),
        [ms(100), ms(100), ms(200), ms(200)]
    );
    // Servers free at 200 ms and 200 ms: one arriving at 150 ms waits 50 ms.
    assert_eq!(lat(&mut m, ms(150)), ms(150));
    assert_eq!(lat(&mut m, ms(1_000)), ms(100));
}

#[test]
fn max_in_flight_refusals_say_when_a_server_frees_and_are_not_charged() {
    for (overload, outcome) in [("429", Outcome::RateLimited), ("503", Outcome::Error(503))] {
        let mut m = model(
            &format!("max_in_flight = 2\noverload = \"{overload}\"\ntpm = 1000"),
            1,
        );
        m.on_request(Duration::ZERO, 100);
        m.on_request(ms(40), 100); // servers busy until 100 and 140 ms
        let d = m.on_request(ms(60), 100);
        assert_eq!(d.outcome, outcome, "{overload}");
        assert_eq!(d.retry_after, Some(ms(40)), "{overload}");
        assert!(!d.charged, "{overload}");
        assert_eq!(d.tokens.unwrap().remaining, 800.0, "{overload}");
        assert_eq!(m.counters().tokens_charged, 200, "{overload}");
        // At 100 ms a server is free again.
        let d = m.on_request(ms(100), 100);
        assert_eq!((d.outcome, d.latency), (Outcome::Served, Some(ms(100))));
    }
}

fn decisions(seed: u64) -> Vec<Decision> {
    let mut m = model(
        "rpm = 1000\nmax_in_flight = 4\nerror_rate = 0.2\ntimeout_rate = 0.1\n\
         latency = { dist = \"lognormal\", mean_ms = 400, p95_ms = 900 }",
        seed,
    );
    (0..2_000).map(|i| m.on_request(ms(10 * i), 50)).collect()
}

#[test]
fn a_seed_repeats_exactly_and_different_seeds_differ() {
    let a = decisions(42);
    assert_eq!(a, decisions(42));
    let b = decisions(43);
    assert_ne!(a, b);
    let lat = |v: &[Decision]| v.iter().map(|d| d.latency).collect::<Vec<_>>();
    assert_ne!(lat(&a), lat(&b));
}

#[test]
fn on_request_with_overrides_the_latency_for_one_request() {
    let mut m = model("", 1);
    let slow = Latency::Constant(2_500.0);
    assert_eq!(
        m.on_request_with(Duration::ZERO, 1, Service::latency(Some(&slow)))
            .latency,
        Some(ms(2_500))
    );
    assert_eq!(
        m.on_request_with(secs(1), 1, Service::default()).latency,
        Some(ms(100))
    );
    assert_eq!(m.on_request(secs(2), 1).latency, Some(ms(100)));
}

#[test]
fn on_request_with_overrides_the_error_rate_for_one_request() {
    // A provider that never fails, asked for a service that always does (and one that never
    // does): the same draws, the outcome decided by the rate asked for.
    let mut m = model("", 1);
    let flaky = Service {
        latency: None,
        error_rate: Some(1.0),
        ..Service::default()
    };
    let sound = Service {
        error_rate: Some(0.0),
        ..flaky
    };
    for i in 0..50 {
        let d = m.on_request_with(secs(i), 1, flaky);
        assert!(matches!(d.outcome, Outcome::Error(_)), "{d:?}");
        assert_eq!(
            m.on_request_with(secs(i), 1, sound).outcome,
            Outcome::Served
        );
    }
    let c = m.counters();
    assert_eq!((c.errored, c.served), (50, 50));
}

#[test]
fn a_request_larger_than_the_tpm_is_a_429_without_retry_after_under_every_window() {
    for window in ["sliding", "fixed", "token_bucket"] {
        for retry_after in ["\"auto\"", "7", "\"none\""] {
            let table = format!(
                "tpm = 1000\nrpm = 100\nwindow = \"{window}\"\nretry_after = {retry_after}\n\
                 max_in_flight = 1\noverload = \"429\""
            );
            let mut m = model(&table, 1);
            let d = m.on_request(Duration::ZERO, 1_001);
            assert_eq!(d.outcome, Outcome::TooLarge(Limit::Tokens), "{table}");
            assert_eq!(d.status(), 429);
            assert_eq!(
                (d.retry_after, d.charged, d.latency),
                (None, false, Some(Duration::ZERO)),
                "{table}"
            );
            let h = d.headers();
            assert!(
                h.iter().all(|(n, _)| !n.starts_with("retry-after")),
                "{h:?}"
            );
            assert_eq!(header(&h, "x-ratelimit-limit-tokens"), Some("1000"));
            assert_eq!(header(&h, "x-ratelimit-remaining-tokens"), Some("1000"));
            // Exactly the whole minute fits, and takes the one server.
            assert_eq!(m.on_request(Duration::ZERO, 1_000).outcome, Outcome::Served);
            // Too large is answered before capacity (the server is busy) and before quota (the
            // minute is spent): no wait would help, so no Retry-After says otherwise.
            let d = m.on_request(ms(50), u64::MAX);
            assert_eq!(d.outcome, Outcome::TooLarge(Limit::Tokens), "{table}");
            assert_eq!(m.on_request(ms(50), 1).outcome, Outcome::RateLimited);
            let c = m.counters();
            assert_eq!(
                (c.received, c.served, c.rate_limited, c.errored, c.timed_out),
                (4, 1, 3, 0, 0),
                "{table}"
            );
            assert_eq!(c.tokens_charged, 1_000);
        }
    }
    // A configuration built by hand with fewer than one request a minute admits nothing.
    let mut c = config("rpm = 1").unwrap();
    c.rpm = Some(0.5);
    let mut m = ProviderModel::new(c, 1);
    let d = m.on_request(Duration::ZERO, 1);
    assert_eq!(
        (d.outcome, d.status()),
        (Outcome::TooLarge(Limit::Requests), 429)
    );
    assert_eq!(m.counters().rate_limited, 1);
}

#[test]
fn a_clock_from_the_first_request_starts_the_fixed_minute_there() {
    // 2 RPM in fixed minutes; the client's first request comes 30 s after the start. From the
    // start, the third request's minute ends at 60 s: 30 s to wait. From the first request,
    // at 90 s: 60 s, as a run whose client starts at once sees it.
    let third_waits = |clock_from: &str| {
        let mut m = model(
            &format!("rpm = 2\nwindow = \"fixed\"\nretry_after = \"auto\"\nclock_from = \"{clock_from}\""),
            1,
        );
        for _ in 0..2 {
            assert_eq!(m.on_request(secs(30), 1).outcome, Outcome::Served);
        }
        let third = m.on_request(secs(30), 1);
        assert_eq!(third.outcome, Outcome::RateLimited);
        third.retry_after
    };
    assert_eq!(third_waits("start"), Some(secs(30)));
    assert_eq!(third_waits("first_request"), Some(secs(60)));
    let err = toml::from_str::<RawProvider>(
        "latency = { dist = \"constant\", ms = 1 }\nclock_from = \"first\"",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("first_request"), "{err}");
}

//! Values that pass validation never panic. Every duration-like key of `[provider]` (any latency
//! parameter in ms, empirical values, `retry_after`) must be finite, >= 0 and at most one year
//! (`limits::MAX_DURATION`), and is refused otherwise by an error naming the key and the bound;
//! `rpm`/`tpm` lie in [1, 1e12] and `max_in_flight` in [1, 1e6]; an empirical `file` must be a
//! regular file of at most `limits::MAX_FILE_BYTES`, refused at once otherwise (`/dev/zero`, a
//! FIFO). Every draw is clamped to one year, so a log-normal with `sigma = 100`, which builds,
//! serves 10,000 requests; and the model takes any time and any token count without overflow.

#![allow(clippy::disallowed_methods)] // runs on tokio's clock on purpose

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::time::Instant;

use capsize_mock::limits::{MAX_DURATION, MAX_DURATION_MS, MAX_FILE_BYTES};
use capsize_mock::RawProvider;
use capsize_mock::{ConfigError, Latency, Limit, Outcome, ProviderConfig, ProviderModel, Service};
use rand::rngs::Xoshiro256PlusPlus;
use rand::SeedableRng;

/// Builds a `[provider]` table (latency: a constant 1 ms unless given), files read from `base`.
fn provider_in(table: &str, base: &Path) -> Result<ProviderConfig, ConfigError> {
    let table = if table.contains("latency") {
        table.to_string()
    } else {
        format!("latency = {{ dist = \"constant\", ms = 1 }}\n{table}")
    };
    let raw: RawProvider = toml::from_str(&table).expect("the table parses");
    raw.build(base)
}

fn provider(table: &str) -> Result<ProviderConfig, ConfigError> {
    provider_in(table, Path::new("."))
}

fn refused(table: &str) -> ConfigError {
    match provider(table) {
        Ok(c) => panic!("{table} should be refused, built {c:?}"),
        Err(e) => e,
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("capsize-mock-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    dir
}

#[test]
fn a_lognormal_with_sigma_100_builds_and_every_draw_is_at_most_a_year() {
    let table = r#"latency = { dist = "lognormal", mu = 0, sigma = 100 }"#;
    let config = provider(table).expect("it builds");
    assert_eq!(config.latency, Latency::LogNormal(0.0, 100.0));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let draws: Vec<f64> = (0..10_000)
        .map(|_| config.latency.sample(&mut rng))
        .collect();
    assert!(draws.iter().all(|&x| (0.0..=MAX_DURATION_MS).contains(&x)));
    // exp(100 z) passes a year when z > ln(3.1536e10) / 100 = 0.2417: P = 0.4045, SE = 0.0049.
    let clamped = draws.iter().filter(|&&x| x == MAX_DURATION_MS).count() as f64 / 1e4;
    assert!((clamped - 0.4045).abs() < 0.025, "{clamped}");
    // Through the model (as its own latency, and as a per-request override): no panic.
    let mut m = ProviderModel::new(config.clone(), 1);
    let mut longest = Duration::ZERO;
    for i in 0..10_000 {
        let at = Duration::from_millis(i);
        let d = if i % 2 == 0 {
            m.on_request(at, 1)
        } else {
            m.on_request_with(at, 1, Service::latency(Some(&config.latency)))
        };
        let latency = d.latency.expect("served");
        assert!(latency <= MAX_DURATION, "{latency:?}");
        longest = longest.max(latency);
    }
    assert_eq!(longest, MAX_DURATION);
    assert_eq!(m.counters().served, 10_000);
}

/// Every latency key in ms, as a table with `{v}` where the value goes, and the key it is.
const MS_KEYS: [(&str, &str); 12] = [
    (r#"dist = "constant", ms = {v}"#, "ms"),
    (r#"dist = "uniform", min_ms = {v}, max_ms = 1"#, "min_ms"),
    (r#"dist = "uniform", min_ms = 1, max_ms = {v}"#, "max_ms"),
    (r#"dist = "normal", mean_ms = {v}, sd_ms = 1"#, "mean_ms"),
    (r#"dist = "normal", mean_ms = 1, sd_ms = {v}"#, "sd_ms"),
    (
        r#"dist = "lognormal", mean_ms = {v}, p95_ms = 2"#,
        "mean_ms",
    ),
    (r#"dist = "lognormal", mean_ms = 1, p95_ms = {v}"#, "p95_ms"),
    (r#"dist = "exponential", mean_ms = {v}"#, "mean_ms"),
    (r#"dist = "pareto", scale_ms = {v}, shape = 2"#, "scale_ms"),
    (
        r#"dist = "empirical", values_ms = [1, {v}]"#,
        "values_ms[1]",
    ),
    (
        r#"dist = "mixture", components = [{ weight = 1, dist = "constant", ms = {v} }]"#,
        "components[0].ms",
    ),
    (r#"dist = "lognormal", mu = {v}, sigma = 1"#, "mu"),
];

#[test]
fn every_duration_key_refuses_huge_infinite_and_nan_values_naming_the_key_and_the_bound() {
    for (template, name) in MS_KEYS {
        for v in ["1e308", "inf", "-inf", "nan", "31536000001"] {
            let table = format!("latency = {{ {} }}", template.replace("{v}", v));
            let e = refused(&table);
            assert_eq!(e.key, format!("provider.latency.{name}"), "{table}");
            assert!(e.message.contains("31536000000"), "{table}: {e}");
            assert_eq!(e.to_string().lines().count(), 1, "{e}");
        }
    }
    let e = refused(r#"latency = { dist = "constant", ms = 1e308 }"#);
    assert_eq!(
        e.to_string(),
        format!(
            "provider.latency.ms: must be a number of ms in [0, 31536000000] (one year), got {}",
            1e308
        )
    );
    // The bound itself is allowed: one year exactly, and a log-normal median just under it.
    let year = provider(r#"latency = { dist = "constant", ms = 31536000000 }"#).unwrap();
    assert_eq!(year.latency, Latency::Constant(MAX_DURATION_MS));
    assert!(provider(r#"latency = { dist = "lognormal", mu = 24.17, sigma = 1 }"#).is_ok());
    let e = refused(r#"latency = { dist = "lognormal", mu = 24.18, sigma = 1 }"#);
    assert_eq!(e.key, "provider.latency.mu");
    // Shapes, sigma and weights are not durations, but must be finite.
    for (table, key) in [
        (r#"{ dist = "lognormal", mu = 1, sigma = inf }"#, "sigma"),
        (r#"{ dist = "lognormal", mu = 1, sigma = nan }"#, "sigma"),
        (r#"{ dist = "pareto", scale_ms = 1, shape = inf }"#, "shape"),
        (r#"{ dist = "pareto", scale_ms = 1, shape = nan }"#, "shape"),
        (
            r#"{ dist = "mixture", components = [{ weight = inf, dist = "constant", ms = 1 }] }"#,
            "components[0].weight",
        ),
    ] {
        let e = refused(&format!("latency = {table}"));
        assert_eq!(e.key, format!("provider.latency.{key}"), "{table}");
    }
}

#[test]
fn retry_after_rates_and_max_in_flight_are_bounded() {
    for v in ["1e308", "inf", "nan", "-1", "31536001"] {
        let e = refused(&format!("retry_after = {v}"));
        assert_eq!(e.key, "provider.retry_after", "{v}");
        assert!(e.message.contains("31536000"), "{v}: {e}");
    }
    let c = provider("retry_after = 31536000").unwrap();
    assert_eq!(
        c.retry_after,
        capsize_mock::config::RetryAfter::Fixed(MAX_DURATION)
    );
    for key in ["rpm", "tpm"] {
        for v in ["1e13", "1e308", "inf", "nan", "0.5", "0", "-5"] {
            let e = refused(&format!("{key} = {v}"));
            assert_eq!(e.key, format!("provider.{key}"), "{v}");
            assert_eq!(
                e.message,
                format!(
                    "must be a number in [1, 1e12] (per minute), got {}",
                    capsize_mock::limits::show(v.parse::<f64>().unwrap())
                ),
            );
        }
        assert!(provider(&format!("{key} = 1e12")).is_ok());
        assert!(provider(&format!("{key} = 1")).is_ok());
    }
    for n in ["0", "1000001"] {
        let e = refused(&format!("max_in_flight = {n}"));
        assert_eq!(e.key, "provider.max_in_flight");
        assert_eq!(
            e.message,
            format!("must be in [1, 1000000] (omit it for no limit), got {n}")
        );
    }
    // A million servers cost nothing until used.
    let mut m = ProviderModel::new(provider("max_in_flight = 1000000").unwrap(), 1);
    assert_eq!(m.on_request(Duration::ZERO, 1).outcome, Outcome::Served);
    // Huge error weights split evenly instead of summing to infinity.
    let c =
        provider("error_rate = 1\nerror_mix = { 500 = 1e308, 503 = 1e308, 529 = 1e308 }").unwrap();
    assert_eq!(c.error_split, [1.0 / 3.0, 2.0 / 3.0]);
    let e = refused("error_mix = { 500 = inf }");
    assert_eq!(e.key, "provider.error_mix");
}

#[test]
fn error_statuses_left_out_of_the_mix_weigh_nothing() {
    // Cumulative shares of 500 and 503; 529 takes the rest.
    let split = |t: &str| {
        provider(&format!("error_rate = 1\n{t}"))
            .unwrap()
            .error_split
    };
    assert_eq!(split(""), [1.0 / 3.0, 2.0 / 3.0]);
    assert_eq!(split("error_mix = { \"529\" = 1 }"), [0.0, 0.0]);
    assert_eq!(
        split("error_mix = { \"529\" = 1, \"500\" = 1 }"),
        [0.5, 0.5]
    );
    assert_eq!(split("error_mix = { \"503\" = 3 }"), [0.0, 1.0]);
    assert_eq!(refused("error_mix = {}").key, "provider.error_mix");
}

#[cfg(unix)]
#[test]
fn an_empirical_file_must_be_a_regular_file_within_the_limit() {
    let at_once = |table: &str, base: &Path| {
        let t0 = Instant::now();
        let e = provider_in(table, base).expect_err(table);
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "{table}: {:?}",
            t0.elapsed()
        );
        assert_eq!(e.to_string().lines().count(), 1, "{e}");
        e
    };
    let e = at_once(
        r#"latency = { dist = "empirical", file = "/dev/zero" }"#,
        Path::new("."),
    );
    assert_eq!(
        e.to_string(),
        "provider.latency.file: cannot read /dev/zero: not a regular file (a character device)"
    );
    let dir = temp_dir("bounds");
    let fifo = dir.join("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        let e = at_once(r#"latency = { dist = "empirical", file = "fifo" }"#, &dir);
        assert!(e.message.ends_with("not a regular file (a FIFO)"), "{e}");
    }
    // One byte over the limit (sparse: nothing is written), refused before reading.
    let big = std::fs::File::create(dir.join("big.csv")).unwrap();
    big.set_len(MAX_FILE_BYTES + 1).unwrap();
    let e = at_once(
        r#"latency = { dist = "empirical", file = "big.csv" }"#,
        &dir,
    );
    assert_eq!(e.key, "provider.latency.file");
    assert!(
        e.message
            .ends_with("file is 16777217 bytes, over the limit of 16777216 bytes"),
        "{e}"
    );
    // Values in a file are held to the same bound as values_ms; the file must be UTF-8.
    std::fs::write(dir.join("huge.csv"), "ms\n10\n1e308\n").unwrap();
    let e = at_once(
        r#"latency = { dist = "empirical", file = "huge.csv" }"#,
        &dir,
    );
    assert!(
        e.message
            .contains("huge.csv:3: latency must be in [0, 31536000000] ms"),
        "{e}"
    );
    std::fs::write(dir.join("bin.csv"), b"10\n\xff\xfe\n").unwrap();
    let e = at_once(
        r#"latency = { dist = "empirical", file = "bin.csv" }"#,
        &dir,
    );
    assert!(e.message.ends_with("not UTF-8 (at byte 3)"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn any_latency_value_samples_within_a_year_even_one_built_by_hand() {
    let cases = [
        (Latency::Empirical(vec![]), Some(0.0)),
        (Latency::Mixture(vec![]), Some(0.0)),
        (Latency::Constant(f64::NAN), Some(MAX_DURATION_MS)),
        (Latency::Constant(-1.0), Some(0.0)),
        (Latency::Constant(1e308), Some(MAX_DURATION_MS)),
        (Latency::Uniform(f64::NAN, 5.0), Some(MAX_DURATION_MS)),
        (Latency::Uniform(0.0, f64::INFINITY), None),
        (Latency::Normal(f64::NAN, 1.0), Some(0.0)),
        (Latency::Exponential(f64::INFINITY), Some(MAX_DURATION_MS)),
        (Latency::Pareto(1.0, 1e-300), Some(MAX_DURATION_MS)),
        (Latency::LogNormal(1e308, 1e308), None),
    ];
    let mut m = ProviderModel::new(provider("").unwrap(), 3);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    for (l, want) in cases {
        for i in 0..100 {
            let x = l.sample(&mut rng);
            assert!((0.0..=MAX_DURATION_MS).contains(&x), "{l:?}: {x}");
            if let Some(want) = want {
                assert_eq!(x, want, "{l:?}");
            }
            let d = m.on_request_with(Duration::from_secs(i), 1, Service::latency(Some(&l)));
            assert!(d.latency.expect("served") <= MAX_DURATION, "{l:?}");
        }
    }
}

#[test]
fn the_model_takes_any_time_and_any_token_count_without_overflow() {
    let times = [
        Duration::ZERO,
        Duration::from_secs(1),
        Duration::MAX,
        Duration::MAX,
        Duration::from_secs(5),
        Duration::MAX - Duration::from_nanos(1),
    ];
    for window in ["sliding", "fixed", "token_bucket"] {
        for limits in [
            "",
            "rpm = 2",
            "tpm = 1e12",
            "rpm = 1e12\ntpm = 1e12\nmax_in_flight = 2",
        ] {
            let table = format!(
                "window = \"{window}\"\n{limits}\n\
                 latency = {{ dist = \"constant\", ms = 31536000000 }}"
            );
            let mut m = ProviderModel::new(provider(&table).unwrap(), 1);
            for at in times {
                for tokens in [0, 1, u64::MAX, u64::MAX] {
                    let d = m.on_request(at, tokens);
                    let _ = d.headers();
                    if limits.contains("tpm") && tokens == u64::MAX {
                        assert_eq!(d.outcome, Outcome::TooLarge(Limit::Tokens), "{table}");
                    }
                }
            }
            let c = m.counters();
            assert_eq!(c.received, 24, "{table}");
            assert_eq!(
                c.received,
                c.served + c.rate_limited + c.errored + c.timed_out,
                "{table}"
            );
            if limits.is_empty() {
                // Twelve of them cost u64::MAX tokens: the count saturates.
                assert_eq!((c.served, c.tokens_charged), (24, u64::MAX), "{table}");
            }
        }
    }
}

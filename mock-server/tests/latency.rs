//! Pins the provider's latency distributions as a scenario's `[provider] latency` table builds
//! them: the exact log-normal fit from a mean and a p95 (and which fits are refused), that every
//! distribution's samples match its closed-form `Latency::mean()` and its support (truncation,
//! bounds, listed values, mixture weights), empirical files read relative to the scenario folder,
//! and that bad values are refused with an error naming the scenario key at fault.
//!
//! Sampling is seeded (`Xoshiro256PlusPlus`), so every run is identical; the tolerances are still
//! stated as multiples of the Monte-Carlo standard error (SE), so that a different seed passes too.

use std::path::{Path, PathBuf};

use capsize_mock::latency::lognormal_fit;
use capsize_mock::{ConfigError, Latency, RawProvider};
use rand::rngs::Xoshiro256PlusPlus;
use rand::SeedableRng;

/// z-score of the 95th percentile, to full precision (1.6448536 alone is off by 2.7e-8, more
/// than the 1e-9 the fit is held to).
const Z95: f64 = 1.644_853_626_951_472_2;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// Builds `[provider] latency = <latency>` (an inline TOML table), empirical files read from `base`.
fn build_in(latency: &str, base: &Path) -> Result<Latency, ConfigError> {
    let raw: RawProvider =
        toml::from_str(&format!("latency = {latency}")).expect("the table parses");
    raw.build(base).map(|c| c.latency)
}

fn build(latency: &str) -> Result<Latency, ConfigError> {
    build_in(latency, Path::new("."))
}

fn ok(latency: &str) -> Latency {
    build(latency).unwrap_or_else(|e| panic!("{latency} should build: {e}"))
}

/// The error `latency` is refused with; panics if it builds.
fn refused(latency: &str) -> ConfigError {
    match build(latency) {
        Ok(l) => panic!("{latency} should be refused, built {l:?}"),
        Err(e) => e,
    }
}

/// A mixture of constant components: `(weight, ms)`.
fn mixture(components: &[(f64, &str)]) -> String {
    let parts: Vec<String> = components
        .iter()
        .map(|(w, ms)| format!(r#"{{ weight = {w}, dist = "constant", ms = {ms} }}"#))
        .collect();
    format!(
        r#"{{ dist = "mixture", components = [{}] }}"#,
        parts.join(", ")
    )
}

fn samples(latency: &Latency, n: usize, seed: u64) -> Vec<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..n).map(|_| latency.sample(&mut rng)).collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn assert_near(got: f64, want: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol,
        "{what}: got {got}, want {want} ± {tol}"
    );
}

fn rel(got: f64, want: f64) -> f64 {
    (got - want).abs() / want
}

#[test]
fn lognormal_fit_matches_the_mean_and_p95_exactly() {
    let (mu, sigma) = lognormal_fit(400.0, 900.0).expect("a fit exists");
    assert!(rel((mu + sigma * sigma / 2.0).exp(), 400.0) < 1e-9, "mean");
    assert!(rel((mu + Z95 * sigma).exp(), 900.0) < 1e-9, "p95");
    // Both roots of the quadratic fit; the small-sigma one is the sensible (light-tailed) one.
    assert!(sigma > 0.0 && sigma < Z95, "sigma {sigma}");

    let latency = ok(r#"{ dist = "lognormal", mean_ms = 400, p95_ms = 900 }"#);
    assert_eq!(latency, Latency::LogNormal(mu, sigma));
    assert!(
        rel(latency.mean(), 400.0) < 1e-9,
        "mean() {}",
        latency.mean()
    );

    let mut v = samples(&latency, 200_000, 1);
    // sd = 400·sqrt(e^{sigma²} − 1) ≈ 265 ms, SE of the mean ≈ 0.59 ms = 0.15 %: 1 % is ~6.7 SE.
    assert!(rel(mean(&v), 400.0) < 0.01, "sample mean {}", mean(&v));
    // SE of the p95 = sqrt(.95·.05/n) / pdf(900) ≈ 4.9e-4 / 1.9e-4 ≈ 2.6 ms = 0.29 %: 1.5 % is ~5 SE.
    v.sort_by(f64::total_cmp);
    let p95 = v[(0.95 * v.len() as f64) as usize];
    assert!(rel(p95, 900.0) < 0.015, "sample p95 {p95}");
}

#[test]
fn lognormal_fit_refuses_impossible_p95s() {
    let limit = (Z95 * Z95 / 2.0).exp(); // 3.868: the largest p95/mean any log-normal has
    for p95 in [50.0, 100.0, 100.0 * limit * 1.003, 1000.0] {
        let e = refused(&format!(
            r#"{{ dist = "lognormal", mean_ms = 100, p95_ms = {p95} }}"#
        ));
        assert_eq!(e.key, "provider.latency.p95_ms", "p95 {p95}: {e}");
        assert!(lognormal_fit(100.0, p95).is_none(), "p95 {p95}");
    }
    // Just inside the bound still fits.
    let near = ok(&format!(
        r#"{{ dist = "lognormal", mean_ms = 100, p95_ms = {} }}"#,
        100.0 * limit * 0.997
    ));
    assert!(rel(near.mean(), 100.0) < 1e-9);
}

#[test]
fn lognormal_takes_mu_and_sigma_but_not_a_mix_of_forms() {
    let l = ok(r#"{ dist = "lognormal", mu = 5.0, sigma = 0.5 }"#);
    assert_eq!(l, Latency::LogNormal(5.0, 0.5));
    assert!(rel(l.mean(), 5.125_f64.exp()) < 1e-12);
    for mixed in [
        r#"{ dist = "lognormal", mean_ms = 400, p95_ms = 900, sigma = 0.5 }"#,
        r#"{ dist = "lognormal", mean_ms = 400, sigma = 0.5 }"#,
        r#"{ dist = "lognormal", mu = 5.0, p95_ms = 900 }"#,
        r#"{ dist = "lognormal", mean_ms = 400 }"#,
    ] {
        assert_eq!(refused(mixed).key, "provider.latency", "{mixed}");
    }
    let e = refused(r#"{ dist = "lognormal", mu = 5.0, sigma = -0.5 }"#);
    assert_eq!(e.key, "provider.latency.sigma");
    let e = refused(r#"{ dist = "lognormal", mu = nan, sigma = 0.5 }"#);
    assert_eq!(e.key, "provider.latency.mu");
}

#[test]
fn constant_uniform_and_exponential_sample_their_means() {
    let c = ok(r#"{ dist = "constant", ms = 250 }"#);
    assert!(samples(&c, 1_000, 2).iter().all(|&x| x == 250.0));
    assert_eq!(c.mean(), 250.0);

    let u = ok(r#"{ dist = "uniform", min_ms = 100, max_ms = 300 }"#);
    assert_eq!(u.mean(), 200.0);
    let v = samples(&u, 100_000, 3);
    // sd = 200/sqrt(12) ≈ 57.7, SE ≈ 0.18: ±1 is ~5.5 SE.
    assert_near(mean(&v), 200.0, 1.0, "uniform mean");
    let (lo, hi) = v
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    // Bounds respected, and (1e5 draws) the whole range is used.
    assert!(
        (100.0..101.0).contains(&lo) && hi <= 300.0 && hi > 299.0,
        "{lo}..{hi}"
    );

    let e = ok(r#"{ dist = "exponential", mean_ms = 50 }"#);
    assert_eq!(e.mean(), 50.0);
    let v = samples(&e, 100_000, 4);
    // sd = mean = 50, SE ≈ 0.16: ±0.8 is 5 SE.
    assert_near(mean(&v), 50.0, 0.8, "exponential mean");
    assert!(v.iter().all(|&x| x >= 0.0));
}

#[test]
fn normal_is_truncated_at_zero_and_its_mean_is_the_truncated_mean() {
    let n = ok(r#"{ dist = "normal", mean_ms = 100, sd_ms = 100 }"#);
    // E[X | X >= 0] for N(100, 100²) = 100 + 100·φ(1)/Φ(1) = 128.759997 (A–S erf: error < 1e-5).
    let want = 128.759_997_093_917_83;
    assert_near(n.mean(), want, 1e-4, "mean()");
    let v = samples(&n, 100_000, 5);
    assert!(v.iter().all(|&x| x >= 0.0), "a negative latency was drawn");
    // Truncated sd ≈ 79.4, SE ≈ 0.25: ±1.5 is 6 SE (the untruncated mean, 100, is 115 SE away).
    assert_near(mean(&v), want, 1.5, "sample mean");

    let exact = ok(r#"{ dist = "normal", mean_ms = 70, sd_ms = 0 }"#);
    assert_eq!(exact.mean(), 70.0);
    assert!(samples(&exact, 100, 6).iter().all(|&x| x == 70.0));
}

#[test]
fn pareto_samples_at_least_its_scale_and_its_mean() {
    let p = ok(r#"{ dist = "pareto", scale_ms = 10, shape = 3 }"#);
    assert_eq!(p.mean(), 15.0); // shape·scale/(shape − 1)
    let v = samples(&p, 200_000, 7);
    assert!(v.iter().all(|&x| x >= 10.0), "a draw below the scale");
    // var = scale²·shape/((shape−1)²(shape−2)) = 75, SE ≈ 0.019: ±0.1 is ~5 SE.
    assert_near(mean(&v), 15.0, 0.1, "pareto mean");
    let heavy = ok(r#"{ dist = "pareto", scale_ms = 10, shape = 1 }"#);
    assert_eq!(heavy.mean(), f64::INFINITY);
}

#[test]
fn empirical_values_draw_only_the_listed_values_evenly() {
    let e = ok(r#"{ dist = "empirical", values_ms = [10, 20, 70] }"#);
    assert!(rel(e.mean(), 100.0 / 3.0) < 1e-12);
    let v = samples(&e, 90_000, 8);
    for listed in [10.0, 20.0, 70.0] {
        let share = v.iter().filter(|&&x| x == listed).count() as f64 / v.len() as f64;
        // SE of a share 1/3 over 9e4 ≈ 0.0016: ±0.01 is ~6 SE.
        assert_near(share, 1.0 / 3.0, 0.01, &format!("share of {listed}"));
    }
    assert!(v.iter().all(|x| [10.0, 20.0, 70.0].contains(x)));
}

#[test]
fn empirical_file_is_read_relative_to_the_base_and_may_have_a_header() {
    let table = r#"{ dist = "empirical", file = "latency.csv" }"#;
    // The header row and the blank line are skipped; only the first column counts.
    let want = Latency::Empirical(vec![120.0, 80.5, 300.0, 95.0]);
    assert_eq!(build_in(table, &data_dir()), Ok(want.clone()));
    let nested = r#"{ dist = "empirical", file = "tests/data/latency.csv" }"#;
    assert_eq!(
        build_in(nested, Path::new(env!("CARGO_MANIFEST_DIR"))),
        Ok(want)
    );
    let v = samples(&build_in(table, &data_dir()).unwrap(), 10_000, 9);
    assert!(v.iter().all(|x| [120.0, 80.5, 300.0, 95.0].contains(x)));
}

#[test]
fn empirical_file_errors_name_the_file_and_row() {
    let cases = [
        ("latency_bad_row.csv", "latency_bad_row.csv:4"),
        ("latency_negative.csv", "latency_negative.csv:3"),
        ("no_such_file.csv", "no_such_file.csv"),
    ];
    for (file, named) in cases {
        let table = format!(r#"{{ dist = "empirical", file = "{file}" }}"#);
        let e = build_in(&table, &data_dir()).expect_err(file);
        assert_eq!(e.key, "provider.latency.file", "{file}");
        assert!(e.message.contains(named), "{file}: {e}");
    }
    // The file is looked for under the base, not the working directory.
    let e = build(r#"{ dist = "empirical", file = "latency.csv" }"#).expect_err("not under .");
    assert_eq!(e.key, "provider.latency.file");
}

#[test]
fn mixture_draws_components_by_weight() {
    let m = ok(&mixture(&[(1.0, "100"), (3.0, "1000")]));
    assert!(rel(m.mean(), 0.25 * 100.0 + 0.75 * 1000.0) < 1e-12);
    let v = samples(&m, 100_000, 10);
    assert!(v.iter().all(|&x| x == 100.0 || x == 1000.0));
    let share = v.iter().filter(|&&x| x == 100.0).count() as f64 / v.len() as f64;
    // SE = sqrt(.25·.75/1e5) ≈ 0.0014: ±0.007 is 5 SE.
    assert_near(share, 0.25, 0.007, "share of the 100 ms component");
}

#[test]
fn bad_values_are_refused_naming_the_key() {
    let cases = [
        (r#"{ dist = "constant", ms = -1 }"#, "provider.latency.ms"),
        (r#"{ dist = "constant", ms = nan }"#, "provider.latency.ms"),
        (
            r#"{ dist = "uniform", min_ms = nan, max_ms = 5 }"#,
            "provider.latency.min_ms",
        ),
        (
            r#"{ dist = "uniform", min_ms = 1, max_ms = inf }"#,
            "provider.latency.max_ms",
        ),
        (
            r#"{ dist = "uniform", min_ms = 300, max_ms = 100 }"#,
            "provider.latency.max_ms",
        ),
        (
            r#"{ dist = "normal", mean_ms = 0, sd_ms = 10 }"#,
            "provider.latency.mean_ms",
        ),
        (
            r#"{ dist = "normal", mean_ms = 100, sd_ms = -1 }"#,
            "provider.latency.sd_ms",
        ),
        (
            r#"{ dist = "lognormal", mean_ms = 0, p95_ms = 900 }"#,
            "provider.latency.mean_ms",
        ),
        (
            r#"{ dist = "exponential", mean_ms = 0 }"#,
            "provider.latency.mean_ms",
        ),
        (
            r#"{ dist = "pareto", scale_ms = -10, shape = 2 }"#,
            "provider.latency.scale_ms",
        ),
        (
            r#"{ dist = "pareto", scale_ms = 10, shape = 0 }"#,
            "provider.latency.shape",
        ),
        (
            r#"{ dist = "empirical", values_ms = [] }"#,
            "provider.latency",
        ),
        (
            r#"{ dist = "empirical", values_ms = [1, -2] }"#,
            "provider.latency.values_ms[1]",
        ),
        (
            r#"{ dist = "empirical", values_ms = [1], file = "x.csv" }"#,
            "provider.latency",
        ),
        (r#"{ dist = "empirical" }"#, "provider.latency"),
        (
            r#"{ dist = "mixture", components = [] }"#,
            "provider.latency.components",
        ),
    ];
    for (table, key) in cases {
        assert_eq!(refused(table).key, key, "{table}");
    }
    let mixtures = [
        (
            mixture(&[(1.0, "1"), (0.0, "2")]),
            "provider.latency.components[1].weight",
        ),
        (
            mixture(&[(1.0, "1"), (-1.0, "2")]),
            "provider.latency.components[1].weight",
        ),
        (mixture(&[(1.0, "-1")]), "provider.latency.components[0].ms"),
    ];
    for (table, key) in mixtures {
        assert_eq!(refused(&table).key, key, "{table}");
    }
}

#[test]
fn unknown_keys_and_distributions_are_refused_by_serde() {
    for table in [
        r#"{ dist = "constant", ms = 1, mean_ms = 2 }"#,
        r#"{ dist = "uniform", min_ms = 1, max_ms = 2, sd_ms = 1 }"#,
        r#"{ dist = "lognormal", mean_ms = 400, p95_ms = 900, p99_ms = 2000 }"#,
        r#"{ dist = "mixture", components = [{ weight = 1, dist = "constant", ms = 1, typo = 2 }] }"#,
        r#"{ dist = "gamma", shape = 2 }"#,
        r#"{ ms = 1 }"#,
    ] {
        let parsed = toml::from_str::<RawProvider>(&format!("latency = {table}"));
        assert!(parsed.is_err(), "{table} parsed: {parsed:?}");
    }
}

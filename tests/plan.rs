//! The closed-form arithmetic of `capsize plan` against the article's worked numbers, and the
//! E[max of n] of each latency distribution against independently computed values.

use std::path::Path;

use capsize::api::plan::{expected_max_ms, fmt_num, plan, render, PlanInput, Row};
use capsize::api::scenario;
use capsize_mock::Latency;

/// The value of row `key`, failing the test if it is missing.
fn value(rows: &[Row], key: &str) -> f64 {
    rows.iter()
        .find(|r| r.key.name() == key)
        .unwrap_or_else(|| panic!("no row {key:?} in {:?}", keys(rows)))
        .value
}

fn keys(rows: &[Row]) -> Vec<&'static str> {
    rows.iter().map(|r| r.key.name()).collect()
}

fn has(rows: &[Row], key: &str) -> bool {
    rows.iter().any(|r| r.key.name() == key)
}

/// Asserts `got` is `want` within 1e-9 relative.
#[track_caller]
fn close(got: f64, want: f64) {
    assert!(
        (got - want).abs() <= 1e-9 * want.abs().max(1.0),
        "got {got}, want {want}"
    );
}

fn research_agent() -> scenario::Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/research-agent.toml");
    scenario::load(&path, &[]).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn ten_thousand_rpm_is_a_ceiling_of_166_7_requests_per_second() {
    let rows = plan(&PlanInput {
        rpm: Some(10_000.0),
        ..PlanInput::default()
    });
    close(value(&rows, "rps_ceiling"), 10_000.0 / 60.0);
    assert_eq!(fmt_num(value(&rows, "rps_ceiling")), "166.7");
    // With no TPM the request ceiling is the call ceiling.
    close(value(&rows, "call_ceiling_per_s"), 10_000.0 / 60.0);
}

#[test]
fn a_semaphore_of_40_to_60_at_400_ms_sustains_100_to_150_rps_or_60_to_90_percent() {
    for (c, rps, share) in [(40, 100.0, 60.0), (60, 150.0, 90.0)] {
        let rows = plan(&PlanInput {
            rpm: Some(10_000.0),
            latency_mean_ms: 400.0,
            max_concurrency: Some(c),
            ..PlanInput::default()
        });
        close(value(&rows, "littles_law_throughput"), rps);
        close(value(&rows, "littles_law_share_of_ceiling"), share);
        // The other way round: 166.7 RPS × 0.4 s = 66.7 calls in flight saturate the ceiling.
        close(
            value(&rows, "littles_law_concurrency_at_ceiling"),
            10_000.0 / 60.0 * 0.4,
        );
    }
}

#[test]
fn ten_million_tpm_at_2000_tokens_is_5000_calls_a_minute_and_binds_below_10000_rpm() {
    let rows = plan(&PlanInput {
        rpm: Some(10_000.0),
        tpm: Some(10_000_000.0),
        tokens_per_call: 2_000.0,
        ..PlanInput::default()
    });
    close(value(&rows, "tpm_calls_per_min"), 5_000.0);
    close(value(&rows, "tpm_calls_per_s"), 5_000.0 / 60.0);
    assert_eq!(fmt_num(value(&rows, "tpm_calls_per_s")), "83.3");
    // The binding ceiling is the smaller: 83.3 calls/s (TPM), not 166.7 (RPM).
    close(value(&rows, "call_ceiling_per_s"), 5_000.0 / 60.0);
    let ceiling = rows
        .iter()
        .find(|r| r.key.name() == "call_ceiling_per_s")
        .unwrap();
    assert!(ceiling.label.contains("TPM"), "{}", ceiling.label);
}

#[test]
fn a_200_per_second_burst_spends_10m_tpm_in_25_s_then_429s_for_35_s() {
    let input = PlanInput {
        tpm: Some(10_000_000.0),
        tokens_per_call: 2_000.0,
        burst_calls_per_s: Some(200.0),
        ..PlanInput::default()
    };
    let rows = plan(&input);
    close(value(&rows, "tpm_exhaustion_s"), 25.0);
    close(value(&rows, "tpm_blocked_s"), 35.0);

    // A burst the TPM can absorb for the whole minute: no blocked row.
    let rows = plan(&PlanInput {
        burst_calls_per_s: Some(50.0),
        ..input
    });
    close(value(&rows, "tpm_exhaustion_s"), 100.0);
    assert!(!has(&rows, "tpm_blocked_s"), "{:?}", keys(&rows));
}

fn article_research_agent() -> PlanInput {
    PlanInput {
        rpm: Some(600.0),
        headroom: 0.7,
        calls_per_query: 8.0,
        tokens_per_call: 2_000.0,
        latency_mean_ms: 550.0,
        latency_uniform_ms: Some((200.0, 900.0)),
        max_concurrency: Some(4),
        ..PlanInput::default()
    }
}

#[test]
fn eight_parallel_calls_of_uniform_200_900_take_822_2_ms_on_average() {
    let rows = plan(&article_research_agent());
    close(
        value(&rows, "fanout_expected_max_ms"),
        200.0 + 700.0 * 8.0 / 9.0,
    );
    assert_eq!(fmt_num(value(&rows, "fanout_expected_max_ms")), "822.2");
    let row = rows
        .iter()
        .find(|r| r.key.name() == "fanout_expected_max_ms")
        .unwrap();
    assert_eq!(row.formula, "200 + 700 × 8/9");
    // The same from the distribution itself, with no uniform shortcut given.
    let rows = plan(&PlanInput {
        latency_uniform_ms: None,
        latency: Some(Latency::Uniform(200.0, 900.0)),
        ..article_research_agent()
    });
    close(
        value(&rows, "fanout_expected_max_ms"),
        200.0 + 700.0 * 8.0 / 9.0,
    );
}

#[test]
fn a_semaphore_of_4_in_strict_waves_takes_2_x_760_ms() {
    let rows = plan(&article_research_agent());
    close(value(&rows, "strict_waves_ms"), 1_520.0);
    assert_eq!(fmt_num(value(&rows, "strict_waves_ms")), "1,520");
    close(value(&rows, "sequential_ms"), 8.0 * 550.0);
    // 10 calls through 4: two full waves and one of 2 (E[max of 2] = 200 + 700·2/3).
    let rows = plan(&PlanInput {
        calls_per_query: 10.0,
        ..article_research_agent()
    });
    close(
        value(&rows, "strict_waves_ms"),
        1_520.0 + 200.0 + 700.0 * 2.0 / 3.0,
    );
    // No waves when the semaphore holds every call, or there is none.
    for c in [None, Some(0), Some(8), Some(20)] {
        let rows = plan(&PlanInput {
            max_concurrency: c,
            ..article_research_agent()
        });
        assert!(!has(&rows, "strict_waves_ms"), "{c:?}: {:?}", keys(&rows));
        assert!(has(&rows, "fanout_expected_max_ms"));
    }
}

#[test]
fn six_hundred_rpm_at_0_7_headroom_is_420_slots_52_5_queries_and_180_spare() {
    let rows = plan(&article_research_agent());
    close(value(&rows, "headroom_slots_per_min"), 420.0);
    close(value(&rows, "queries_per_min_at_headroom"), 52.5);
    close(value(&rows, "spare_rpm"), 180.0);
    close(value(&rows, "queries_per_s_ceiling"), 1.25);
    close(value(&rows, "queries_per_min_ceiling"), 75.0);
    close(
        value(&rows, "littles_law_concurrency_at_headroom"),
        0.7 * 10.0 * 0.55,
    );
    // At full headroom there is no separate headroom concurrency, and nothing is spare.
    let rows = plan(&PlanInput {
        headroom: 1.0,
        ..article_research_agent()
    });
    assert!(!has(&rows, "littles_law_concurrency_at_headroom"));
    close(value(&rows, "spare_rpm"), 0.0);
}

#[test]
fn rows_whose_inputs_are_missing_are_left_out() {
    assert!(plan(&PlanInput::default()).is_empty());

    let full = plan(&PlanInput {
        tpm: Some(10_000_000.0),
        burst_calls_per_s: Some(200.0),
        ..article_research_agent()
    });
    let no_rpm = plan(&PlanInput {
        rpm: None,
        tpm: Some(10_000_000.0),
        ..article_research_agent()
    });
    for key in [
        "rps_ceiling",
        "headroom_slots_per_min",
        "spare_rpm",
        "queries_per_min_at_headroom",
    ] {
        assert!(has(&full, key), "{key}");
        assert!(!has(&no_rpm, key), "{key} without rpm");
    }
    // The TPM still gives a ceiling and everything that follows from one.
    close(value(&no_rpm, "call_ceiling_per_s"), 5_000.0 / 60.0);
    close(
        value(&no_rpm, "queries_per_s_ceiling"),
        5_000.0 / 60.0 / 8.0,
    );

    // Neither limit: no ceiling, and nothing measured against one.
    let unlimited = plan(&PlanInput {
        rpm: None,
        ..article_research_agent()
    });
    for key in [
        "call_ceiling_per_s",
        "queries_per_s_ceiling",
        "littles_law_concurrency_at_ceiling",
        "littles_law_share_of_ceiling",
        "tpm_calls_per_min",
        "tpm_exhaustion_s",
    ] {
        assert!(has(&full, key), "{key}");
        assert!(!has(&unlimited, key), "{key} when unlimited");
    }
    close(value(&unlimited, "littles_law_throughput"), 4.0 / 0.55);

    // No latency: no Little's law and no fan-out rows.
    let no_latency = plan(&PlanInput {
        latency_mean_ms: 0.0,
        latency_uniform_ms: None,
        ..article_research_agent()
    });
    for key in [
        "littles_law_throughput",
        "fanout_expected_max_ms",
        "strict_waves_ms",
        "sequential_ms",
    ] {
        assert!(has(&full, key), "{key}");
        assert!(!has(&no_latency, key), "{key} without latency");
    }
}

#[test]
fn the_order_of_the_rows_is_fixed() {
    let rows = plan(&PlanInput {
        tpm: Some(10_000_000.0),
        burst_calls_per_s: Some(200.0),
        ..article_research_agent()
    });
    assert_eq!(
        keys(&rows),
        [
            "rps_ceiling",
            "tpm_calls_per_min",
            "tpm_calls_per_s",
            "call_ceiling_per_s",
            "queries_per_s_ceiling",
            "queries_per_min_ceiling",
            "headroom_slots_per_min",
            "spare_rpm",
            "queries_per_min_at_headroom",
            "littles_law_concurrency_at_ceiling",
            "littles_law_concurrency_at_headroom",
            "littles_law_throughput",
            "littles_law_share_of_ceiling",
            "fanout_expected_max_ms",
            "strict_waves_ms",
            "sequential_ms",
            "tpm_exhaustion_s",
            "tpm_blocked_s",
        ]
    );
}

#[test]
fn the_research_agent_scenario_gives_822_2_ms_and_52_5_queries_a_minute() {
    let input = PlanInput::from_scenario(&research_agent());
    assert_eq!(input.latency_uniform_ms, Some((200.0, 900.0)));
    close(input.latency_mean_ms, 550.0);
    assert_eq!(input.max_concurrency, Some(4));
    assert_eq!(
        input.burst_calls_per_s, None,
        "a closed-loop scenario has no burst"
    );
    let rows = plan(&input);
    close(
        value(&rows, "fanout_expected_max_ms"),
        200.0 + 700.0 * 8.0 / 9.0,
    );
    close(value(&rows, "queries_per_min_at_headroom"), 52.5);
    close(value(&rows, "strict_waves_ms"), 1_520.0);
    close(value(&rows, "spare_rpm"), 180.0);
}

#[test]
fn the_tpm_burst_scenario_gives_25_s_then_35_s_of_429s() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/tpm-burst.toml");
    let s = scenario::load(&path, &[]).unwrap_or_else(|e| panic!("{e}"));
    let input = PlanInput::from_scenario(&s);
    assert_eq!(
        input.max_concurrency, None,
        "max_concurrency 0 is unbounded"
    );
    let rows = plan(&input);
    close(value(&rows, "tpm_exhaustion_s"), 25.0);
    close(value(&rows, "tpm_blocked_s"), 35.0);
    assert!(!has(&rows, "rps_ceiling"), "the scenario has no RPM");
    // Log-normal latency: E[max of 1] is its mean, 400 ms.
    close(value(&rows, "fanout_expected_max_ms"), 400.0);
}

#[test]
fn a_turn_truncated_to_8_tools_counts_8_calls() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/hallucinated-fanout.toml");
    let s = scenario::load(&path, &[]).unwrap_or_else(|e| panic!("{e}"));
    close(PlanInput::from_scenario(&s).calls_per_query, 8.0);
    let batch = ["scheduler.over_cap=\"batch\"".to_string()];
    let s = scenario::load(&path, &batch).unwrap_or_else(|e| panic!("{e}"));
    close(PlanInput::from_scenario(&s).calls_per_query, 30.0);
    // 4..=12 calls capped at 8: (4 + 5 + 6 + 7 + 8 + 4 × 8) / 9.
    let drawn =
        [r#"workload.calls_per_query={ dist = "uniform_int", min = 4, max = 12 }"#.to_string()];
    let s = scenario::load(&path, &drawn).unwrap_or_else(|e| panic!("{e}"));
    close(PlanInput::from_scenario(&s).calls_per_query, 62.0 / 9.0);
}

#[test]
fn render_shows_every_label_value_and_formula() {
    let rows = plan(&PlanInput {
        tpm: Some(10_000_000.0),
        burst_calls_per_s: Some(200.0),
        ..article_research_agent()
    });
    let table = render(&rows);
    assert_eq!(table.lines().count(), rows.len());
    for row in &rows {
        assert!(
            table.contains(&row.label),
            "{:?} missing:\n{table}",
            row.label
        );
        assert!(
            table.contains(&row.formula),
            "{:?} missing:\n{table}",
            row.formula
        );
    }
    for text in [
        "822.2 ms",
        "1,520 ms",
        "52.5 queries/min",
        "180 requests/min",
        "35 s",
    ] {
        assert!(table.contains(text), "{text:?} missing:\n{table}");
    }
    // Fixed-width columns: every formula starts in the same column.
    let starts: Vec<usize> = rows
        .iter()
        .zip(table.lines())
        .map(|(r, line)| line[..line.rfind(&r.formula).unwrap()].chars().count())
        .collect();
    assert!(
        starts.windows(2).all(|w| w[0] == w[1]),
        "{starts:?}\n{table}"
    );
}

#[test]
fn rows_serialise_with_their_key_value_unit_and_formula() {
    let rows = plan(&article_research_agent());
    let json = serde_json::to_value(&rows[0]).unwrap();
    assert_eq!(json["key"], "rps_ceiling");
    assert_eq!(json["value"], 10.0);
    assert_eq!(json["unit"], "requests/s");
    assert_eq!(json["formula"], "600 / 60");
    assert!(json["label"].is_string());
}

#[test]
fn expected_max_of_each_distribution_matches_an_independent_value() {
    // References: closed forms, or 30-digit quadrature (mpmath) of ∫ 1 − F(x)^n dx.
    let lognormal = capsize_mock::latency::lognormal_fit(400.0, 900.0).unwrap();
    let cases = [
        (Latency::Constant(350.0), 10.0, 350.0),
        (Latency::Exponential(400.0), 8.0, 400.0 * 761.0 / 280.0), // 400 × H(8)
        (Latency::Exponential(400.0), 7.5, 1_062.922_592_992_381_2),
        (
            Latency::Exponential(400.0),
            1e6,
            400.0 * 14.392_726_722_865_724,
        ),
        (
            Latency::Exponential(400.0),
            19.5,
            400.0 * 3.573_052_059_609_179_4,
        ),
        // Two normals: μ + σ/√π (the truncation at 0 is 8 σ away).
        (
            Latency::Normal(400.0, 50.0),
            2.0,
            400.0 + 50.0 / std::f64::consts::PI.sqrt(),
        ),
        (Latency::Normal(300.0, 200.0), 1.0, 327.757_950_091_770_15),
        (Latency::Normal(300.0, 200.0), 8.0, 592.534_123_174_512),
        (Latency::Normal(300.0, 0.0), 8.0, 300.0),
        (Latency::LogNormal(lognormal.0, lognormal.1), 1.0, 400.0),
        (
            Latency::LogNormal(lognormal.0, lognormal.1),
            8.0,
            845.698_019_817_599_5,
        ),
        // Two log-normals: 2·e^(μ + σ²/2)·Φ(σ/√2), μ = 5.5, σ = 0.5.
        (Latency::LogNormal(5.5, 0.5), 2.0, 353.889_933_999_111_9),
        (Latency::Pareto(100.0, 2.0), 1.0, 200.0),
        (Latency::Pareto(100.0, 2.0), 8.0, 509.215_229_215_229_2),
        (Latency::Pareto(100.0, 1.5), 7.5, 1_041.871_652_022_422_2),
        // Σ v(i)·((i/4)² − ((i−1)/4)²) = (100·1 + 200·3 + 300·5 + 400·7)/16.
        (
            Latency::Empirical(vec![400.0, 100.0, 300.0, 200.0]),
            2.0,
            312.5,
        ),
        (Latency::Uniform(200.0, 900.0), 4.0, 760.0),
    ];
    for (latency, n, want) in cases {
        let got = expected_max_ms(&latency, n).unwrap_or_else(|| panic!("{latency:?} n {n}"));
        assert!(
            (got - want).abs() <= 1e-9 * want,
            "{latency:?}, n {n}: got {got}, want {want}"
        );
    }
}

#[test]
fn no_expected_max_where_it_is_infinite_or_not_computed() {
    assert_eq!(expected_max_ms(&Latency::Pareto(100.0, 1.0), 8.0), None);
    assert_eq!(expected_max_ms(&Latency::Pareto(100.0, 0.5), 8.0), None);
    let mixture = Latency::Mixture(vec![
        (0.5, Latency::Constant(1.0)),
        (1.0, Latency::Constant(2.0)),
    ]);
    assert_eq!(expected_max_ms(&mixture, 8.0), None);
    assert_eq!(expected_max_ms(&Latency::Uniform(200.0, 900.0), 0.0), None);
    assert_eq!(
        expected_max_ms(&Latency::Uniform(200.0, 900.0), f64::NAN),
        None
    );
}

#[test]
fn inputs_a_scenario_can_hold_give_rows_not_panics() {
    let inputs = [
        // A Pareto tail with no mean: no latency rows at all.
        PlanInput {
            latency_mean_ms: f64::INFINITY,
            latency_uniform_ms: None,
            latency: Some(Latency::Pareto(100.0, 0.8)),
            ..article_research_agent()
        },
        // No calls per query, no tokens per call, unbounded concurrency.
        PlanInput {
            calls_per_query: 0.0,
            tokens_per_call: 0.0,
            tpm: Some(1_000.0),
            burst_calls_per_s: Some(10.0),
            max_concurrency: Some(0),
            ..article_research_agent()
        },
        PlanInput {
            rpm: Some(f64::NAN),
            headroom: f64::NAN,
            calls_per_query: f64::INFINITY,
            latency: Some(Latency::Empirical(vec![])),
            latency_uniform_ms: None,
            ..article_research_agent()
        },
        // Values that would overflow are dropped, not shown as inf.
        PlanInput {
            tpm: Some(1e300),
            tokens_per_call: 1e-300,
            ..article_research_agent()
        },
        PlanInput {
            latency: Some(Latency::LogNormal(5.0, 40.0)),
            latency_uniform_ms: None,
            calls_per_query: 1e12,
            ..article_research_agent()
        },
    ];
    for input in &inputs {
        let rows = plan(input);
        assert!(rows.iter().all(|r| r.value.is_finite()), "{rows:?}");
        render(&rows);
    }
    let rows = plan(&inputs[0]);
    assert!(!has(&rows, "fanout_expected_max_ms") && !has(&rows, "sequential_ms"));
    let rows = plan(&inputs[1]);
    assert!(!has(&rows, "queries_per_s_ceiling") && !has(&rows, "tpm_calls_per_min"));
    assert!(!has(&rows, "littles_law_throughput") && !has(&rows, "tpm_exhaustion_s"));
}

#[test]
fn numbers_are_rounded_for_people() {
    for (v, want) in [
        (10_000.0, "10,000"),
        (10_000.0 / 60.0, "166.7"),
        (1.25, "1.25"),
        (0.0125, "0.0125"),
        (-1_234.5, "-1,234.5"),
        (0.0, "0"),
        (1e-11, "0.00000000001"),
        (1_520.000_000_000_1, "1,520"),
    ] {
        assert_eq!(fmt_num(v), want);
    }
}

#[test]
fn a_query_of_several_rounds_counts_every_request_and_token_against_the_ceilings() {
    // stock-quotes: 3 rounds of 10 calls and a model turn between rounds: 32 requests a query.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/stock-quotes.toml");
    let s = scenario::load(&path, &[]).unwrap_or_else(|e| panic!("{e}"));
    let input = PlanInput::from_scenario(&s);
    close(input.calls_per_query, 10.0);
    let rows = plan(&input);
    close(value(&rows, "queries_per_min_ceiling"), 10_000.0 / 32.0);
    close(value(&rows, "fanout_expected_max_ms"), 350.0);
    // With a TPM: 30 calls x 100 tokens + 2 model turns x 1,500 = 6,000 tokens a query, so
    // 600,000 TPM allows 100 queries a minute, below the RPM's 312.5.
    let tpm = [
        "provider.tpm=600000".to_string(),
        "workload.tokens_per_call=100".to_string(),
    ];
    let s = scenario::load(&path, &tpm).unwrap_or_else(|e| panic!("{e}"));
    let rows = plan(&PlanInput::from_scenario(&s));
    close(value(&rows, "queries_per_min_ceiling"), 100.0);
    // At 70 % headroom the TPM still binds first: 0.7 x 600,000 / 6,000 = 70 queries a minute
    // (the RPM's slots would allow 7,000 / 32 = 218.75).
    let tpm70 = [
        tpm[0].clone(),
        tpm[1].clone(),
        "scheduler.headroom=0.7".to_string(),
    ];
    let s = scenario::load(&path, &tpm70).unwrap_or_else(|e| panic!("{e}"));
    close(
        value(
            &plan(&PlanInput::from_scenario(&s)),
            "queries_per_min_at_headroom",
        ),
        70.0,
    );
    // Subagents: 3 agents x 3 rounds x 10 calls, 3 x 2 model turns, 1 synthesis = 97.
    let sub = [
        "workload.subagents={ count = 3, budget_tokens = 100000, orchestrator_budget = 1000000, synthesis_tokens = 500 }"
            .to_string(),
    ];
    let s = scenario::load(&path, &sub).unwrap_or_else(|e| panic!("{e}"));
    let rows = plan(&PlanInput::from_scenario(&s));
    close(value(&rows, "queries_per_min_ceiling"), 10_000.0 / 97.0);
}

#[test]
fn a_runs_length_is_estimated_from_the_rate_its_binding_limit_allows() {
    // What `capsize run --mode realtime` announces up front ("about"): within 20 % of the
    // simulated span for a TPM-bound run (2 %) and for the article's agent, whose queries
    // queue for a slot and so go slower than its RPM ceiling (16 % short).
    for file in ["multi-provider.toml", "research-agent.toml"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(file);
        let s = scenario::load(&path, &[]).unwrap();
        let est = capsize::api::plan::Demand::of(&s)
            .model_seconds(&s)
            .unwrap();
        let outcome = capsize::api::sim::run(&s).unwrap();
        let span = outcome.span.as_secs_f64();
        assert!(
            (est / span - 1.0).abs() < 0.2,
            "{file}: estimated {est} s, simulated {span} s"
        );
    }
}

#[test]
fn a_phase_that_changes_a_limit_has_a_query_ceiling_of_its_own() {
    let text = r#"
name = "phases"
seed = 1
[providers.llm]
rpm = 500
tpm = 200_000
latency = { dist = "constant", ms = 2000 }
[[providers.llm.phases]]
from_s = 600
to_s = 900
tpm = 50_000
[[providers.llm.phases]]
from_s = 1000
to_s = 1100
latency = { dist = "constant", ms = 4000 }
[[providers.llm.phases]]
from_s = 1200
to_s = 1260
outage = "503"
[providers.tools]
rpm = 3000
latency = { dist = "constant", ms = 400 }
[workload]
sessions = 50
duration_s = 1800
rounds = 3
calls_per_query = 8
tokens_per_call = 0
provider = "tools"
model_turn = { tokens = 2600, max_tokens = 500, provider = "llm", at = "around" }
[scheduler]
max_concurrency = 16
rate_limit = true
headroom = 0.9
"#;
    let s = scenario::parse(text, Path::new("phases.toml"), &[]).unwrap();
    let rows = capsize::api::plan::plan_scenario(&s);
    let phases: Vec<&Row> = rows
        .iter()
        .filter(|r| r.key.name() == "phase_queries_per_min")
        .collect();
    // The latency spike changes no limit: two rows, the cut TPM's and the outage's.
    assert_eq!(phases.len(), 2, "{:?}", keys(&rows));
    // 4 turns x 3,100 tokens a query: 50,000 / 12,400 x 0.9.
    close(phases[0].value, 50_000.0 / 12_400.0 * 0.9);
    assert!(
        phases[0].label.contains("llm's phase 600–900 s"),
        "{}",
        phases[0].label
    );
    assert!(
        phases[0].label.contains("(llm TPM 50,000 binds)"),
        "{}",
        phases[0].label
    );
    assert_eq!(phases[1].value, 0.0);
    assert!(
        phases[1].label.ends_with("(an outage)"),
        "{}",
        phases[1].label
    );
    // Outside them, the whole TPM binds.
    close(
        value(&rows, "queries_per_min_at_headroom"),
        200_000.0 / 12_400.0 * 0.9,
    );
}

//! Generated inputs: scenarios built from the whole key space, valid and mutated (wrong types,
//! 0, negative, NaN, inf, 1e308, i64 extremes, huge strings, unicode, deep nesting, missing and
//! unknown keys, in tables and in the tables of arrays). The key space: one `[provider]` or 2-3
//! `[providers.NAME]` with tool calls, model turns and `workload.tools` routed to them or to
//! `none`; providers' phases (at_s or from_s/to_s, outages, limits, latencies, errors), split
//! token limits and generation (`output_tokens`, `ttft`, `tpot`, `max_output_tokens`); model
//! turns' `max_tokens` and `stream`; `[fleet]` of 1-4 replicas, each limiter; adaptive
//! `max_concurrency` tables; retry presets and every retry key. Every one is answered: refused
//! with one line, or run (kept small: a handful of queries) to the end or to the watchdog,
//! never a panic or a hang; and every run that completes keeps the accounting identities (per
//! provider and per phase too, the fleet's and the adaptive limit's figures, the generated
//! answers within their caps). A sample also goes through the binary, which must exit 0, 2 or
//! 4 with one line on stderr for a refusal or a failure.
//!
//! CI runs `PROPTEST_CASES` cases (default 3,000); run it longer with e.g.
//! `PROPTEST_CASES=100000 cargo test --release --test properties`.

use std::sync::mpsc;
use std::time::Duration;

use capsize::api::scenario::{self, Arrivals, Count, Scenario, Stop, Target};
use capsize::api::sim::{self, SimError, SimOutcome};
use capsize::api::summary::{ProviderCounts, Summary};
use capsize::scheduler::Adaptive;
use capsize_mock::{Counters, ProviderConfig};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use toml::{Table, Value};

mod common;
use common::temp::Temp;
use common::{capsize, stderr};

// --- the key space ----------------------------------------------------------------------

fn num(lo: f64, hi: f64) -> BoxedStrategy<Value> {
    prop_oneof![
        (lo..hi).prop_map(Value::Float),
        ((lo.ceil() as i64)..=(hi.floor() as i64).max(lo.ceil() as i64)).prop_map(Value::Integer),
    ]
    .boxed()
}

fn int(lo: i64, hi: i64) -> BoxedStrategy<Value> {
    (lo..=hi).prop_map(Value::Integer).boxed()
}

fn word(words: &'static [&'static str]) -> BoxedStrategy<Value> {
    prop::sample::select(words)
        .prop_map(|w| Value::String(w.to_string()))
        .boxed()
}

fn table(entries: Vec<(&'static str, Value)>) -> Value {
    Value::Table(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

/// A latency distribution, mixtures nested up to `depth`.
fn latency(depth: u32) -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        num(0.0, 500.0).prop_map(|ms| table(vec![("dist", "constant".into()), ("ms", ms)])),
        (num(0.0, 200.0), num(200.0, 900.0)).prop_map(|(a, b)| table(vec![
            ("dist", "uniform".into()),
            ("min_ms", a),
            ("max_ms", b)
        ])),
        (num(1.0, 400.0), num(0.0, 200.0)).prop_map(|(m, sd)| table(vec![
            ("dist", "normal".into()),
            ("mean_ms", m),
            ("sd_ms", sd)
        ])),
        // A log-normal's p95 lies between its mean and 3.87 times it.
        (50.0..400.0f64, 1.05..3.8f64).prop_map(|(m, k)| table(vec![
            ("dist", "lognormal".into()),
            ("mean_ms", Value::Float(m)),
            ("p95_ms", Value::Float(m * k))
        ])),
        (num(-2.0, 6.0), num(0.0, 3.0)).prop_map(|(mu, s)| table(vec![
            ("dist", "lognormal".into()),
            ("mu", mu),
            ("sigma", s)
        ])),
        num(1.0, 500.0).prop_map(|m| table(vec![("dist", "exponential".into()), ("mean_ms", m)])),
        (num(1.0, 100.0), num(1.1, 4.0)).prop_map(|(s, a)| table(vec![
            ("dist", "pareto".into()),
            ("scale_ms", s),
            ("shape", a)
        ])),
        prop::collection::vec(num(0.0, 900.0), 1..6).prop_map(|v| table(vec![
            ("dist", "empirical".into()),
            ("values_ms", Value::Array(v))
        ])),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    let component = (num(0.1, 5.0), latency(depth - 1)).prop_map(|(w, d)| {
        let mut t = d.as_table().cloned().unwrap_or_default();
        t.insert("weight".into(), w);
        Value::Table(t)
    });
    prop_oneof![
        4 => leaf,
        1 => prop::collection::vec(component, 1..3).prop_map(|c| table(vec![
            ("dist", "mixture".into()),
            ("components", Value::Array(c))
        ])),
    ]
    .boxed()
}

fn maybe(s: BoxedStrategy<Value>) -> BoxedStrategy<Option<Value>> {
    prop::option::of(s).boxed()
}

fn boolean() -> BoxedStrategy<Value> {
    any::<bool>().prop_map(Value::Boolean).boxed()
}

/// A float in `lo..hi` (where an integer would fall outside the key's open bounds).
fn float(lo: f64, hi: f64) -> BoxedStrategy<Value> {
    (lo..hi).prop_map(Value::Float).boxed()
}

/// A table of the keys of `keys` each present with its probability.
fn some_of(keys: Vec<(&'static str, f64, BoxedStrategy<Value>)>) -> BoxedStrategy<Table> {
    keys.into_iter()
        .map(|(k, p, s)| {
            prop::option::weighted(p, s)
                .prop_map(move |v| v.map(|v| (k, v)))
                .boxed()
        })
        .collect::<Vec<_>>()
        .prop_map(|kv| {
            kv.into_iter()
                .flatten()
                .map(|(k, v)| (k.to_string(), v))
                .collect()
        })
        .boxed()
}

/// A generating provider's output tokens: a count, or a distribution of counts.
fn tokens() -> BoxedStrategy<Value> {
    prop_oneof![
        int(1, 400),
        (1.0..200.0f64, 0.0..300.0f64).prop_map(|(lo, w)| table(vec![
            ("dist", "uniform".into()),
            ("min", Value::Float(lo)),
            ("max", Value::Float(lo + w))
        ])),
        (1.0..300.0f64, 1.05..3.8f64).prop_map(|(m, k)| table(vec![
            ("dist", "lognormal".into()),
            ("mean", Value::Float(m)),
            ("p95", Value::Float(m * k))
        ])),
        prop::collection::vec(num(1.0, 500.0), 1..4).prop_map(|v| table(vec![
            ("dist", "empirical".into()),
            ("values", Value::Array(v))
        ])),
    ]
    .boxed()
}

/// `output_tokens`, `ttft` and `tpot`: none, all three (a generating provider), or one or two
/// (refused in a provider's own table, an override in a generating provider's phase).
fn generation(w_none: u32, w_all: u32, w_some: u32) -> BoxedStrategy<Table> {
    let all = (tokens(), latency(0), latency(0)).prop_map(|(o, f, p)| {
        let mut t = Table::new();
        t.insert("output_tokens".into(), o);
        t.insert("ttft".into(), f);
        t.insert("tpot".into(), p);
        t
    });
    let keys = ["output_tokens", "ttft", "tpot"];
    prop_oneof![
        w_none => Just(Table::new()),
        w_all => all.clone(),
        w_some => (all, prop::sample::subsequence(keys.to_vec(), 1..=2)).prop_map(|(mut t, gone)| {
            gone.iter().for_each(|k| {
                t.remove(*k);
            });
            t
        }),
    ]
    .boxed()
}

/// An error status's weight: mostly above 0 (all 0 is refused).
fn weight() -> BoxedStrategy<Value> {
    prop_oneof![4 => float(0.1, 3.0), 1 => num(0.0, 3.0)].boxed()
}

fn error_mix() -> BoxedStrategy<Value> {
    some_of(vec![
        ("500", 0.7, weight()),
        ("503", 0.7, weight()),
        ("529", 0.7, weight()),
    ])
    .prop_map(Value::Table)
    .boxed()
}

/// The keys a phase overrides (and `outage`).
fn phase_keys() -> BoxedStrategy<Table> {
    let keys = some_of(vec![
        ("outage", 0.25, word(&["503", "no_answer"])),
        ("rpm", 0.3, num(10.0, 5000.0)),
        ("tpm", 0.15, num(10_000.0, 10_000_000.0)),
        ("itpm", 0.05, num(10_000.0, 10_000_000.0)),
        ("otpm", 0.05, num(1_000.0, 1_000_000.0)),
        (
            "retry_after",
            0.15,
            prop_oneof![word(&["auto", "none"]), num(0.0, 5.0)].boxed(),
        ),
        ("latency", 0.3, latency(1)),
        ("max_in_flight", 0.15, int(1, 50)),
        ("overload", 0.15, word(&["queue", "429", "503"])),
        ("error_rate", 0.3, num(0.0, 0.6)),
        ("error_mix", 0.15, error_mix()),
        ("timeout_rate", 0.15, num(0.0, 0.2)),
    ]);
    (keys, generation(16, 3, 1))
        .prop_map(|(mut t, gen)| {
            t.extend(gen);
            t
        })
        .boxed()
}

/// `phases = [...]`: in time order, not overlapping, each from `at_s` (until the next) or from
/// `from_s` to `to_s`; mostly within the first seconds, where small runs are.
fn phases() -> BoxedStrategy<Value> {
    let one = (
        0.0..0.8f64,
        prop::option::weighted(0.6, 0.05..1.5f64),
        phase_keys(),
    );
    (
        prop::collection::vec(one, 1..4),
        prop_oneof![8 => Just(1.0), 2 => Just(0.01), 1 => Just(300.0)],
    )
        .prop_map(|(specs, scale)| {
            let mut t = 0.0;
            let list = specs
                .into_iter()
                .map(|(gap, len, mut keys)| {
                    let from = t + gap;
                    match len {
                        Some(len) => {
                            keys.insert("from_s".into(), Value::Float(from * scale));
                            keys.insert("to_s".into(), Value::Float((from + len) * scale));
                            t = from + len;
                        }
                        None => {
                            keys.insert("at_s".into(), Value::Float(from * scale));
                            t = from + 0.01;
                        }
                    }
                    Value::Table(keys)
                })
                .collect();
            Value::Array(list)
        })
        .boxed()
}

fn provider() -> BoxedStrategy<Value> {
    (
        some_of(vec![
            ("rpm", 0.5, num(10.0, 5000.0)),
            ("tpm", 0.5, num(10_000.0, 10_000_000.0)),
            ("itpm", 0.1, num(10_000.0, 10_000_000.0)),
            ("otpm", 0.1, num(1_000.0, 1_000_000.0)),
            ("max_in_flight", 0.5, int(1, 50)),
            ("error_mix", 0.1, error_mix()),
            (
                "max_output_tokens",
                0.25,
                prop_oneof![int(1, 2000), int(1, 40_000)].boxed(),
            ),
            ("phases", 0.3, phases()),
        ]),
        word(&["sliding", "fixed", "token_bucket"]),
        prop_oneof![word(&["auto", "none"]), num(0.0, 5.0)],
        latency(2),
        word(&["queue", "429", "503"]),
        num(0.0, 0.3),
        num(0.0, 0.1),
        generation(24, 15, 1),
    )
        .prop_map(|(mut t, window, ra, lat, over, er, tr, gen)| {
            t.insert("window".into(), window);
            t.insert("retry_after".into(), ra);
            t.insert("latency".into(), lat);
            t.insert("overload".into(), over);
            t.insert("error_rate".into(), er);
            t.insert("timeout_rate".into(), tr);
            t.extend(gen);
            Value::Table(t)
        })
        .boxed()
}

fn count() -> BoxedStrategy<Value> {
    prop_oneof![
        int(0, 6),
        (0i64..3, 3i64..8).prop_map(|(a, b)| table(vec![
            ("dist", "uniform_int".into()),
            ("min", Value::Integer(a)),
            ("max", Value::Integer(b))
        ])),
    ]
    .boxed()
}

/// The model turn between rounds, less its `provider` (see [`valid`]).
fn model_turn() -> BoxedStrategy<Value> {
    (
        int(1, 3000),
        some_of(vec![
            ("latency", 0.4, latency(0)),
            (
                "max_tokens",
                0.5,
                prop_oneof![4 => int(1, 600), 1 => int(1, 40_000)].boxed(),
            ),
            (
                "stream",
                0.6,
                prop::bool::weighted(0.7).prop_map(Value::Boolean).boxed(),
            ),
        ]),
    )
        .prop_map(|(tokens, mut t)| {
            t.insert("tokens".into(), tokens);
            Value::Table(t)
        })
        .boxed()
}

fn workload() -> impl Strategy<Value = Value> {
    let shape = (
        any::<bool>(),
        int(1, 5),
        num(0.5, 50.0),
        word(&["poisson", "constant"]),
        prop_oneof![
            int(1, 6).prop_map(|q| ("queries", q)),
            num(0.1, 3.0).prop_map(|d| ("duration_s", d))
        ],
        count(),
        prop_oneof![int(1, 3000), count()],
        int(1, 3),
    );
    let extras = (
        maybe(model_turn()),
        maybe(latency(0)),
        num(0.0, 1.0),
        maybe(num(50.0, 5000.0)),
        maybe(num(0.1, 3.0)),
        maybe(
            (
                int(1, 3),
                int(0, 20_000),
                int(0, 60_000),
                maybe(int(1, 4)),
                int(0, 3000),
            )
                .prop_map(|(c, b, o, it, s)| {
                    let mut m = Table::new();
                    m.insert("count".into(), c);
                    m.insert("budget_tokens".into(), b);
                    m.insert("orchestrator_budget".into(), o);
                    it.map(|v| m.insert("max_iterations".into(), v));
                    m.insert("synthesis_tokens".into(), s);
                    Value::Table(m)
                })
                .boxed(),
        ),
    );
    (shape, extras).prop_map(
        |(
            (closed, sessions, rate, arrival, stop, calls, tokens, rounds),
            (turn, think, wf, pt, stop_at, sub),
        )| {
            let mut t = Table::new();
            if closed {
                t.insert("mode".into(), "closed".into());
                t.insert("sessions".into(), sessions);
            } else {
                t.insert("mode".into(), "open".into());
                t.insert("arrival_rate".into(), rate);
                t.insert("arrival".into(), arrival);
            }
            t.insert(stop.0.into(), stop.1);
            t.insert("calls_per_query".into(), calls);
            t.insert("tokens_per_call".into(), tokens);
            t.insert("rounds".into(), rounds);
            turn.map(|v| t.insert("model_turn".into(), v));
            think.map(|v| t.insert("think_time".into(), v));
            t.insert("write_fraction".into(), wf);
            pt.map(|v| t.insert("parent_timeout_ms".into(), v));
            stop_at.map(|v| t.insert("stop_at_s".into(), v));
            sub.map(|v| t.insert("subagents".into(), v));
            Value::Table(t)
        },
    )
}

/// One kind of tool call, less its `name` and `provider` (see [`valid`]); the flag says
/// whether a tool sent to `none` gets the latency it needs.
fn tool() -> BoxedStrategy<(Option<usize>, Table, bool)> {
    (
        prop::option::weighted(0.6, 0usize..12),
        some_of(vec![
            ("weight", 0.5, num(0.1, 5.0)),
            ("latency", 0.5, latency(0)),
            ("error_rate", 0.3, num(0.0, 0.3)),
            ("tokens", 0.3, prop_oneof![int(0, 3000), count()].boxed()),
        ]),
        prop::bool::weighted(0.9),
    )
        .boxed()
}

/// `max_concurrency`: a number, or an adaptive limit's table (its bounds mostly consistent).
fn concurrency() -> BoxedStrategy<Value> {
    let adaptive = (
        prop::sample::select(&["aimd", "gradient", "fixed"][..]),
        1i64..=8,
        (
            prop::option::weighted(0.5, 0.0..1.0f64),
            prop::option::weighted(0.5, 0.0..1.0f64),
        ),
        some_of(vec![("backoff", 0.4, float(0.05, 0.95))]),
        some_of(vec![
            ("tolerance", 0.4, num(1.0, 5.0)),
            ("smoothing", 0.4, float(0.05, 1.0)),
            ("long_window", 0.4, int(1, 1000)),
        ]),
    )
        .prop_map(|(policy, max, (min, initial), aimd, gradient)| {
            let mut t = Table::new();
            t.insert("adaptive".into(), policy.into());
            t.insert("max".into(), Value::Integer(max));
            if policy != "fixed" {
                // min in [1, max], initial in [min, max].
                let lo = min.map_or(1, |f| 1 + (f * max as f64) as i64).min(max);
                min.map(|_| t.insert("min".into(), Value::Integer(lo)));
                let at = |f: f64| lo + (f * (max - lo + 1) as f64) as i64;
                initial.map(|f| t.insert("initial".into(), Value::Integer(at(f).min(max))));
                t.extend(aimd);
            }
            if policy == "gradient" {
                t.extend(gradient);
            }
            Value::Table(t)
        });
    prop_oneof![3 => int(0, 8), 1 => adaptive].boxed()
}

fn retry() -> BoxedStrategy<Value> {
    const CODES: [i64; 8] = [408, 409, 429, 500, 502, 503, 504, 529];
    some_of(vec![
        (
            "preset",
            0.4,
            word(&["capsize", "openai-python", "anthropic-python"]),
        ),
        ("max_retries", 0.8, int(0, 4)),
        ("base_ms", 0.8, num(0.0, 500.0)),
        ("cap_ms", 0.8, num(500.0, 5000.0)),
        ("jitter", 0.8, word(&["full", "equal", "none", "reduce"])),
        ("honor_retry_after", 0.7, boolean()),
        ("retry_after", 0.3, word(&["at_least", "instead"])),
        ("retry_after_cap_ms", 0.2, num(0.0, 60_000.0)),
        ("retry_after_max_ms", 0.2, num(0.0, 60_000.0)),
        ("pause_limiter", 0.3, boolean()),
        ("retries_through_limiter", 0.3, boolean()),
        ("retries_jump_queue", 0.1, boolean()),
        (
            "retry_on",
            0.2,
            prop::collection::vec(
                prop::sample::select(&CODES[..]).prop_map(Value::Integer),
                0..4,
            )
            .prop_map(Value::Array)
            .boxed(),
        ),
        ("retry_timeouts", 0.7, boolean()),
    ])
    .prop_map(Value::Table)
    .boxed()
}

fn scheduler() -> impl Strategy<Value = Value> {
    (
        concurrency(),
        num(0.1, 1.0),
        any::<bool>(),
        num(0.1, 3.0),
        prop::option::weighted(0.9, retry()),
        num(100.0, 60_000.0),
        int(0, 10),
        word(&["truncate", "batch"]),
        any::<bool>(),
    )
        .prop_map(|(mc, h, rl, burst, retry, timeout, mpt, over, tc)| {
            let mut t = Table::new();
            t.insert("max_concurrency".into(), mc);
            t.insert("headroom".into(), h);
            t.insert("rate_limit".into(), Value::Boolean(rl));
            t.insert("burst_s".into(), burst);
            retry.map(|r| t.insert("retry".into(), r));
            t.insert("timeout_ms".into(), timeout);
            t.insert("max_parallel_tools".into(), mpt);
            t.insert("over_cap".into(), over);
            t.insert("transport_cancel".into(), Value::Boolean(tc));
            Value::Table(t)
        })
}

fn fleet() -> BoxedStrategy<Value> {
    (int(1, 4), maybe(word(&["local", "split", "shared"])))
        .prop_map(|(replicas, limiter)| {
            let mut t = Table::new();
            t.insert("replicas".into(), replicas);
            limiter.map(|l| t.insert("limiter".into(), l));
            Value::Table(t)
        })
        .boxed()
}

/// Names of named providers, and of tools.
const PROVIDERS: [&str; 3] = ["llm", "search", "db"];
const TOOLS: [&str; 4] = ["web_search", "fetch_page", "calculator", "sql"];

/// Where a call goes: one of `names`, or `"none"` (the last choice).
fn route(names: &[&str], i: usize) -> Value {
    let i = i % (names.len() + 1);
    Value::String(names.get(i).copied().unwrap_or("none").to_string())
}

fn valid() -> impl Strategy<Value = Table> {
    (
        "[a-z][a-z0-9-]{0,12}",
        0i64..1000,
        prop::bool::weighted(0.4),
        (2usize..=3, prop::collection::vec(provider(), 3)),
        workload(),
        (
            prop::option::weighted(0.9, 0usize..12),
            prop::option::weighted(0.7, 0usize..12),
        ),
        prop::option::weighted(0.35, prop::collection::vec(tool(), 1..4)),
        scheduler(),
        prop::option::weighted(0.3, fleet()),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(
                name,
                seed,
                named,
                (n, mut ps),
                mut w,
                (to, turn_to),
                tools,
                s,
                fleet,
                keep_latency,
            )| {
                let mut t = Table::new();
                t.insert("name".into(), Value::String(name));
                t.insert("seed".into(), Value::Integer(seed));
                // One `[provider]` (named "provider" where a call names it), or 2-3 named.
                let names: &[&str] = if named {
                    ps.truncate(n);
                    let tables = PROVIDERS.iter().map(|p| p.to_string()).zip(ps);
                    t.insert("providers".into(), Value::Table(tables.collect()));
                    &PROVIDERS[..n]
                } else {
                    t.insert("provider".into(), ps.swap_remove(0));
                    &["provider"]
                };
                let wt = w.as_table_mut().expect("a table");
                // With one provider, tool calls mostly go to it by default.
                let to = to.filter(|i| named || i % 4 == 0);
                to.map(|i| wt.insert("provider".into(), route(names, i)));
                if let Some(Value::Table(turn)) = wt.get_mut("model_turn") {
                    turn_to.map(|i| turn.insert("provider".into(), route(names, i)));
                    // A model turn's own latency is refused by a generating provider: mostly
                    // left out then.
                    let goes_to = turn
                        .get("provider")
                        .or(to.map(|i| route(names, i)).as_ref())
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .or_else(|| (!named).then(|| "provider".to_string()));
                    let table_of = |name: &str| match named {
                        true => t.get("providers").and_then(|p| p.get(name)),
                        false => t.get("provider"),
                    };
                    let generates = goes_to
                        .and_then(|name| table_of(&name))
                        .is_some_and(|p| p.get("output_tokens").is_some());
                    if generates && !keep_latency {
                        turn.remove("latency");
                    }
                }
                if let Some(list) = tools {
                    let list = list
                        .into_iter()
                        .zip(TOOLS)
                        .map(|((to, mut tool, needs), name)| {
                            tool.insert("name".into(), name.into());
                            if let Some(i) = to {
                                let r = route(names, i);
                                if r.as_str() == Some("none") && needs {
                                    tool.entry("latency").or_insert_with(|| {
                                        table(vec![("dist", "constant".into()), ("ms", 5.into())])
                                    });
                                }
                                tool.insert("provider".into(), r);
                            }
                            Value::Table(tool)
                        })
                        .collect();
                    wt.insert("tools".into(), Value::Array(list));
                }
                t.insert("workload".into(), w);
                t.insert("scheduler".into(), s);
                fleet.map(|f| t.insert("fleet".into(), f));
                t
            },
        )
}

/// A value no key expects, or a boundary one that some refuse.
fn hostile() -> BoxedStrategy<Value> {
    let nested = (1usize..40).prop_map(|depth| {
        let mut v = Value::Integer(1);
        for _ in 0..depth {
            v = table(vec![("a", v)]);
        }
        v
    });
    prop_oneof![
        Just(Value::Integer(0)),
        Just(Value::Integer(-1)),
        Just(Value::Float(-0.5)),
        Just(Value::Float(f64::NAN)),
        Just(Value::Float(f64::INFINITY)),
        Just(Value::Float(f64::NEG_INFINITY)),
        Just(Value::Float(1e308)),
        Just(Value::Float(5e-324)),
        Just(Value::Integer(i64::MAX)),
        Just(Value::Integer(i64::MIN)),
        Just(Value::Integer(4_294_967_295)),
        Just(Value::String(String::new())),
        Just(Value::String("x".repeat(100_000))),
        Just(Value::String("ü\u{202e}\u{1b}[31m<b>\n# h".into())),
        Just(Value::Boolean(true)),
        Just(Value::Array(vec![])),
        Just(Value::Array((0..1000).map(Value::Integer).collect())),
        nested,
        latency(3),
    ]
    .boxed()
}

/// One step of a key path: a key of a table, or an entry of an array.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    At(usize),
}

/// Every path in `v`, tables and arrays included, down into the tables of arrays (phases,
/// tools) as well.
fn paths(v: &Value, prefix: &[Step], out: &mut Vec<Vec<Step>>) {
    let mut go = |step: Step, inner: &Value| {
        let mut p = prefix.to_vec();
        p.push(step);
        out.push(p.clone());
        paths(inner, &p, out);
    };
    match v {
        Value::Table(t) => t.iter().for_each(|(k, v)| go(Step::Key(k.clone()), v)),
        // The entries of arrays of tables; not each number of a list.
        Value::Array(a) if a.iter().any(Value::is_table) => {
            a.iter().enumerate().for_each(|(i, v)| go(Step::At(i), v))
        }
        _ => {}
    }
}

fn at<'a>(v: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    let mut cur = v;
    for s in path {
        cur = match (cur, s) {
            (Value::Table(t), Step::Key(k)) => t.get_mut(k)?,
            (Value::Array(a), Step::At(i)) => a.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(cur)
}

#[derive(Debug, Clone)]
enum Mutation {
    Replace(usize, Value),
    Remove(usize),
    Unknown(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        6 => (any::<usize>(), hostile()).prop_map(|(i, v)| Mutation::Replace(i, v)),
        1 => any::<usize>().prop_map(Mutation::Remove),
        1 => any::<usize>().prop_map(Mutation::Unknown),
    ]
}

fn mutate(t: &mut Table, m: &Mutation) {
    let mut root = Value::Table(std::mem::take(t));
    let mut all = Vec::new();
    paths(&root, &[], &mut all);
    let pick = |i: usize| all[i % all.len()].clone();
    let (p, what) = match m {
        Mutation::Replace(i, _) | Mutation::Remove(i) | Mutation::Unknown(i) => (pick(*i), m),
    };
    let (last, parent) = p.split_last().expect("a path has a step");
    match (at(&mut root, parent), last, what) {
        (Some(Value::Table(t)), Step::Key(k), Mutation::Replace(_, v)) => {
            t.insert(k.clone(), v.clone());
        }
        (Some(Value::Array(a)), Step::At(i), Mutation::Replace(_, v)) => a[*i] = v.clone(),
        (Some(Value::Table(t)), Step::Key(k), Mutation::Remove(_)) => {
            t.remove(k);
        }
        (Some(Value::Array(a)), Step::At(i), Mutation::Remove(_)) => {
            a.remove(*i);
        }
        (Some(Value::Table(t)), _, Mutation::Unknown(_)) => {
            t.insert("no_such_key".into(), Value::Integer(1));
        }
        (Some(Value::Array(a)), Step::At(i), Mutation::Unknown(_)) => {
            if let Some(Value::Table(t)) = a.get_mut(*i) {
                t.insert("no_such_key".into(), Value::Integer(1));
            }
        }
        _ => {}
    }
    if let Value::Table(back) = root {
        *t = back;
    }
}

fn document() -> impl Strategy<Value = String> {
    (valid(), prop::collection::vec(mutation(), 0..3)).prop_map(|(mut t, ms)| {
        for m in &ms {
            mutate(&mut t, m);
        }
        toml::to_string(&t).unwrap_or_default()
    })
}

// --- the checks ---------------------------------------------------------------------------

/// Keeps a run small whatever the scenario says: a handful of queries, calls, sessions and
/// replicas.
fn small(mut s: Scenario) -> Scenario {
    let w = &mut s.workload;
    w.stop = match w.stop {
        Stop::Queries(n) => Stop::Queries(n.min(6)),
        // Open: about six arrivals. Closed: a session starts at most one query a model
        // microsecond, so 5 ms is at most 5,000 queries a session (queries that take no time).
        Stop::Duration(d) => Stop::Duration(d.min(match w.arrivals {
            Arrivals::Open { rate, .. } => Duration::from_secs_f64((6.0 / rate).min(3600.0)),
            Arrivals::Closed { .. } => Duration::from_millis(5),
        })),
    };
    if let Arrivals::Closed { sessions } = &mut w.arrivals {
        *sessions = (*sessions).min(5);
    }
    w.calls_per_query = match w.calls_per_query {
        Count::Fixed(n) => Count::Fixed(n.min(12)),
        Count::Uniform(lo, hi) => Count::Uniform(lo.min(12), hi.min(12)),
    };
    w.rounds = w.rounds.min(4);
    if let Some(sub) = &mut w.subagents {
        sub.count = sub.count.min(4);
    }
    s.scheduler.retry.max_retries = s.scheduler.retry.max_retries.min(4);
    s.fleet.replicas = s.fleet.replicas.min(4);
    s
}

/// What the runs that completed exercised: how many had each feature.
#[derive(Debug, Default, Clone, Copy)]
struct Reached {
    named_providers: u32,
    calls_to_none: u32,
    phases: u32,
    phase_traffic: u32,
    fleet: u32,
    adaptive: u32,
    preset: u32,
    generated: u32,
    max_tokens: u32,
    streamed: u32,
}

/// What one document came to.
#[derive(Debug)]
enum Answer {
    Refused,
    Ran(Reached),
    Watchdog,
}

/// `received = served + rate_limited + errored + timed_out`.
fn adds_up(c: &Counters) -> bool {
    c.received == c.served + c.rate_limited + c.errored + c.timed_out
}

/// Every field of `a` at most `b`'s.
fn within(a: &Counters, b: &Counters) -> bool {
    a.received <= b.received
        && a.served <= b.served
        && a.rate_limited <= b.rate_limited
        && a.errored <= b.errored
        && a.timed_out <= b.timed_out
        && a.tokens_charged <= b.tokens_charged
}

/// A provider's phases: as many as its table has, each adding up, together within its counts.
fn phases_add_up(
    what: &str,
    p: &ProviderCounts,
    config: &ProviderConfig,
    checks: &mut Vec<(bool, String)>,
) {
    checks.push((
        p.phases.len() == config.phases.len(),
        format!("{what}.phases has one entry per phase"),
    ));
    let mut sum = Counters::default();
    for (i, ph) in p.phases.iter().enumerate() {
        checks.push((
            adds_up(&ph.counters),
            format!("{what}.phases[{i}]: received = served + rate_limited + errored + timed_out"),
        ));
        let when = config.phases.get(i).map(|c| {
            let to = c.to.map(|t| t.as_secs_f64());
            (c.from.as_secs_f64(), to)
        });
        checks.push((
            when == Some((ph.from_s, ph.to_s)),
            format!("{what}.phases[{i}]: from_s and to_s are the phase's"),
        ));
        sum = sum.plus(ph.counters);
    }
    checks.push((
        within(&sum, &p.counters),
        format!("{what}: the phases' counts are within the provider's"),
    ));
}

fn identities(sc: &Scenario, out: &SimOutcome, s: &Summary) -> Result<(), String> {
    let p = &s.provider.counters;
    let ok = s.latency_ms.call.count;
    let mut checks = vec![
        (
            p.received == s.attempts,
            "provider received = attempts".into(),
        ),
        (
            adds_up(p),
            "received = served + rate_limited + errored + timed_out".into(),
        ),
        (
            s.calls == ok + s.errors + s.cancelled,
            "calls = ok + errors + cancelled".into(),
        ),
        (
            s.queries_started == s.queries + s.queries_abandoned,
            "queries started = finished + abandoned".into(),
        ),
    ];
    // Named providers: each one's counts (and `none`'s, the tools sent to no provider), which
    // `provider` adds up; the one-provider form reports none of them.
    if sc.named_providers {
        let mut sum = Counters::default();
        for (name, np) in &s.providers {
            let c = &np.counts.counters;
            checks.push((
                adds_up(c),
                format!("providers.{name}: received = served + rate_limited + errored + timed_out"),
            ));
            match sc.providers.iter().find(|p| &p.name == name) {
                Some(config) => phases_add_up(
                    &format!("providers.{name}"),
                    &np.counts,
                    &config.config,
                    &mut checks,
                ),
                None => checks.push((
                    name == "none" && np.counts.phases.is_empty(),
                    format!("providers.{name} is a provider of the scenario, or none"),
                )),
            }
            sum = sum.plus(*c);
        }
        checks.push((
            sc.providers
                .iter()
                .all(|p| s.providers.contains_key(&p.name)),
            "every provider is in providers".into(),
        ));
        checks.push((
            sum == *p,
            "provider = the sum of providers.* (none included)".into(),
        ));
        checks.push((
            s.provider.phases.is_empty(),
            "provider.phases is empty with named providers".into(),
        ));
    } else {
        checks.push((
            s.providers.is_empty(),
            "no providers.* without named providers".into(),
        ));
        phases_add_up(
            "provider",
            &s.provider,
            &sc.providers[0].config,
            &mut checks,
        );
    }
    // A fleet: every replica's queries, which add up to the run's.
    let k = sc.fleet.replicas;
    checks.push((
        out.replica_queries.len() == k && out.replica_queries.iter().sum::<u64>() == s.queries,
        "the replicas' queries add up to queries".into(),
    ));
    match &s.fleet {
        None => checks.push((k == 1, "a fleet of several has a fleet summary".into())),
        Some(f) => checks.push((
            k > 1
                && f.replicas == k as u64
                && f.limiter == sc.fleet.limiter.name()
                && f.queries_min <= f.queries_max
                && f.queries_min * f.replicas <= s.queries
                && s.queries <= f.queries_max * f.replicas,
            "fleet: replicas, limiter, and queries_min x K <= queries <= queries_max x K".into(),
        )),
    }
    // An adaptive limit: within its bounds, its mean between its lowest and highest.
    match (&s.concurrency_limit, sc.scheduler.adaptive) {
        (None, None) => {}
        (Some(l), Some(a)) => {
            let (policy, lo, hi) = match a {
                Adaptive::Aimd(a) => ("aimd", a.min, a.max),
                Adaptive::Gradient(g) => ("gradient", g.min, g.max),
            };
            checks.push((
                l.policy == policy
                    && out.limits.len() == k
                    && lo as u64 <= l.min
                    && l.min <= l.max
                    && l.max <= hi as u64
                    && l.min as f64 - 0.002 <= l.mean
                    && l.mean <= l.max as f64 + 0.002,
                format!(
                    "concurrency_limit: {policy}, one per replica, {lo} <= min <= mean <= max <= {hi}"
                ),
            ));
        }
        _ => checks.push((
            false,
            "concurrency_limit is there exactly for an adaptive limit".into(),
        )),
    }
    // A generating provider's answers: each from 1 token to the cap (the turn's max_tokens,
    // the provider's max_output_tokens); a first token only for streamed answers.
    if let Some(g) = &s.generation {
        let turn = sc.workload.model_turn.as_ref();
        let cap = match sc.workload.model_target {
            Target::Provider(i) => sc.providers[i].config.max_output_tokens,
            Target::Unlimited => 0,
        };
        let cap = turn.and_then(|t| t.max_tokens).map_or(cap, |m| m.min(cap));
        let stream = turn.is_some_and(|t| t.stream);
        checks.push((
            g.end_to_end_ms.count == g.calls
                && g.calls <= p.served
                && g.calls <= g.output_tokens
                && g.output_tokens <= g.calls.saturating_mul(cap),
            format!("generation: calls answered <= served, 1 to {cap} tokens each"),
        ));
        checks.push((
            match (&g.ttft_ms, &g.tpot_ms) {
                (None, None) => !stream || g.calls == 0,
                (Some(f), None) => stream && f.count == g.calls,
                (Some(f), Some(t)) => stream && f.count == g.calls && t.count <= g.calls,
                (None, Some(_)) => false,
            },
            "generation: ttft and tpot exactly for streamed answers".into(),
        ));
    }
    match checks.iter().find(|(holds, _)| !holds) {
        Some((_, what)) => Err(format!("{what} fails: {}", s.to_json())),
        None => Ok(()),
    }
}

/// The features a completed run of `sc` exercised.
fn reached(text: &str, sc: &Scenario, s: &Summary) -> Reached {
    let raw: Table = toml::from_str(text).unwrap_or_default();
    let preset = raw
        .get("scheduler")
        .and_then(|s| s.get("retry"))
        .and_then(|r| r.get("preset"))
        .is_some();
    let phase_traffic = s
        .provider
        .phases
        .iter()
        .chain(s.providers.values().flat_map(|p| &p.counts.phases))
        .any(|ph| ph.counters.received > 0);
    let turn = sc.workload.model_turn.as_ref();
    let n = |b: bool| u32::from(b);
    Reached {
        named_providers: n(sc.named_providers),
        calls_to_none: n(s
            .providers
            .get("none")
            .is_some_and(|p| p.counts.counters.received > 0)),
        phases: n(sc.providers.iter().any(|p| !p.config.phases.is_empty())),
        phase_traffic: n(phase_traffic),
        fleet: n(sc.fleet.replicas > 1),
        adaptive: n(sc.scheduler.adaptive.is_some()),
        preset: n(preset),
        generated: n(s.generation.as_ref().is_some_and(|g| g.calls > 0)),
        max_tokens: n(turn.is_some_and(|t| t.max_tokens.is_some())),
        streamed: n(s.generation.as_ref().is_some_and(|g| g.ttft_ms.is_some())),
    }
}

/// Validates and (if valid) runs `text` in-process on a thread of its own, under a wall-clock
/// watchdog: a panic or a hang fails the property.
fn answer(text: &str) -> Result<Answer, String> {
    let path = std::path::Path::new("generated.toml");
    let scenario = match scenario::parse(text, path, &[]) {
        Err(e) => {
            let line = e.to_string();
            return if line.contains('\n') {
                Err(format!("a refusal of more than one line: {line:?}"))
            } else {
                Ok(Answer::Refused)
            };
        }
        Ok(s) => small(s),
    };
    let (tx, rx) = mpsc::channel();
    let s2 = scenario.clone();
    std::thread::spawn(move || {
        let out = std::panic::catch_unwind(|| sim::run(&s2));
        let _ = tx.send(out.map_err(|_| ()));
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Err(_) => Err(format!("no answer within 60 s: {text}")),
        Ok(Err(())) => Err(format!("panicked on {text}")),
        Ok(Ok(Err(SimError::Watchdog(_)))) => Ok(Answer::Watchdog),
        Ok(Ok(Err(e))) => Err(format!("{e} on {text}")),
        Ok(Ok(Ok(outcome))) => {
            let summary = Summary::new(&scenario, &outcome);
            identities(&scenario, &outcome, &summary).map_err(|e| format!("{e} on {text}"))?;
            Ok(Answer::Ran(reached(text, &scenario, &summary)))
        }
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000)
}

#[test]
fn every_generated_scenario_is_answered_and_every_run_adds_up() {
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let tally = std::cell::Cell::new((0u32, 0u32, 0u32));
    let reach = std::cell::Cell::new(Reached::default());
    let result = runner.run(&document(), |text| {
        let (r, n, w) = tally.get();
        tally.set(match answer(&text) {
            Ok(Answer::Refused) => (r + 1, n, w),
            Ok(Answer::Ran(f)) => {
                let t = reach.get();
                reach.set(Reached {
                    named_providers: t.named_providers + f.named_providers,
                    calls_to_none: t.calls_to_none + f.calls_to_none,
                    phases: t.phases + f.phases,
                    phase_traffic: t.phase_traffic + f.phase_traffic,
                    fleet: t.fleet + f.fleet,
                    adaptive: t.adaptive + f.adaptive,
                    preset: t.preset + f.preset,
                    generated: t.generated + f.generated,
                    max_tokens: t.max_tokens + f.max_tokens,
                    streamed: t.streamed + f.streamed,
                });
                (r, n + 1, w)
            }
            Ok(Answer::Watchdog) => (r, n, w + 1),
            Err(e) => return Err(TestCaseError::fail(e)),
        });
        Ok(())
    });
    let (refused, ran, watchdog) = tally.get();
    let reach = reach.get();
    eprintln!(
        "generated scenarios: {refused} refused, {ran} ran, {watchdog} stopped by the watchdog; \
         of the runs: {reach:?}"
    );
    result.unwrap();
    // The generator must reach both sides, or the property says little.
    assert!(refused > 0 && ran > 0, "{refused} refused, {ran} ran");
    // ... and, at about CI's size, every feature in runs that complete (the rarest, a streamed
    // answer, is about 1 run in 160: 18 expected at 3,000 cases).
    if cases() >= 2000 {
        let Reached {
            named_providers,
            calls_to_none,
            phases,
            phase_traffic,
            fleet,
            adaptive,
            preset,
            generated,
            max_tokens,
            streamed,
        } = reach;
        assert!(
            [
                named_providers,
                calls_to_none,
                phases,
                phase_traffic,
                fleet,
                adaptive,
                preset,
                generated,
                max_tokens,
                streamed
            ]
            .iter()
            .all(|&n| n > 0),
            "a feature no completed run reached: {reach:?}"
        );
    }
    // Memory follows the work: no case may have grown the process past a bound.
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if let Some(kb) = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    {
        assert!(kb < 2 << 20, "peak RSS {kb} kB");
    }
}

#[test]
fn the_binary_answers_generated_scenarios_with_an_exit_code_and_one_line() {
    let t = Temp::new("properties", "binary");
    let mut runner = TestRunner::new(Config {
        cases: (cases() / 8).max(16),
        failure_persistence: None,
        ..Config::default()
    });
    let file = t.path("s.toml");
    let out = t.path("out");
    // Exit codes 0, 2 and 4 seen, and how many ran features of [`Reached`].
    let codes = std::cell::Cell::new([0u32; 3]);
    let result = runner.run(&document(), |text| {
        // Only documents that run small as written: the binary gets no size cap.
        let small_as_written = match scenario::parse(&text, &file, &[]) {
            Err(_) => true,
            Ok(s) => small(s.clone()) == s,
        };
        if !small_as_written {
            return Ok(());
        }
        std::fs::write(&file, &text).unwrap();
        let o = capsize(&[
            "run",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        let code = o.status.code();
        let err = stderr(&o);
        prop_assert!(
            matches!(code, Some(0 | 2 | 4)),
            "exit {code:?} on {text}: {err}"
        );
        if code != Some(0) {
            prop_assert_eq!(err.lines().count(), 1, "{}", err);
        }
        let mut c = codes.get();
        c[match code {
            Some(0) => 0,
            Some(2) => 1,
            _ => 2,
        }] += 1;
        codes.set(c);
        Ok(())
    });
    let [ok, refused, failed] = codes.get();
    eprintln!("the binary: {ok} exit 0, {refused} exit 2, {failed} exit 4");
    result.unwrap();
}

// --- `--set` over every scenario form ----------------------------------------------------

/// What a generated `--set` names: a key of the document, the same key under the other
/// provider form (`provider.X` and `providers.NAME.X`), a key under it that no table has, a key
/// under a scalar, or a malformed key.
#[derive(Debug, Clone)]
enum SetPath {
    Existing(usize),
    Swapped(usize),
    Unknown(usize),
    UnderLeaf(usize),
    Odd(&'static str),
}

/// What a generated `--set` gives: a hostile value, another key's value (a table where a scalar
/// goes, and back), or text that is not quite TOML (integers past i64, unclosed tables).
#[derive(Debug, Clone)]
enum SetValue {
    /// The value the document has at the path it was drawn from.
    Same,
    Hostile(Value),
    Another(usize),
    Text(&'static str),
}

fn set_path() -> impl Strategy<Value = SetPath> {
    prop_oneof![
        4 => any::<usize>().prop_map(SetPath::Existing),
        3 => any::<usize>().prop_map(SetPath::Swapped),
        1 => any::<usize>().prop_map(SetPath::Unknown),
        1 => any::<usize>().prop_map(SetPath::UnderLeaf),
        1 => prop::sample::select(&[
            "", ".", "a..b", "provider.", ".rpm", "provider", "providers", "providers.llm",
            "workload.tools.0", "workload.tools.9.name", "provider.phases.0.rpm", "fleet",
            "scheduler.client.keepalive", "sweep.\"x\"", "no such key", "ü.ß",
        ][..])
        .prop_map(SetPath::Odd),
    ]
}

fn set_value() -> impl Strategy<Value = SetValue> {
    prop_oneof![
        6 => Just(SetValue::Same),
        3 => hostile().prop_map(SetValue::Hostile),
        3 => any::<usize>().prop_map(SetValue::Another),
        2 => prop::sample::select(&[
            "18446744073709551615",
            "-9223372036854775809",
            "{ preset = \"openai-python\", keepalive = 18446744073709551615 }",
            "[1, 99999999999999999999999999999999999999999]",
            "{ dist = \"constant\", ms = 0x1_0000_0000_0000_0000 }",
            "{ unclosed",
            "[1, 2",
            "openai-python",
            "",
            "=",
            "\"a\nb\"",
            "a\nb = 1",
            "1e400",
            "[[1], [2]]",
            "{}",
            "[]",
        ][..])
        .prop_map(SetValue::Text),
    ]
}

/// A path as a `--set` writes it: keys joined by dots, an array entry by its index.
fn dotted(path: &[Step]) -> String {
    let seg = |s: &Step| match s {
        Step::Key(k) => k.clone(),
        Step::At(i) => i.to_string(),
    };
    path.iter().map(seg).collect::<Vec<_>>().join(".")
}

/// `provider.X` as `providers.llm.X`, `providers.NAME.X` as `provider.X`; others as they are.
fn swapped(path: &str) -> String {
    if let Some(rest) = path.strip_prefix("providers.") {
        let rest = rest.split_once('.').map_or("", |(_, r)| r);
        return if rest.is_empty() {
            "provider".into()
        } else {
            format!("provider.{rest}")
        };
    }
    match path.strip_prefix("provider") {
        Some("") => "providers.llm".into(),
        Some(rest) if rest.starts_with('.') => format!("providers.llm{rest}"),
        _ => path.to_string(),
    }
}

/// The `--set` argument `p = v` against the document `t`.
fn set_arg(t: &Table, p: &SetPath, v: &SetValue) -> String {
    let root = Value::Table(t.clone());
    let mut all = Vec::new();
    paths(&root, &[], &mut all);
    let pick = |i: usize| dotted(&all[i % all.len()]);
    let value_at = |p: &[Step]| {
        let mut r = root.clone();
        at(&mut r, p).map(|v| v.to_string()).unwrap_or_default()
    };
    let drawn = match p {
        SetPath::Existing(i) | SetPath::Swapped(i) | SetPath::Unknown(i) => {
            Some(&all[i % all.len()])
        }
        _ => None,
    };
    let key = match p {
        SetPath::Existing(i) => pick(*i),
        SetPath::Swapped(i) => swapped(&pick(*i)),
        SetPath::Unknown(i) => format!("{}.no_such_key", pick(*i)),
        SetPath::UnderLeaf(i) => {
            let leaf = all.iter().filter(|p| {
                let mut r = root.clone();
                at(&mut r, p).is_some_and(|v| !v.is_table() && !v.is_array())
            });
            let leaves: Vec<&Vec<Step>> = leaf.collect();
            format!("{}.x", dotted(leaves[i % leaves.len()]))
        }
        SetPath::Odd(k) => k.to_string(),
    };
    let value = match v {
        SetValue::Same => drawn.map(|p| value_at(p)).unwrap_or_else(|| "1".into()),
        SetValue::Hostile(v) => v.to_string(),
        SetValue::Another(i) => value_at(&all[i % all.len()]),
        SetValue::Text(s) => s.to_string(),
    };
    format!("{key}={value}")
}

/// A valid scenario of any form and 1-3 `--set` arguments against it.
fn with_sets() -> impl Strategy<Value = (String, Vec<String>)> {
    (
        valid(),
        prop::collection::vec((set_path(), set_value()), 1..4),
    )
        .prop_map(|(t, sets)| {
            let sets = sets.iter().map(|(p, v)| set_arg(&t, p, v)).collect();
            (toml::to_string(&t).unwrap_or_default(), sets)
        })
}

/// How `scenario::parse` answered `text` with `sets`: `Ok(true)` it gave a scenario, `Ok(false)`
/// it refused in one line naming a key or the --set; `Err` says what else it did.
fn answers_sets(text: &str, sets: &[String]) -> Result<bool, String> {
    let path = std::path::Path::new("generated.toml");
    match std::panic::catch_unwind(|| scenario::parse(text, path, sets)) {
        Err(_) => Err(format!("panicked on {sets:?} over {text}")),
        Ok(Ok(_)) => Ok(true),
        Ok(Err(e)) => {
            let line = e.to_string();
            let named = e.key.is_some() || line.contains("--set");
            let one = !line.contains('\n') || sets.iter().any(|s| s.contains('\n'));
            match (named, one) {
                (true, true) => Ok(false),
                _ => Err(format!("{line:?}: not one line naming a key, on {sets:?}")),
            }
        }
    }
}

#[test]
fn every_set_over_every_scenario_form_gives_a_scenario_or_names_its_key() {
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let tally = std::cell::Cell::new((0u32, 0u32));
    let result = runner.run(&with_sets(), |(text, sets)| {
        let (ok, refused) = tally.get();
        match answers_sets(&text, &sets) {
            Ok(true) => tally.set((ok + 1, refused)),
            Ok(false) => tally.set((ok, refused + 1)),
            Err(e) => return Err(TestCaseError::fail(e)),
        }
        Ok(())
    });
    let (ok, refused) = tally.get();
    eprintln!("--set: {ok} scenarios, {refused} refused");
    result.unwrap();
    assert!(ok > 0 && refused > 0, "{ok} scenarios, {refused} refused");
}

#[test]
fn the_binary_refuses_a_bad_set_with_exit_2_and_one_line() {
    let t = Temp::new("properties", "sets");
    let mut runner = TestRunner::new(Config {
        cases: (cases() / 8).max(16),
        failure_persistence: None,
        ..Config::default()
    });
    let file = t.path("s.toml");
    let out = t.path("out");
    let refusals = std::cell::Cell::new(0u32);
    let result = runner.run(&with_sets(), |(text, sets)| {
        // Only the refusals: what the library accepts runs in the property above.
        if scenario::parse(&text, &file, &sets).is_ok() {
            return Ok(());
        }
        std::fs::write(&file, &text).unwrap();
        let mut args = vec![
            "run",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        for s in &sets {
            args.extend(["--set", s.as_str()]);
        }
        let o = capsize(&args);
        let err = stderr(&o);
        prop_assert_eq!(o.status.code(), Some(2), "{:?} on {}: {}", sets, text, err);
        prop_assert_eq!(err.lines().count(), 1, "{}", err);
        prop_assert!(!out.exists(), "a refusal writes nothing");
        refusals.set(refusals.get() + 1);
        Ok(())
    });
    eprintln!("the binary: {} --set refusals", refusals.get());
    result.unwrap();
}

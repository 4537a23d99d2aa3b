//! The article's claims, one per row of `reports/article/README.md`: what it says, the closed
//! form under its own model, which scenario measures it, and how its figure stands.

use serde_json::Value;

use crate::analysis::plan::expected_max_ms;
use crate::engine::scenario::{Count, Scenario, Stop};
use crate::engine::summary::metrics;

use capsize_mock::Latency;

/// How the simulated value is held against the closed form.
pub enum Check {
    /// Within this relative tolerance (absolute equality when the closed form is 0).
    Within(f64),
    /// The closed form is an upper bound the simulation must stay at or under; says why.
    Upper(&'static str),
    /// The closed form is a lower bound the simulation must stay at or over; says why.
    Lower(&'static str),
    /// No closed form: the value is measured; says what drives it.
    Measured(&'static str),
}

/// How the article's own figure stands against the closed form.
pub enum Article {
    /// It states the closed form's value.
    Agrees,
    /// It rounds the closed form's value; says how.
    Rounds(&'static str),
    /// Its figure does not follow from its own model; says why.
    Inconsistent(&'static str),
    /// Its figure cannot be derived from what it states; says what it would depend on.
    Unsupported(&'static str),
    /// It claims more than the measurement shows; says what remains.
    Overstates(&'static str),
}

/// One claim of the article.
pub struct Claim {
    /// What the article says, in short.
    pub claim: &'static str,
    /// The article's own figure, as it writes it.
    pub article: &'static str,
    /// The closed form under the article's own model, from the scenario (`None`: measured only).
    pub exact: fn(&Scenario) -> Option<f64>,
    /// The closed form, written out.
    pub formula: &'static str,
    /// The scenario: a file stem in `scenarios/article/`.
    pub scenario: &'static str,
    /// How to read the simulated value from the scenario's summary.json.
    pub read: fn(&Value) -> Option<f64>,
    /// The unit of both values.
    pub unit: &'static str,
    /// How the simulated value is judged.
    pub check: Check,
    /// How the article's figure is judged.
    pub verdict: Article,
}

fn mean_query_ms(v: &Value) -> Option<f64> {
    metrics::QUERY_MEAN.read(v)
}

fn calls_per_s(v: &Value) -> Option<f64> {
    metrics::CALLS_PER_S.read(v)
}

fn orphaned_share(v: &Value) -> Option<f64> {
    Some(100.0 * metrics::ORPHANED_REQUESTS.read(v)? / metrics::PROVIDER_RECEIVED.read(v)?)
}

fn fixed(c: Count) -> Option<f64> {
    match c {
        Count::Fixed(n) => Some(n as f64),
        Count::Uniform(..) => None,
    }
}

/// Orphaned share of charged requests when nothing stops abandoned work and demand exceeds
/// capacity: only the calls that can start and end before the first deadline are useful,
/// whole queries of them; everything else is charged for an answer nobody reads.
fn orphans_without_cancel(s: &Scenario) -> Option<f64> {
    let per_s = s.provider().rpm? / 60.0;
    let Latency::Constant(l_ms) = s.provider().latency else {
        return None;
    };
    let t = s.workload.parent_timeout?.as_secs_f64();
    let Stop::Queries(queries) = s.workload.stop else {
        return None;
    };
    let per_query = fixed(s.workload.calls_per_query)?;
    let burst = (per_s * s.scheduler.burst_s).floor().max(1.0);
    let in_time = (burst + per_s * (t - l_ms / 1000.0)).floor();
    let useful = (in_time / per_query).floor() * per_query;
    Some(100.0 * (1.0 - useful / (queries as f64 * per_query)))
}

/// Tokens an orchestrator has left for its synthesis: its budget less what its subagents
/// spend on average (their grants never bind in the scenario this is used for).
fn left_for_synthesis(s: &Scenario) -> Option<f64> {
    let sub = s.workload.subagents?;
    let w = &s.workload;
    let spent = sub.count as f64
        * f64::from(w.rounds)
        * w.calls_per_query.mean()
        * w.tokens_per_call.mean();
    Some(sub.orchestrator_budget as f64 - spent)
}

/// The budget an orchestrator keeps whatever its subagents want: its own less every grant.
fn kept_back(s: &Scenario) -> Option<f64> {
    let sub = s.workload.subagents?;
    Some(
        sub.orchestrator_budget
            .checked_sub(sub.count * sub.budget_tokens)? as f64,
    )
}

/// Syntheses refused when the budget kept back covers the synthesis: none.
fn refused_syntheses(s: &Scenario) -> Option<f64> {
    let sub = s.workload.subagents?;
    (kept_back(s)? >= sub.synthesis_tokens as f64).then_some(0.0)
}

/// Every claim, in the article's order.
pub const CLAIMS: &[Claim] = &[
    Claim {
        claim: "10 quotes x 350 ms, sequential",
        article: "3.5 s",
        exact: |_| Some(10.0 * 350.0),
        formula: "10 x 350",
        scenario: "quotes-sequential",
        read: mean_query_ms,
        unit: "ms",
        check: Check::Within(0.01),
        verdict: Article::Agrees,
    },
    Claim {
        claim: "10 quotes x 350 ms, gathered",
        article: "~0.35 s",
        exact: |_| Some(350.0),
        formula: "max of 10 x 350",
        scenario: "quotes-gathered",
        read: mean_query_ms,
        unit: "ms",
        check: Check::Within(0.01),
        verdict: Article::Agrees,
    },
    Claim {
        claim: "the whole task: 4 rounds of those 10 quotes, sequential, with the model's turns",
        article: "15 s",
        exact: |_| Some(4.0 * 10.0 * 350.0 + 3.0 * 333.333),
        formula: "4 x 10 x 350 + 1,000 of model turns (what 15 s leaves after 14 s of tools)",
        scenario: "quotes-task-sequential",
        read: mean_query_ms,
        unit: "ms",
        check: Check::Within(0.01),
        verdict: Article::Agrees,
    },
    Claim {
        claim: "the same task with each round gathered",
        article: "4 s",
        exact: |_| Some(4.0 * 350.0 + 3.0 * 333.333),
        formula: "4 x 350 + the same 1,000 of model turns",
        scenario: "quotes-task-gathered",
        read: mean_query_ms,
        unit: "ms",
        check: Check::Within(0.01),
        verdict: Article::Inconsistent(
            "gathering changes only the tools' time: 15 s with 14 s of tools leaves 1 s for \
             the model, so gathered is 1.4 s + 1 s = 2.4 s; 4 s would need 2.6 s of model time, \
             which would make the sequential task 16.6 s",
        ),
    },
    Claim {
        claim: "semaphore 40 x 400 ms at 10,000 RPM",
        article: "~100 RPS, 60 % of the ~167 RPS ceiling",
        exact: |_| Some(40.0 / 0.4),
        formula: "40 / 0.4 (Little's law); 100 / 166.7 = 60 %",
        scenario: "tier3-semaphore-40",
        read: calls_per_s,
        unit: "calls/s",
        check: Check::Within(0.01),
        verdict: Article::Agrees,
    },
    Claim {
        claim: "semaphore 60 x 400 ms at 10,000 RPM",
        article: "~150 RPS, 90 % of the ceiling",
        exact: |_| Some(60.0 / 0.4),
        formula: "60 / 0.4 (Little's law); 150 / 166.7 = 90 %",
        scenario: "tier3-semaphore-60",
        read: calls_per_s,
        unit: "calls/s",
        check: Check::Within(0.01),
        verdict: Article::Agrees,
    },
    Claim {
        claim: "10M TPM at 2,000 tokens a call: calls served in the minute",
        article: "5,000 calls a minute, 83 a second",
        exact: |_| Some(10_000_000.0 / 2000.0),
        formula: "10,000,000 / 2,000",
        scenario: "tpm-burst-no-bucket",
        read: |v| metrics::PROVIDER_SERVED.read(v),
        unit: "calls",
        check: Check::Within(0.0),
        verdict: Article::Rounds("5,000 / 60 = 83.3 calls/s written as 83"),
    },
    Claim {
        claim: "a 200 calls/s burst of those against a fixed window: 429s",
        article: "budget gone in 25 s, 429s for the remaining 35 s",
        exact: |_| Some((60.0 - 10_000_000.0 / (200.0 * 2000.0)) * 200.0),
        formula: "(60 - 10,000,000 / (200 x 2,000)) x 200",
        scenario: "tpm-burst-no-bucket",
        read: |v| metrics::PROVIDER_RATE_LIMITED.read(v),
        unit: "429s",
        check: Check::Within(0.001),
        verdict: Article::Agrees,
    },
    Claim {
        claim: "the same burst through a client bucket (98 % of TPM)",
        article: "smoothed, no 429s",
        exact: |_| Some(0.98 * 10_000_000.0 / 2000.0 / 60.0),
        formula: "0.98 x 10,000,000 / 2,000 / 60",
        scenario: "tpm-burst-with-bucket",
        read: calls_per_s,
        unit: "calls/s",
        check: Check::Within(0.01),
        verdict: Article::Agrees,
    },
    Claim {
        claim: "8 calls one after another, 400 ms avg (lognormal, 900 ms p95)",
        article: "8 x 400 ms = 3,200 ms",
        exact: |s| Some(8.0 * s.provider().latency.mean()),
        formula: "8 x E[latency] = 8 x 400",
        scenario: "research-sequential",
        read: mean_query_ms,
        unit: "ms",
        check: Check::Within(0.01),
        verdict: Article::Agrees,
    },
    Claim {
        claim: "600 RPM, 8 calls a query: query ceiling",
        article: "10 RPS / 8 = 1.25 queries/s max",
        exact: |s| Some(s.provider().rpm? / 60.0 / 8.0),
        formula: "600 / 60 / 8",
        scenario: "ceiling-600rpm",
        read: |v| metrics::QUERIES_PER_S.read(v),
        unit: "queries/s",
        check: Check::Within(0.01),
        verdict: Article::Agrees,
    },
    Claim {
        claim: "8 calls x U[200, 900] ms in parallel",
        article: "~800 ms",
        exact: |_| Some(200.0 + 700.0 * 8.0 / 9.0),
        formula: "200 + 700 x 8/9",
        scenario: "research-fanout-uniform",
        read: mean_query_ms,
        unit: "ms",
        check: Check::Within(0.01),
        verdict: Article::Rounds("822 ms written as ~800 ms"),
    },
    Claim {
        claim: "8 calls, latency read as \"400 ms avg, 900 ms p95\" (lognormal)",
        article: "~800 ms",
        exact: |s| expected_max_ms(&s.provider().latency, 8.0),
        formula: "E[max of 8] of the fitted lognormal (numeric integral)",
        scenario: "research-fanout-lognormal",
        read: mean_query_ms,
        unit: "ms",
        check: Check::Within(0.02),
        verdict: Article::Inconsistent(
            "it states 400 ms avg / 900 ms p95 but computes with U[200, 900], whose mean is \
             550 ms; a lognormal with its stated mean and p95 gives 846 ms",
        ),
    },
    Claim {
        claim: "semaphore(4) over the 8 calls",
        article: "two waves of ~760 ms, ~1,500 ms",
        exact: |_| Some(2.0 * (200.0 + 700.0 * 4.0 / 5.0)),
        formula: "2 x E[max of 4] = 2 x (200 + 700 x 4/5), strict waves",
        scenario: "research-semaphore-4",
        read: mean_query_ms,
        unit: "ms",
        check: Check::Upper(
            "a semaphore is work-conserving: it starts the next call as soon as any ends, so \
             it beats strict waves",
        ),
        verdict: Article::Rounds("2 x 760 = 1,520 ms written as ~1,500 ms"),
    },
    Claim {
        claim: "600 RPM, 8 calls/query, 70 % headroom: throughput",
        article: "420 slots/min, 52 queries/min",
        exact: |_| Some(0.7 * 600.0 / 8.0),
        formula: "0.7 x 600 / 8",
        scenario: "headroom-70",
        read: |v| metrics::QUERIES_PER_S.read(v).map(|q| q * 60.0),
        unit: "queries/min",
        check: Check::Within(0.01),
        verdict: Article::Rounds("420 / 8 = 52.5 written as 52"),
    },
    Claim {
        claim: "the same: RPM left for retries and other traffic",
        article: "180 RPM",
        exact: |_| Some(600.0 - 0.7 * 600.0),
        formula: "600 - 0.7 x 600",
        scenario: "headroom-70",
        read: |v| Some(600.0 * (1.0 - metrics::RPM_UTILIZATION.read(v)?)),
        unit: "RPM",
        check: Check::Within(0.01),
        verdict: Article::Agrees,
    },
    Claim {
        claim: "85 % accuracy per step, 10 steps",
        article: "20 %",
        exact: |_| Some(100.0 * 0.85f64.powi(10)),
        formula: "0.85^10",
        scenario: "compounding-85",
        read: |v| {
            Some(100.0 * (1.0 - metrics::QUERIES_FAILED.read(v)? / metrics::QUERIES.read(v)?))
        },
        unit: "% of queries",
        check: Check::Within(0.03),
        verdict: Article::Rounds("19.7 % written as 20 %"),
    },
    Claim {
        claim: "100 sessions x 8 calls, 5 s parent timeout, no transport cancellation: \
                orphaned share of charged requests",
        article: "30-40 % of the rate budget",
        exact: orphans_without_cancel,
        formula: "1 - 8 x floor((1 + 10/s x (5 s - 1 s)) / 8) / 2,400: only calls sent by 4 s \
                  end by the first deadline",
        scenario: "orphans-leave",
        read: orphaned_share,
        unit: "%",
        check: Check::Within(0.005),
        verdict: Article::Unsupported(
            "the share depends on how far demand exceeds capacity and for how long, and the \
             article gives neither. Without transport cancellation, overload feeds itself: \
             abandoned calls keep their place in the queue and each session queues a new query \
             behind them, so once demand passes capacity (here 800 calls per 5 s against 10 \
             calls/s) only the first queries finish and the share tends to 100 % as the run \
             grows; below capacity, only queries slower than the timeout leave orphans",
        ),
    },
    Claim {
        claim: "the same with transport cancellation",
        article: "(the fix)",
        exact: |_| None,
        formula: "",
        scenario: "orphans-cancel",
        read: orphaned_share,
        unit: "%",
        check: Check::Measured(
            "queued calls are never sent; only the calls in flight at a deadline are charged \
             for nothing: about 10/s x 1 s of them at each deadline (Little's law) against \
             about 50 sent per 5 s timeout",
        ),
        verdict: Article::Overstates(
            "cancellation stops the queued calls, not what is already in flight at each \
             deadline: those are charged for answers nobody reads",
        ),
    },
    Claim {
        claim: "one hallucinated 30-call turn at 600 RPM, no cap: 429s",
        article: "28 of the 30 return 429s",
        exact: |_| Some(0.0),
        formula: "30 requests <= the 600 a 60 s window admits",
        scenario: "hallucinated-30-one-turn",
        read: |v| metrics::PROVIDER_RATE_LIMITED.read(v),
        unit: "429s",
        check: Check::Within(0.0),
        verdict: Article::Inconsistent(
            "28 refused of 30 needs a limit that admits 2 requests at once; 600 RPM over a \
             60 s window admits the whole turn, and even enforced per second (10 a second) it \
             would refuse 20. The storm comes from such turns repeated (next row)",
        ),
    },
    Claim {
        claim: "30-call turns from 4 sessions at 600 RPM, no cap: 429s",
        article: "429 storm",
        exact: |_| None,
        formula: "",
        scenario: "hallucinated-30-uncapped",
        read: |v| metrics::PROVIDER_RATE_LIMITED.read(v),
        unit: "429s",
        check: Check::Measured(
            "120 calls at once against 10 calls/s: once the minute's window is full every \
             turn is mostly 429s and their retries",
        ),
        verdict: Article::Agrees,
    },
    Claim {
        claim: "the same capped at 8 calls per turn: 429s",
        article: "cap prevents it",
        exact: |_| None,
        formula: "",
        scenario: "hallucinated-30-capped",
        read: |v| metrics::PROVIDER_RATE_LIMITED.read(v),
        unit: "429s",
        check: Check::Measured(
            "22 of each turn's 30 calls are not run; the 32 calls 4 sessions then send at once \
             still outrun 10 calls/s, so the cap shrinks the storm without ending it",
        ),
        verdict: Article::Overstates(
            "the cap bounds each turn, not the rate: with several sessions it takes a \
             client-side rate limiter as well to keep 429s away",
        ),
    },
    Claim {
        claim: "retry storm, fixed 1 s backoff: calls failed for good",
        article: "all tasks wake together and replay the burst",
        exact: |_| None,
        formula: "",
        scenario: "retry-fixed",
        read: |v| metrics::ERRORS.read(v),
        unit: "calls",
        check: Check::Measured(
            "50 sessions x 4 calls at once against 120 RPM, no client limiter, 6 retries a \
             call; retries 1 s apart all fall inside the 60 s a full window stays full, so a \
             refused call almost always fails for good",
        ),
        verdict: Article::Agrees,
    },
    Claim {
        claim: "retry storm, full-jitter backoff: calls failed for good",
        article: "jitter reduces the collisions",
        exact: |_| None,
        formula: "",
        scenario: "retry-jitter",
        read: |v| metrics::ERRORS.read(v),
        unit: "calls",
        check: Check::Measured(
            "the same storm; draws from U[0, 1 s], U[0, 2 s] ... U[0, 32 s] spread the \
             retries over about a minute, so some reach a window with room",
        ),
        verdict: Article::Agrees,
    },
    Claim {
        claim: "retry storm, honouring Retry-After: calls failed for good",
        article: "use it as the minimum sleep",
        exact: |_| None,
        formula: "",
        scenario: "retry-retry-after",
        read: |v| metrics::ERRORS.read(v),
        unit: "calls",
        check: Check::Measured(
            "the same storm; each retry waits until the provider says the window has room, so \
             none is spent against a full window",
        ),
        verdict: Article::Agrees,
    },
    Claim {
        claim: "orchestrator 50k, 3 subagents x 15k using 12k/14k/8k: tokens left for the \
                synthesis",
        article: "34k used, 16k left",
        exact: left_for_synthesis,
        formula: "50,000 - 3 subagents x 3 turns x E[U{2,667..4,889}] (34,002 used)",
        scenario: "budgets-article",
        read: |v| metrics::SYNTHESIS_LEFT_TOKENS_MEAN.read(v),
        unit: "tokens",
        check: Check::Within(0.01),
        verdict: Article::Agrees,
    },
    Claim {
        claim: "the same with subagents wanting up to 20k each (their grants stop them, so \
                their queries count as failed): syntheses of ~5k refused",
        article: "~5k synthesis fits",
        exact: refused_syntheses,
        formula: "50,000 - 3 x 15,000 = 5,000 kept back >= the 5,000 synthesis",
        scenario: "budgets-greedy",
        read: |v| metrics::SYNTHESIS_REFUSED.read(v),
        unit: "syntheses",
        check: Check::Within(0.0),
        verdict: Article::Agrees,
    },
    Claim {
        claim: "the same: fewest tokens left at a synthesis",
        article: "(budget per subagent)",
        exact: kept_back,
        formula: "50,000 - 3 x 15,000",
        scenario: "budgets-greedy",
        read: |v| metrics::SYNTHESIS_LEFT_TOKENS_MIN.read(v),
        unit: "tokens",
        check: Check::Lower(
            "each grant is reserved when its subagent starts and capped: whatever the \
             subagents want, the orchestrator keeps the rest",
        ),
        verdict: Article::Agrees,
    },
];

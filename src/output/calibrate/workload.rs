//! The calibrated scenario's `[workload]`: how queries arrived, for how long, and the shape
//! most of them had (one model call; model turns around, between or before rounds of tool
//! calls; tool calls only), every value held to its bound (see [`super::values`]).

use crate::analysis::calibrate::model::CountFit;
use crate::analysis::calibrate::{Arrival, Calibration, ProviderFit, Shape};
use crate::engine::scenario::bounds;
use crate::fmt::fmt_num;

use super::doc::Table;
use super::names;
use super::values::{latency, latency_constant, rate, sig, source, Clamped, Sink};

/// `[workload]`, and the most tokens one request to the provider carries (its prompt and what
/// it asks for), for the provider's limits to fit.
pub(super) fn workload(cal: &Calibration, p: &ProviderFit, sink: &mut Sink) -> (Table, u64) {
    let mut w = Table::new(&["workload"]);
    let rate = arrivals(&mut w, cal, sink);
    let mut c = Clamped::default();
    let most = bounds::MAX_DURATION.as_secs_f64();
    let mut duration = c.within(
        "duration_s",
        sig(cal.window_s.max(1.0)),
        1.0,
        most,
        "a year",
    );
    if let Some(rate) = rate {
        let most = bounds::MAX_QUERIES as f64 / rate;
        let why = "arrival_rate x duration_s at most 1e9 queries";
        duration = c.within("duration_s", duration, 1.0, most.max(1.0), why);
    }
    sink.put(
        &mut w,
        "duration_s",
        duration,
        "as long as the input: its first query's start to its last one's",
        c,
    );
    let prompt = p.input.as_ref().map_or(0.0, |f| f.observed.mean);
    let prompt_comment = match &p.input {
        Some(f) => format!(
            "mean input tokens of {} calls (p50 {}, p95 {}): a model turn sends a fixed prompt",
            fmt_num(f.observed.n as f64),
            fmt_num(sig(f.observed.p50)),
            fmt_num(sig(f.observed.p95))
        ),
        None => "ASSUMED: no token counts in the input".into(),
    };
    if p.input.is_none() {
        sink.assumed
            .push("tokens: no token counts in the input; 0 written".into());
    }
    let turn = Turn {
        prompt,
        comment: prompt_comment,
    };
    let request = match cal.structure.shape {
        Shape::Single => single(&mut w, cal, p, turn, sink),
        _ => rounds(&mut w, cal, p, turn, sink),
    };
    (w, request)
}

/// A model call's prompt: its mean tokens, and what they came from.
struct Turn {
    prompt: f64,
    comment: String,
}

/// `tokens` as a request's whole count, from 0 to the most one request may carry.
fn request_tokens(tokens: f64, c: &mut Clamped) -> u64 {
    let whole = if tokens.is_nan() {
        0
    } else {
        tokens.round().max(0.0) as u64
    };
    c.count("tokens", whole, 0, bounds::MAX_TOKENS, "a request's tokens")
}

/// `mode` and its sessions (and think time) or arrival rate; the rate of an open workload.
fn arrivals(w: &mut Table, cal: &Calibration, sink: &mut Sink) -> Option<f64> {
    match &cal.arrival {
        Some(Arrival::Closed {
            seen,
            active,
            per_session,
            think,
        }) => {
            w.put(
                "mode",
                "closed",
                "queries came in sessions (gen_ai.conversation.id or session.id)",
            );
            let mut c = Clamped::default();
            let n = if active.is_finite() {
                active.round()
            } else {
                1.0
            };
            let why = "sessions a run may hold";
            let sessions = c.count("sessions", n as u64, 1, bounds::MAX_SESSIONS, why);
            let comment = format!(
                "{} alive at once on average over the middle half of the input; {} sessions \
                 seen, {} queries each",
                fmt_num(sig(*active)),
                fmt_num(*seen as f64),
                fmt_num(sig(*per_session))
            );
            sink.put(w, "sessions", sessions as i64, comment, c);
            if let Some(t) = think {
                let mut c = Clamped::default();
                let v = latency(t, "think-time.csv", &mut sink.files, &mut c);
                let comment = source(t, "gaps between a session's queries", " ms");
                sink.put(w, "think_time", v, comment, c);
            }
            None
        }
        Some(Arrival::Open {
            rate_per_s,
            cv,
            poisson_distance,
            accept,
        }) => {
            w.put(
                "mode",
                "open",
                "no sessions in the input: queries arrive by themselves",
            );
            let mut c = Clamped::default();
            let least = f64::MIN_POSITIVE;
            let why = "queries a second";
            let rate = c.within(
                "arrival_rate",
                sig(*rate_per_s),
                least,
                bounds::MAX_ARRIVAL_RATE,
                why,
            );
            let comment = format!(
                "queries per second over the input's {} s",
                fmt_num(sig(cal.window_s))
            );
            sink.put(w, "arrival_rate", rate, comment, c);
            let fits = poisson_distance <= accept;
            w.put(
                "arrival",
                "poisson",
                if fits {
                    format!("gaps fit an exponential: KS {poisson_distance:.3}, CV {cv:.2}")
                } else {
                    format!(
                        "gaps do NOT fit an exponential (KS {poisson_distance:.3} > {accept:.3}, \
                         CV {cv:.2}: {}); capsize draws Poisson arrivals",
                        if *cv > 1.0 { "burstier" } else { "more even" }
                    )
                },
            );
            if !fits {
                sink.assumed.push(format!(
                    "arrivals: Poisson, though the gaps do not fit it (CV {cv:.2})"
                ));
            }
            Some(rate)
        }
        None => {
            w.put(
                "mode",
                "closed",
                "ASSUMED: fewer than two queries seen; one session",
            );
            w.put("sessions", 1, "");
            sink.assumed
                .push("arrivals: fewer than two queries seen; one session".into());
            None
        }
    }
}

/// "N % of M queries" of shape `shape`.
fn share(cal: &Calibration, shape: Shape) -> String {
    let s = &cal.structure;
    let total: u64 = s.shapes.values().sum();
    let n = s.shapes.get(&shape).copied().unwrap_or(0);
    format!(
        "{:.0} % of {} queries",
        100.0 * n as f64 / total.max(1) as f64,
        fmt_num(total as f64)
    )
}

/// One model call a query: the provider's calls are the workload's.
fn single(w: &mut Table, cal: &Calibration, p: &ProviderFit, turn: Turn, sink: &mut Sink) -> u64 {
    w.put(
        "calls_per_query",
        1,
        format!("one model call a query ({})", share(cal, Shape::Single)),
    );
    let out = p
        .max_tokens
        .map(|m| m as f64)
        .or(p.output.as_ref().map(|o| o.observed.mean))
        .unwrap_or(0.0);
    let mut c = Clamped::default();
    let tokens = request_tokens(turn.prompt + out, &mut c);
    let comment = format!(
        "input tokens and {} charged per call",
        if p.max_tokens.is_some() {
            "max_tokens"
        } else {
            "mean output tokens (no max_tokens recorded)"
        }
    );
    sink.put(w, "tokens_per_call", tokens as i64, comment, c);
    w.put("provider", p.name.as_str(), "");
    tokens
}

/// Rounds of tool calls, with the model's turns around, between or before them (or none).
fn rounds(w: &mut Table, cal: &Calibration, p: &ProviderFit, turn: Turn, sink: &mut Sink) -> u64 {
    let s = &cal.structure;
    let queries = cal.queries.max(1) as f64;
    let plan = match s.shape {
        Shape::Other => {
            let turns = (p.calls.saturating_sub(s.nested) as f64 / queries).round();
            let tool_calls: u64 = cal.tools.iter().map(|t| t.calls).sum();
            let per_turn = (tool_calls as f64 / queries / turns.max(1.0)).round();
            let calls = (tool_calls > 0).then_some(per_turn.max(1.0) as u64);
            sink.assumed.push(format!(
                "the queries' shape: {} had a model turn on one side of their tool calls only; \
                 written as at = \"before\" (a turn before each round, none after it) with the \
                 mean model calls a query ({}) and tool calls a turn ({}) over all queries. A \
                 query that calls its tools first and the model last takes the same turns and \
                 calls in another order",
                share(cal, Shape::Other),
                fmt_num(turns.max(1.0)),
                fmt_num(per_turn)
            ));
            Plan {
                at: Some("before"),
                rounds: turns.max(1.0) as u64,
                rounds_note: format!(
                    "ASSUMED: the mean model calls a query ({} calls, {} queries), a turn \
                     before each round",
                    fmt_num(p.calls.saturating_sub(s.nested) as f64),
                    fmt_num(queries)
                ),
                calls: calls.map(|n| CountFit {
                    min: n,
                    max: n,
                    mean: n as f64,
                    distance: 0.0,
                }),
                calls_note: format!(
                    "ASSUMED: the mean tool calls a turn: {} tool calls in {} queries",
                    fmt_num(tool_calls as f64),
                    fmt_num(queries)
                ),
                turns_note: "a model turn before each round and none after the last",
            }
        }
        shape => Plan::seen(cal, shape),
    };
    plan.write(w, cal, p, turn, sink)
}

/// The rounds as written: where the turns go, how many rounds, how many calls a round.
struct Plan {
    at: Option<&'static str>,
    rounds: u64,
    rounds_note: String,
    calls: Option<CountFit>,
    calls_note: String,
    turns_note: &'static str,
}

impl Plan {
    /// The rounds of a shape whose rounds were counted (around, between, tools only).
    fn seen(cal: &Calibration, shape: Shape) -> Plan {
        let s = &cal.structure;
        let (at, turns_note) = match shape {
            Shape::Between => (Some("between"), "a model turn between each two rounds"),
            Shape::ToolsOnly => (None, ""),
            _ => (
                Some("around"),
                "a model turn before each round and one to answer",
            ),
        };
        let seen: Vec<String> = s
            .rounds_seen
            .iter()
            .rev()
            .take(4)
            .map(|(r, n)| format!("{r}: {}", fmt_num(*n as f64)))
            .collect();
        let calls_note = match &s.per_round {
            Some(c) => format!(
                "tool calls a round: {} to {}, mean {}{}",
                c.min,
                c.max,
                fmt_num(sig(c.mean)),
                if c.min == c.max {
                    String::new()
                } else {
                    format!("; a uniform draw, KS {:.3}", c.distance)
                }
            ),
            None => "no rounds of tool calls seen".into(),
        };
        Plan {
            at,
            rounds: u64::from(s.rounds),
            rounds_note: format!(
                "the most common count (queries by rounds: {})",
                seen.join(", ")
            ),
            calls: s.per_round.clone(),
            calls_note,
            turns_note,
        }
    }

    /// Writes `rounds`, `calls_per_query`, the model turn and the tools; the most tokens of
    /// one request to the provider.
    fn write(
        self,
        w: &mut Table,
        cal: &Calibration,
        p: &ProviderFit,
        turn: Turn,
        sink: &mut Sink,
    ) -> u64 {
        let mut c = Clamped::default();
        let rounds = c.count(
            "rounds",
            self.rounds,
            1,
            bounds::MAX_ROUNDS,
            "rounds a query",
        );
        sink.put(w, "rounds", rounds as i64, self.rounds_note, c);
        let mut c = Clamped::default();
        let value = match &self.calls {
            Some(fit) => count(fit, rounds, &mut c),
            None => toml::Value::Integer(0),
        };
        sink.put(w, "calls_per_query", value, self.calls_note, c);
        w.put(
            "tokens_per_call",
            0,
            "tool calls run in the agent: no provider counts their tokens",
        );
        w.put(
            "provider",
            "none",
            "tool calls go to no rate-limited provider",
        );
        let request = match self.at {
            Some(at) => model_turn(w, cal, p, turn, at, self.turns_note, sink),
            None => {
                sink.assumed.push(format!(
                    "the queries' shape: {} called tools only: no model turn is written (the \
                     model's calls are fitted, and go to no query)",
                    share(cal, Shape::ToolsOnly)
                ));
                0
            }
        };
        sequential(w, cal);
        tools(w, cal, sink);
        request
    }
}

/// Tool calls a round: fixed or a uniform draw, each within a round's bound and the whole
/// query's (calls × rounds).
fn count(fit: &CountFit, rounds: u64, c: &mut Clamped) -> toml::Value {
    let most = bounds::MAX_CALLS_PER_ROUND.min(bounds::MAX_CALLS_PER_QUERY / rounds.max(1));
    let why = "tool calls a round, and a query's calls x rounds at most 1e6";
    let max = c.count("max", fit.max, 0, most, why);
    let min = c.count("min", fit.min, 0, max, why);
    if min == max {
        return toml::Value::Integer(min as i64);
    }
    let mut t = toml::Table::new();
    t.insert("dist".into(), "uniform_int".into());
    t.insert("min".into(), toml::Value::Integer(min as i64));
    t.insert("max".into(), toml::Value::Integer(max as i64));
    toml::Value::Table(t)
}

/// `model_turn = { ... }` at `at`; the tokens of one turn's request.
fn model_turn(
    w: &mut Table,
    cal: &Calibration,
    p: &ProviderFit,
    turn: Turn,
    at: &str,
    turns_note: &str,
    sink: &mut Sink,
) -> u64 {
    let mut c = Clamped::default();
    let prompt = request_tokens(turn.prompt, &mut c);
    let mut t = toml::Table::new();
    t.insert("tokens".into(), toml::Value::Integer(prompt as i64));
    let asked = p.max_tokens.map(|m| max_tokens(m, &mut c));
    if let Some(m) = asked {
        t.insert("max_tokens".into(), toml::Value::Integer(m as i64));
    }
    if p.ttft.is_some() {
        t.insert("stream".into(), true.into());
    }
    t.insert("provider".into(), p.name.as_str().into());
    t.insert("at".into(), at.into());
    let comment = format!(
        "{turns_note} ({}); {}",
        share(cal, cal.structure.shape),
        turn.comment
    );
    sink.put(w, "model_turn", toml::Value::Table(t), comment, c);
    prompt.saturating_add(asked.unwrap_or(0))
}

/// A turn's `max_tokens`, from 1 to the most one answer may have (the provider's
/// `max_output_tokens` is raised to it where it is above the default).
pub(super) fn max_tokens(asked: u64, c: &mut Clamped) -> u64 {
    let most = capsize_mock::tokens::MAX_TOKENS;
    c.count("max_tokens", asked, 1, most, "the tokens of one answer")
}

/// `write_fraction`, where most rounds of two or more calls ran them one after another.
fn sequential(w: &mut Table, cal: &Calibration) {
    if let Some((rounds, seq)) = cal.structure.sequential {
        if seq >= 0.5 {
            let share = if seq >= 0.9 { 1.0 } else { sig(seq) };
            w.put(
                "write_fraction",
                share,
                format!(
                    "{:.0} % of {} rounds of two or more calls ran them one after another (as \
                     writes run)",
                    100.0 * seq,
                    fmt_num(rounds as f64)
                ),
            );
        }
    }
}

/// `tools = [...]`: each tool by its name in the scenario (its own where it is one, see
/// [`names`]), its weight, latency and failures.
fn tools(w: &mut Table, cal: &Calibration, sink: &mut Sink) {
    let names = names::tools(cal);
    let mut renamed = Vec::new();
    let items: Vec<(toml::Value, String)> = cal
        .tools
        .iter()
        .zip(&names)
        .enumerate()
        .map(|(i, (t, name))| {
            let mut e = toml::Table::new();
            e.insert("name".into(), name.as_str().into());
            e.insert("weight".into(), toml::Value::Integer(t.calls as i64));
            e.insert("provider".into(), "none".into());
            let mut c = Clamped::default();
            let mut comment = match &t.latency {
                Some(f) => {
                    let file = format!("tool-{name}-latency.csv");
                    e.insert("latency".into(), latency(f, &file, &mut sink.files, &mut c));
                    source(f, "calls", " ms")
                }
                None => {
                    e.insert("latency".into(), latency_constant(0.0));
                    "ASSUMED: no call times".into()
                }
            };
            if let Some(f) = &t.folded {
                let more = if f.more_names { " and more" } else { "" };
                comment = format!(
                    "ASSUMED: {} tool names{more} beyond the {} most called, {} calls, \
                     folded into one; {comment}",
                    f.names,
                    crate::analysis::calibrate::fold::MAX_TOOLS,
                    f.calls
                );
            }
            if *name != t.name {
                comment = format!(
                    "as the input names it: {}; {comment}",
                    names::shown(&t.name)
                );
                renamed.push(names::tool_label(name, &t.name));
            }
            if t.errors > 0 {
                let (r, _) = rate(t.errors, t.calls, "failed");
                e.insert("error_rate".into(), r.into());
            }
            sink.clamped(&w.path, &format!("tools[{i}]"), &mut comment, c);
            (toml::Value::Table(e), comment)
        })
        .collect();
    if !renamed.is_empty() {
        let shown: Vec<&str> = renamed.iter().take(10).map(String::as_str).collect();
        let more = renamed.len().saturating_sub(shown.len());
        sink.assumed.push(format!(
            "tool names: a scenario names a tool with 1 to 64 letters, digits, '_' or '-', so \
             {} written as: {}{}",
            if renamed.len() == 1 {
                "one is"
            } else {
                "these are"
            },
            shown.join(", "),
            if more > 0 {
                format!(
                    " and {} more (calibration.json's tools lists all)",
                    fmt_num(more as f64)
                )
            } else {
                String::new()
            }
        ));
    }
    if !items.is_empty() {
        w.put_items("tools", items);
    }
}

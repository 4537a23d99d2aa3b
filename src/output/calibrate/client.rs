//! The client's own time where calibrate fitted it: its line in the calibrated scenario, its
//! sentence in calibration.md and its object in calibration.json.

use serde_json::{json, Value};

use crate::analysis::calibrate::ClientFit;
use crate::fmt::fmt_num;

use super::scenario::Written;
use super::values::sig;

/// Puts `fit` into the scenario's `[scheduler]` as `client = { ... }`, with where it came from,
/// and says what it assumes.
pub fn put(written: &mut Written, fit: &ClientFit) {
    let half = |ms: f64| {
        let mut t = toml::Table::new();
        t.insert("dist".into(), "exponential".into());
        t.insert("mean_ms".into(), sig(ms / 2.0).into());
        toml::Value::Table(t)
    };
    let mut client = toml::Table::new();
    client.insert("send".into(), half(fit.work_ms));
    client.insert("parse".into(), half(fit.work_ms));
    client.insert("threads".into(), 1.into());
    let comment = format!(
        "FITTED: model calls took the agent {} ms (p50), the provider {} ms; replayed without \
         the client's own time {} ms, with it {} ms",
        fmt_num(fit.observed_p50),
        fmt_num(fit.provider_p50),
        fmt_num(fit.without_p50),
        fmt_num(fit.with_p50)
    );
    if let Some(t) = written.doc.table_mut(&["scheduler"]) {
        t.put("client", toml::Value::Table(client), comment);
    }
    written.assumed.push(
        "the client's own time is spent on one thread (an asyncio event loop), half before a \
         request leaves and half after its answer: for a pool, give the whole client with \
         --set scheduler.client={ send = ..., parse = ..., threads = N } (then nothing is \
         fitted)"
            .into(),
    );
}

/// calibration.md's line on it.
pub fn sentence(fit: &ClientFit) -> String {
    let aside = if (fit.without_p50 - fit.provider_p50).abs() > 0.01 * fit.provider_p50 {
        format!(
            ". The replay without it is not the provider's {} ms: the fitted latency's median \
             differs, and the work takes that up too",
            fmt_num(fit.provider_p50)
        )
    } else {
        String::new()
    };
    let aside = match fit.converged {
        true => aside,
        false => format!("{aside}. NOT within 0.5 % of the agent's: the closest the fit came"),
    };
    format!(
        "- the client's own time: model calls took the agent {} ms at p50, the provider {} ms. \
         Replayed with the client costing nothing they take {} ms; with {} ms of work per \
         request on one thread (half to send, half to parse), {} ms. That work is in the \
         scenario (`scheduler.client`){aside}",
        fmt_num(fit.observed_p50),
        fmt_num(fit.provider_p50),
        fmt_num(fit.without_p50),
        fmt_num(fit.work_ms),
        fmt_num(fit.with_p50)
    )
}

/// calibration.json's `client`.
pub fn json(fit: Option<&ClientFit>) -> Value {
    fit.map_or(Value::Null, |f| {
        json!({
            "observed_p50_ms": f.observed_p50,
            "provider_p50_ms": f.provider_p50,
            "without_p50_ms": f.without_p50,
            "work_ms": f.work_ms,
            "with_p50_ms": f.with_p50,
            "converged": f.converged,
            "threads": 1,
        })
    })
}

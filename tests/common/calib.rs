//! Helpers of the `capsize calibrate` tests: running it, reading what it wrote, and writing
//! OTLP JSON spans by hand.

use std::path::Path;

use serde_json::Value;

use super::capsize;

/// Runs `capsize calibrate INPUTS --out DIR EXTRA...`.
pub fn calibrate(inputs: &[&Path], out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args: Vec<&str> = vec!["calibrate"];
    args.extend(inputs.iter().map(|p| p.to_str().unwrap()));
    args.extend(["--out", out.to_str().unwrap()]);
    args.extend(extra);
    capsize(&args)
}

/// The calibrated scenario written into `out`, as TOML.
pub fn scenario(out: &Path) -> toml::Table {
    std::fs::read_to_string(out.join("scenario.toml"))
        .unwrap()
        .parse()
        .unwrap()
}

/// The calibration.json written into `out`.
pub fn report(out: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("calibration.json")).unwrap()).unwrap()
}

/// A TOML number, integer or float, as f64.
pub fn f(v: &toml::Value) -> f64 {
    v.as_float()
        .or(v.as_integer().map(|i| i as f64))
        .unwrap_or_else(|| panic!("{v} is not a number"))
}

/// One OTLP JSON span as a line's worth of JSON.
pub fn span_json(
    trace: u32,
    id: u32,
    parent: u32,
    start_ms: u64,
    end_ms: u64,
    attrs: &str,
) -> String {
    let ns = |ms: u64| 1_760_000_000_000_000_000u64 + ms * 1_000_000;
    let parent = if parent == 0 {
        String::new()
    } else {
        format!("{parent:016x}")
    };
    format!(
        r#"{{"traceId":"{trace:032x}","spanId":"{id:016x}","parentSpanId":"{parent}","name":"s","startTimeUnixNano":"{}","endTimeUnixNano":"{}","attributes":[{attrs}]}}"#,
        ns(start_ms),
        ns(end_ms)
    )
}

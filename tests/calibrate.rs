//! `capsize calibrate`: a scenario measured from traces, logs and exec recordings.

mod common;

use common::otel::{traces, Agent};
use common::temp::Temp;
use common::{capsize, stderr};

#[test]
fn smoke() {
    let t = Temp::new("calibrate", "smoke");
    let input = t.write("traces.jsonl", &traces(&Agent::default(), 1));
    let out = t.path("out");
    let o = capsize(&["calibrate", input.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    println!("{}", String::from_utf8_lossy(&o.stdout));
    println!("{}", stderr(&o));
    println!("{}", std::fs::read_to_string(out.join("scenario.toml")).unwrap_or_default());
    println!("{}", std::fs::read_to_string(out.join("calibration.md")).unwrap_or_default());
    panic!();
}

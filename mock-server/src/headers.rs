//! Header value formats: Go-style durations, as OpenAI's `x-ratelimit-reset-*` headers use.

use std::time::Duration;

fn trimmed(whole: u128, frac: u128, digits: usize) -> String {
    if frac == 0 {
        return whole.to_string();
    }
    let f = format!("{frac:0digits$}");
    format!("{whole}.{}", f.trim_end_matches('0'))
}

/// Formats a duration as Go's `time.Duration.String()` does: `6m0s`, `1.5s`, `20ms`, `0s`.
pub fn go_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".into();
    }
    if ns < 1_000 {
        return format!("{ns}ns");
    }
    if ns < 1_000_000 {
        return format!("{}µs", trimmed(ns / 1_000, ns % 1_000, 3));
    }
    if ns < 1_000_000_000 {
        return format!("{}ms", trimmed(ns / 1_000_000, ns % 1_000_000, 6));
    }
    let secs = ns / 1_000_000_000;
    let s = trimmed(secs % 60, ns % 1_000_000_000, 9);
    let (h, m) = (secs / 3600, secs / 60 % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, m) => format!("{m}m{s}s"),
        (h, m) => format!("{h}h{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_go() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(15), "15ns"),
            (Duration::from_nanos(1_500), "1.5µs"),
            (Duration::from_millis(20), "20ms"),
            (Duration::from_micros(1_500), "1.5ms"),
            (Duration::from_millis(1_500), "1.5s"),
            (Duration::from_secs(360), "6m0s"),
            (Duration::from_millis(3_661_500), "1h1m1.5s"),
            (Duration::from_secs(7_200), "2h0m0s"),
        ];
        for (d, want) in cases {
            assert_eq!(go_duration(d), want, "{d:?}");
        }
    }
}

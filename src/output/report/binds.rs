//! The `binds` line of a run's terminal table: the limit that binds a query (the lowest
//! ceiling of [`Demand`], named with its provider; `ceiling` when the run used less than 90 %
//! of it), how much of it the run used, and, when the workload asks for more than it lets
//! through, the change that lifts it.

use crate::analysis::plan::Demand;
use crate::engine::scenario::Scenario;
use crate::engine::summary::Summary;
use crate::fmt::{fmt_num, times};

/// The share of a ceiling a run must use for its limit to be said to bind it.
const BINDS: f64 = 0.9;

/// `  binds          llm TPM: 8.94 queries/min, 99.3 % of the 9 it lets through at headroom
/// 0.9`, and on a second line, when the workload asks for more, `the workload asks up to
/// ~20.8: --set providers.llm.tpm=92257 (2.4×) lifts it to 20.8`; `ceiling` in place of
/// `binds` (", the lowest" after it, and no advice) when the run used less than 90 % of it;
/// `None` when no limit bounds a query.
pub fn line(summary: &Summary, s: &Scenario) -> Option<String> {
    let d = Demand::of(s);
    let b = d.binding()?;
    if !(b.at_headroom.is_finite() && b.at_headroom > 0.0) {
        return None;
    }
    let f = fmt_num;
    let done = summary.throughput.queries_per_s * 60.0;
    let at = if b.gated && s.scheduler.headroom < 1.0 {
        format!(" at headroom {}", s.scheduler.headroom)
    } else {
        String::new()
    };
    let used = done / b.at_headroom;
    // At 90 % of it or more the run is held there; below, it is the ceiling nearest.
    let (label, nearest) = if used >= BINDS {
        ("binds  ", "")
    } else {
        ("ceiling", ", the lowest")
    };
    let mut line = format!(
        "  {label}        {}: {} queries/min, {} % of the {} it lets through{at}{nearest}",
        b.name(),
        f(done),
        f(used * 100.0),
        f(b.at_headroom),
    );
    // Advice only where the limit holds the run back.
    let asked = d.asked_per_min(s).filter(|_| used >= BINDS);
    if let Some((asked, advice)) = asked.and_then(|a| d.advise(a).map(|v| (a, v))) {
        if asked > b.at_headroom * 1.05 {
            line.push_str(&format!(
                "\n                 the workload asks up to ~{}: --set {}={} ({}) lifts it to {}",
                f(asked),
                advice.key,
                advice.value,
                times(advice.factor),
                f(advice.promised),
            ));
            if let Some(n) = &advice.next {
                line.push_str(&format!(", where {} binds", n.name()));
            }
        }
    }
    Some(line)
}

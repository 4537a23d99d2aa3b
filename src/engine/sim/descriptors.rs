//! File descriptors in a real-time run: each call in flight holds a socket, and with the mock
//! in-process a second one (the server's end). The soft open-files limit is raised to the
//! hard limit first; a run whose calls in flight can still need more is warned of, once, on
//! stderr, before it starts: past the limit the client cannot open a connection, and those
//! attempts fail as `too_many_open_files` transport errors.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::engine::scenario::{Arrivals, Count, Scenario, Stop};

/// Descriptors the process holds besides the calls': its standard streams, the runtime's
/// poller and wake-ups, the mock's listener and timer threads.
const RESERVE: u64 = 64;

/// Whether the warning has been said (a sweep runs many points in one process).
static WARNED: AtomicBool = AtomicBool::new(false);

/// Sets the soft limit on open files to the hard limit (best effort: unchanged on failure).
pub(super) fn raise_open_files_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed to them.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// The process's soft limit on open files (`None`: none, or unknown).
fn open_files_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct passed to it.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    (ok && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

/// The most of `count`.
fn most(count: Count) -> u64 {
    match count {
        Count::Fixed(n) => n,
        Count::Uniform(_, hi) => hi,
    }
}

/// The most calls `s` can have in flight at once with `replicas` of its client in this
/// process: the client's limit (`max_concurrency`, each replica's), or else the workload's
/// widest, every query that can be open at once with its widest round (every subagent's).
pub fn most_in_flight(s: &Scenario, replicas: u64) -> u64 {
    let w = &s.workload;
    let per_query = most(w.calls_per_query)
        .max(1)
        .saturating_mul(w.subagents.map_or(1, |a| a.count.max(1)));
    let queries = match (w.arrivals, w.stop) {
        (Arrivals::Closed { sessions }, _) => sessions,
        (Arrivals::Open { .. }, Stop::Queries(n)) => n,
        (Arrivals::Open { rate, .. }, Stop::Duration(d)) => {
            let n = (rate * d.as_secs_f64()).ceil();
            if n.is_finite() && n < u64::MAX as f64 {
                n as u64 + 1
            } else {
                u64::MAX
            }
        }
    };
    let workload = queries.saturating_mul(per_query);
    match s.scheduler.max_concurrency {
        0 => workload,
        n => workload.min((n as u64).saturating_mul(replicas.max(1))),
    }
}

/// The warning for `calls` in flight at `per_call` descriptors each under a `limit`, if they
/// can need more than it.
pub fn warning(calls: u64, per_call: u64, limit: u64) -> Option<String> {
    let need = calls.saturating_mul(per_call).saturating_add(RESERVE);
    (need > limit).then(|| {
        let each = match per_call {
            1 => "one per call".to_string(),
            n => format!("{n} per call, with the mock in-process"),
        };
        format!(
            "capsize: warning: up to {calls} calls in flight can need {need} file descriptors ({each}), above this process's limit of {limit} (ulimit -n): calls past it fail as too_many_open_files transport errors; lower scheduler.max_concurrency or raise the limit"
        )
    })
}

/// Raises the limit, then warns (once a process) if the run of `s` with `replicas` of its
/// client here can still need more descriptors than it allows; `in_process`: the mock is
/// this process's too.
pub(super) fn prepare(s: &Scenario, replicas: u64, in_process: bool) {
    raise_open_files_limit();
    let Some(limit) = open_files_limit() else {
        return;
    };
    let per_call = if in_process { 2 } else { 1 };
    if let Some(w) = warning(most_in_flight(s, replicas), per_call, limit) {
        if !WARNED.swap(true, Ordering::Relaxed) {
            eprintln!("{w}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn scenario(extra: &str) -> Scenario {
        let text = format!(
            "name = \"fd\"\n[provider]\nlatency = {{ dist = \"constant\", ms = 10 }}\n{extra}"
        );
        crate::engine::scenario::parse(&text, Path::new("fd.toml"), &[])
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_most_in_flight_is_the_clients_limit_or_the_workloads_widest() {
        let open = "[workload]\nmode = \"open\"\narrival_rate = 20000\nduration_s = 10\ncalls_per_query = 3\ntokens_per_call = 10\n";
        assert_eq!(most_in_flight(&scenario(open), 1), 600_003);
        let capped = format!("{open}[scheduler]\nmax_concurrency = 100\n");
        assert_eq!(most_in_flight(&scenario(&capped), 1), 100);
        assert_eq!(most_in_flight(&scenario(&capped), 4), 400);
        let closed = "[workload]\nsessions = 8\nqueries = 100\ntokens_per_call = 10\ncalls_per_query = { dist = \"uniform_int\", min = 1, max = 5 }\n";
        assert_eq!(most_in_flight(&scenario(closed), 1), 40);
    }

    #[test]
    fn the_warning_names_the_calls_the_need_and_the_limit() {
        assert_eq!(warning(10, 2, 1024), None);
        assert_eq!(
            warning(1000, 2, 1024).as_deref(),
            Some("capsize: warning: up to 1000 calls in flight can need 2064 file descriptors (2 per call, with the mock in-process), above this process's limit of 1024 (ulimit -n): calls past it fail as too_many_open_files transport errors; lower scheduler.max_concurrency or raise the limit")
        );
        assert!(warning(u64::MAX, 2, 1024).is_some());
        assert!(warning(1000, 1, 1024).unwrap().contains("(one per call)"));
    }
}

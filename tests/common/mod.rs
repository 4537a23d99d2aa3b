//! Helpers shared by the scheduler's integration tests (each test file uses a subset).
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

pub mod temp;

use capsize::scheduler::observe::EventLog;
use capsize::scheduler::{Scheduler, SchedulerConfig};

/// `n` milliseconds.
pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A scheduler for `config` and the log of every event it emits.
pub fn logged(config: SchedulerConfig) -> (Scheduler, Arc<EventLog>) {
    let log = Arc::new(EventLog::new());
    let sched = Scheduler::builder(config)
        .observer(log.clone())
        .build()
        .unwrap();
    (sched, log)
}

/// The default configuration with `max_concurrency` permits.
pub fn bounded(max_concurrency: usize) -> SchedulerConfig {
    SchedulerConfig {
        max_concurrency,
        ..SchedulerConfig::default()
    }
}

/// The `capsize` binary with `args`, run to the end.
pub fn capsize(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_capsize"))
        .args(args)
        .output()
        .expect("the capsize binary runs")
}

/// What a run printed on stderr.
pub fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

//! Helpers shared by the scheduler's integration tests (each test file uses a subset).
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use capsize_scheduler::observe::EventLog;
use capsize_scheduler::{Scheduler, SchedulerConfig};
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

/// A current-thread runtime on tokio's paused (virtual) clock.
pub fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime builds")
}

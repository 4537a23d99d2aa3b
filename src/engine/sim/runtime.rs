//! What the workload driver runs on: a clock (the scheduler's [`Clock`]) and tasks.
//!
//! Two runtimes implement it. [`RealClock`] is real time: tokio's clock read directly, timers on
//! capsize-timer (within tens of µs of their deadline, where tokio's end about 1 ms late),
//! tasks on the `LocalSet` the run is inside. [`DesRuntime`] is virtual time: capsize-des's discrete-event
//! executor, whose clock jumps from timer to timer and whose ties go to the timer armed first.
//! The driver, the scheduler and the provider model read time only through this, so one driver
//! runs in both modes and the simulation path never touches a tokio timer.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use capsize_des::{Executor, Handle, Stalled};
use tokio::time::Instant;

use crate::scheduler::{Clock, Moment, Nanos};

/// A clock that can also run tasks.
pub(crate) trait Runtime: Clock {
    /// A spawned task. Awaiting it gives its output (re-raising its panic, if it panicked);
    /// dropping it cancels the task.
    type Task<T: 'static>: Future<Output = T> + Unpin + 'static;

    /// Runs `future` as a task of its own.
    fn spawn<F>(&self, future: F) -> Self::Task<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static;

    /// Lets `task` run on with nobody waiting for it.
    fn detach<T: 'static>(task: Self::Task<T>);
}

/// A tokio task that is cancelled when its handle is dropped (unless detached) and re-raises
/// its panic.
pub(crate) struct TokioTask<T> {
    handle: tokio::task::JoinHandle<T>,
    detached: bool,
}

impl<T> Future for TokioTask<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        Pin::new(&mut self.handle).poll(cx).map(|done| match done {
            Ok(v) => v,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Only dropping this handle aborts the task, and then nobody polls it.
            Err(e) => unreachable!("a task is aborted only when its handle is dropped: {e}"),
        })
    }
}

impl<T> Drop for TokioTask<T> {
    fn drop(&mut self) {
        if !self.detached {
            self.handle.abort();
        }
    }
}

/// Real time: the monotonic clock, precise timers, tasks on the caller's `LocalSet`.
///
/// The scheduler's [`TokioClock`](crate::scheduler::TokioClock) would serve too, but its timers
/// end about 1 ms late, and a real-time run at a time scale multiplies that into the model's
/// figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RealClock;

#[allow(clippy::disallowed_methods)] // the real-time clock is the monotonic clock by design
impl Clock for RealClock {
    type Instant = Instant;
    type Sleep = capsize_timer::Sleep;

    #[inline]
    fn now(&self) -> Instant {
        Instant::now()
    }

    #[inline]
    fn sleep_until(&self, deadline: Instant) -> capsize_timer::Sleep {
        capsize_timer::sleep_until(deadline)
    }
}

#[allow(clippy::disallowed_methods)] // the real-time runtime is tokio's by design
impl Runtime for RealClock {
    type Task<T: 'static> = TokioTask<T>;

    fn spawn<F>(&self, future: F) -> TokioTask<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        TokioTask {
            handle: tokio::task::spawn_local(future),
            detached: false,
        }
    }

    fn detach<T: 'static>(mut task: TokioTask<T>) {
        // A dropped JoinHandle lets its task run on.
        task.detached = true;
    }
}

/// An instant a virtual runtime reads its executor's clock as: [`Nanos`] (the executor's own
/// count, what a run uses), or tokio's `Instant` (an origin plus that count, for code written
/// against tokio's instants, such as `capsize demo`).
pub(crate) trait VirtualInstant: Moment {
    /// The instant the executor's clock starts at.
    fn start() -> Self;

    /// `ns` nanoseconds after `start`.
    fn after(start: Self, ns: u64) -> Self;

    /// Nanoseconds from `start` to this instant: 0 if it is earlier, `u64::MAX` if further
    /// than that.
    fn since(self, start: Self) -> u64;
}

impl VirtualInstant for Nanos {
    #[inline]
    fn start() -> Nanos {
        Nanos::ZERO
    }

    #[inline]
    fn after(_: Nanos, ns: u64) -> Nanos {
        Nanos::from_nanos(ns)
    }

    #[inline]
    fn since(self, _: Nanos) -> u64 {
        self.as_nanos()
    }
}

impl VirtualInstant for Instant {
    fn start() -> Instant {
        // Any instant: a run only ever measures time from it.
        #[allow(clippy::disallowed_methods)]
        Instant::now()
    }

    #[inline]
    fn after(start: Instant, ns: u64) -> Instant {
        start + Duration::from_nanos(ns)
    }

    #[inline]
    fn since(self, start: Instant) -> u64 {
        let ns = self.saturating_duration_since(start).as_nanos();
        u64::try_from(ns).unwrap_or(u64::MAX)
    }
}

/// Virtual time on capsize-des, its instants `I`: [`Nanos`] since the executor's start (integer
/// arithmetic, where tokio's instants are timespecs), or tokio's from an origin. Deadlines are
/// rounded up to a whole `tick` after the start.
#[derive(Clone, Debug)]
pub(crate) struct DesRuntime<I = Instant> {
    handle: Handle,
    start: I,
    tick_ns: u64,
}

impl<I: VirtualInstant> DesRuntime<I> {
    /// A runtime on `handle`'s executor, its clock at `I`'s start, whose timers fire on
    /// multiples of `tick`.
    fn new(handle: Handle, tick: Duration) -> Self {
        DesRuntime {
            handle,
            start: I::start(),
            tick_ns: u64::try_from(tick.as_nanos()).unwrap_or(u64::MAX).max(1),
        }
    }
}

/// Runs the future `start` makes on a fresh discrete-event executor whose timers fire on
/// multiples of `tick` (a nanosecond: exact), to its end.
pub(crate) fn run_virtual<I, F, Fut>(tick: Duration, start: F) -> Result<Fut::Output, Stalled>
where
    I: VirtualInstant,
    F: FnOnce(DesRuntime<I>) -> Fut,
    Fut: Future + 'static,
    Fut::Output: 'static,
{
    let exec = Executor::new();
    let rt = DesRuntime::new(exec.handle(), tick);
    exec.block_on(start(rt))
}

impl<I: VirtualInstant> Clock for DesRuntime<I> {
    type Instant = I;
    type Sleep = capsize_des::Sleep;

    #[inline]
    fn now(&self) -> I {
        I::after(self.start, self.handle.now_ns())
    }

    #[inline]
    fn sleep_until(&self, deadline: I) -> capsize_des::Sleep {
        let ticks = deadline.since(self.start).div_ceil(self.tick_ns);
        self.handle
            .sleep_until_ns(ticks.saturating_mul(self.tick_ns))
    }
}

impl<I: VirtualInstant> Runtime for DesRuntime<I> {
    type Task<T: 'static> = capsize_des::Task<T>;

    fn spawn<F>(&self, future: F) -> capsize_des::Task<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        self.handle.spawn(future)
    }

    fn detach<T: 'static>(task: capsize_des::Task<T>) {
        task.detach();
    }
}

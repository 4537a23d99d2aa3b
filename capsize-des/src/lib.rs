//! A single-threaded discrete-event executor for futures.
//!
//! Virtual time as a simulation means it: the clock is an integer count of nanoseconds that
//! stands still while anything can run, and when nothing can, jumps to the earliest timer. A run
//! is a sequence of instants, each computed and none waited for.
//!
//! - **Run queue:** FIFO. A task woken at an instant runs after the tasks woken before it.
//! - **Timers:** a binary heap keyed by (deadline, arming order). When the run queue is empty
//!   the clock moves to the earliest deadline and every timer due then is woken in the order it
//!   was armed. That is the tie rule: at one instant, first armed, first woken. A dropped
//!   [`Sleep`] is never woken and never moves the clock.
//! - **Determinism by construction:** nothing here reads a wall clock, and the order of every
//!   event is fixed by the two rules above, so the same futures give the same run.
//!
//! Futures written against runtime-agnostic primitives (tokio's `sync` module, tokio-util's
//! `CancellationToken`, futures' `join_all` and `select!`) run unchanged; timers come from the
//! [`Handle`] the executor gives out, not from a global.
//!
//! ```
//! use std::time::Duration;
//! use capsize_des::Executor;
//!
//! let exec = Executor::new();
//! let h = exec.handle();
//! let answer = exec
//!     .block_on({
//!         let h = h.clone();
//!         async move {
//!             h.sleep(Duration::from_millis(900)).await; // a day would take as long
//!             h.now()
//!         }
//!     })
//!     .unwrap();
//! assert_eq!(answer, Duration::from_millis(900));
//! ```

#![warn(missing_docs, unreachable_pub)]

mod timer;

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use async_task::Runnable;

pub use async_task::Task;
pub use timer::Sleep;
use timer::Timers;

thread_local! {
    /// The run queue of the executor running on this thread. A waker may be called from any
    /// code on this thread, so the queue is found through the thread, not through the waker.
    static QUEUE: RefCell<VecDeque<Runnable>> = const { RefCell::new(VecDeque::new()) };
    /// Whether an executor is running on this thread (one at a time).
    static RUNNING: Cell<bool> = const { Cell::new(false) };
}

fn schedule(runnable: Runnable) {
    QUEUE.with(|q| q.borrow_mut().push_back(runnable));
}

fn next_runnable() -> Option<Runnable> {
    QUEUE.with(|q| q.borrow_mut().pop_front())
}

/// The clock and timers shared by an executor and its handles.
struct Shared {
    /// Nanoseconds since the executor started.
    now: Cell<u64>,
    timers: RefCell<Timers>,
}

/// A discrete-event executor. Build one, hand its [`Handle`] to the futures, and
/// [`block_on`](Executor::block_on) the top one.
pub struct Executor {
    shared: Rc<Shared>,
}

impl fmt::Debug for Executor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Executor")
            .field("now_ns", &self.shared.now.get())
            .finish_non_exhaustive()
    }
}

/// What the futures of a run use: the clock, timers, and spawning. Clones share the executor.
#[derive(Clone)]
pub struct Handle {
    shared: Rc<Shared>,
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("now_ns", &self.shared.now.get())
            .finish_non_exhaustive()
    }
}

/// The run could not go on: its top future is waiting, nothing can run, and no timer is armed.
/// Nothing will ever wake it (a deadlock, or a wait on something outside the run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stalled {
    /// The instant it stalled at, in nanoseconds since the start.
    pub at_ns: u64,
}

impl fmt::Display for Stalled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the run stalled at {:?} of virtual time: nothing can run and no timer is armed",
            Duration::from_nanos(self.at_ns)
        )
    }
}

impl std::error::Error for Stalled {}

impl Default for Executor {
    fn default() -> Self {
        Executor::new()
    }
}

impl Executor {
    /// An executor whose clock reads zero.
    pub fn new() -> Self {
        Executor {
            shared: Rc::new(Shared {
                now: Cell::new(0),
                timers: RefCell::new(Timers::default()),
            }),
        }
    }

    /// A handle for the futures of a run.
    pub fn handle(&self) -> Handle {
        Handle {
            shared: Rc::clone(&self.shared),
        }
    }

    /// Runs `future` and everything it spawns until `future` finishes, moving the clock from
    /// timer to timer. Tasks still pending when it finishes are dropped.
    ///
    /// # Panics
    ///
    /// If another executor is running on this thread (`block_on` inside `block_on`).
    pub fn block_on<F>(&self, future: F) -> Result<F::Output, Stalled>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let _running = Running::enter(Rc::clone(&self.shared));
        let (runnable, mut top) = async_task::spawn_local(future, schedule);
        runnable.schedule();
        let mut due = Vec::new();
        loop {
            while let Some(runnable) = next_runnable() {
                runnable.run();
            }
            if top.is_finished() {
                let mut cx = Context::from_waker(Waker::noop());
                if let Poll::Ready(output) = Pin::new(&mut top).poll(&mut cx) {
                    return Ok(output);
                }
            }
            let fired = self.shared.timers.borrow_mut().fire_next(&mut due);
            match fired {
                Some(at) => {
                    self.shared.now.set(at);
                    due.drain(..).for_each(Waker::wake);
                }
                None => {
                    return Err(Stalled {
                        at_ns: self.shared.now.get(),
                    })
                }
            }
        }
    }

    /// The clock: virtual time since the start.
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.shared.now.get())
    }
}

/// Marks this thread as running an executor, and on leaving drops whatever is left: the
/// wakers of armed timers and the runnables in the queue, which frees the tasks they belong
/// to. (Timers hold wakers of tasks whose futures hold handles: this also breaks that cycle.)
struct Running {
    shared: Rc<Shared>,
}

impl Running {
    fn enter(shared: Rc<Shared>) -> Running {
        RUNNING.with(|r| {
            assert!(!r.get(), "an executor is already running on this thread");
            r.set(true);
        });
        Running { shared }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Each batch is dropped outside the borrow it came from: dropping a task can drop
        // another's handle, which schedules that task once more to drop its future.
        let wakers = self.shared.timers.borrow_mut().clear();
        drop(wakers);
        while let Some(batch) = QUEUE.with(|q| {
            let mut q = q.borrow_mut();
            (!q.is_empty()).then(|| q.drain(..).collect::<Vec<Runnable>>())
        }) {
            drop(batch);
        }
        RUNNING.with(|r| r.set(false));
    }
}

impl Handle {
    /// Virtual time since the start.
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.shared.now.get())
    }

    /// Virtual time since the start, in nanoseconds.
    pub fn now_ns(&self) -> u64 {
        self.shared.now.get()
    }

    /// A timer that completes at `deadline_ns` (at once if that has passed).
    pub fn sleep_until_ns(&self, deadline_ns: u64) -> Sleep {
        Sleep::new(Rc::clone(&self.shared), deadline_ns)
    }

    /// A timer that completes `duration` from now.
    pub fn sleep(&self, duration: Duration) -> Sleep {
        let ns = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        self.sleep_until_ns(self.now_ns().saturating_add(ns))
    }

    /// Runs `future` as a task of its own, after the tasks already runnable. Dropping the
    /// returned [`Task`] cancels it; [`Task::detach`] lets it run on.
    pub fn spawn<F>(&self, future: F) -> Task<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let (runnable, task) = async_task::spawn_local(future, schedule);
        runnable.schedule();
        task
    }
}

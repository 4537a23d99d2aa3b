//! Timers for tokio that fire within tens of microseconds of their deadline.
//!
//! tokio's timer wheel ticks once a millisecond: a deadline is rounded up to the next tick and
//! the runtime parks for whole milliseconds, so a `tokio::time::sleep_until` ends about 1 ms
//! late (a median of 0.65-1.2 ms in this crate's bench). That is nothing for a service; a real-time run at a time scale of 50
//! multiplies it into 75 ms of model time per wait.
//!
//! [`sleep_until`] keeps tokio's timer for the long part of a wait: it sleeps on it until
//! [`LEAD`] before the deadline, then hands the rest to one thread shared by the whole process
//! (the *fine timer*). That thread sleeps with a timer slack of 1 ns until [`SPIN`] before the
//! earliest deadline it holds, yields its core in a loop through the last stretch, and wakes
//! each task [`WARM`] before its deadline. The task spends that last stretch yielding on its own
//! runtime (pending, and waking itself), so that its thread is running when the deadline comes
//! and it completes within a few µs of it. The fine timer never holds more than the deadlines
//! of the next few milliseconds, and a thread that is always there costs nothing while nothing
//! is due. The price of precision is CPU: [`SPIN`] of yielding on the fine timer's thread and
//! [`WARM`] on the task's, per deadline.
//!
//! `cargo bench -p capsize-timer --bench lateness` measures it against tokio's timer.
//!
//! Ties: timers due at one instant are woken in the order they were handed to the fine timer.
//!
//! Real time only: deadlines are read on the monotonic clock, so do not use these under a
//! paused tokio clock.

// The one place capsize reads the monotonic clock directly and blocks a thread on purpose.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant as StdInstant};

use tokio::time::Instant;

/// How long before its deadline a timer leaves tokio's wheel for the fine timer: more than
/// tokio's lateness (up to 2 ms), with a margin for a busy machine.
pub const LEAD: Duration = Duration::from_millis(4);

/// How long before the earliest deadline the fine timer stops sleeping and starts yielding:
/// more than a thread's wake-up lateness after a 1 ns-slack sleep on a virtual machine
/// (about 60 µs median, under 200 µs at the 99th percentile).
pub const SPIN: Duration = Duration::from_micros(250);

/// How early the fine timer wakes a task: the task then spends the rest of its wait yielding on
/// its own thread, so that it is running, not just woken, at the deadline (a thread woken from
/// idle takes 10-150 µs to run on a virtual machine).
pub const WARM: Duration = Duration::from_micros(100);

/// A future that completes at a deadline, within tens of microseconds of it. Made by
/// [`sleep_until`] or [`sleep`].
#[derive(Debug)]
#[must_use = "a timer does nothing unless awaited"]
pub struct Sleep {
    /// `None`: beyond any instant the clock can name (it never ends).
    deadline: Option<StdInstant>,
    /// Whether the last stretch goes to the fine timer (if not, the timer is tokio's alone).
    precise: bool,
    state: State,
}

#[derive(Debug)]
enum State {
    /// Not polled yet.
    Start,
    /// On tokio's wheel until `LEAD` before the deadline.
    Coarse(Pin<Box<tokio::time::Sleep>>),
    /// With the fine timer.
    Fine(Arc<Entry>),
    /// Over.
    Done,
}

/// A future that completes at `deadline` (at once if it has passed).
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline: Some(deadline.into_std()),
        precise: true,
        state: State::Start,
    }
}

/// A future that completes `duration` from now.
pub fn sleep(duration: Duration) -> Sleep {
    Sleep {
        deadline: StdInstant::now().checked_add(duration),
        precise: true,
        state: State::Start,
    }
}

/// A [`Sleep`] on tokio's timer alone (about 1 ms late, and no CPU spent on precision): for a
/// caller that chooses precision at run time (a server at a time scale of 1 needs none).
pub fn coarse_sleep(duration: Duration) -> Sleep {
    let mut s = sleep(duration);
    s.precise = false;
    s
}

/// [`coarse_sleep`] until `deadline`.
pub fn coarse_sleep_until(deadline: Instant) -> Sleep {
    let mut s = sleep_until(deadline);
    s.precise = false;
    s
}

impl Sleep {
    /// The instant this timer completes at (`None`: never).
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline.map(Instant::from_std)
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            let next = match &mut self.state {
                State::Done => return Poll::Ready(()),
                State::Start => match self.deadline {
                    None => State::Coarse(Box::pin(tokio::time::sleep_until(
                        Instant::now() + Duration::from_secs(86_400 * 365 * 30),
                    ))),
                    Some(d) if !self.precise => {
                        State::Coarse(Box::pin(tokio::time::sleep_until(Instant::from_std(d))))
                    }
                    Some(d) => match d.checked_sub(LEAD) {
                        Some(early) if early > StdInstant::now() => State::Coarse(Box::pin(
                            tokio::time::sleep_until(Instant::from_std(early)),
                        )),
                        _ => fine().arm(d),
                    },
                },
                State::Coarse(sleep) => {
                    if sleep.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    match self.deadline {
                        Some(_) if !self.precise => State::Done,
                        Some(d) => fine().arm(d),
                        // Thirty years on: start another thirty.
                        None => State::Start,
                    }
                }
                State::Fine(entry) => {
                    if entry.fired.load(AtomicOrdering::Acquire) {
                        // Woken `WARM` early: the last stretch is spent here, on the task's
                        // own thread, so that it is awake and running at the deadline.
                        if self.deadline.is_some_and(|d| StdInstant::now() < d) {
                            cx.waker().wake_by_ref();
                            return Poll::Pending;
                        }
                        State::Done
                    } else {
                        {
                            let mut waker = lock(&entry.waker);
                            if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                                *waker = Some(cx.waker().clone());
                            }
                        }
                        // Fired between the first look and the waker's store: it may have
                        // found no waker to wake.
                        if !entry.fired.load(AtomicOrdering::Acquire) {
                            return Poll::Pending;
                        }
                        continue;
                    }
                }
            };
            self.state = next;
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        // A timer dropped before it fired stays in the queue until its deadline (at most
        // `LEAD` away); it no longer holds its task's waker.
        if let State::Fine(entry) = &self.state {
            lock(&entry.waker).take();
        }
    }
}

/// What a timer with the fine timer shares with it.
#[derive(Debug, Default)]
struct Entry {
    fired: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Entry {
    fn fire(&self) {
        self.fired.store(true, AtomicOrdering::Release);
        let waker = lock(&self.waker).take();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// A timer in the fine timer's queue, ordered by deadline, then by arrival.
struct Armed {
    deadline: StdInstant,
    seq: u64,
    entry: Arc<Entry>,
}

impl PartialEq for Armed {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Armed {}

impl PartialOrd for Armed {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Armed {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.deadline, self.seq).cmp(&(other.deadline, other.seq))
    }
}

/// The fine timer: a queue of deadlines and the thread that serves it.
struct Fine {
    queue: Mutex<Queue>,
    /// Signalled when a deadline earlier than every other is armed.
    earlier: Condvar,
    /// Whether the thread could be started (if not, timers finish on tokio's wheel).
    running: AtomicBool,
}

#[derive(Default)]
struct Queue {
    heap: BinaryHeap<Reverse<Armed>>,
    seq: u64,
}

/// The process's fine timer, started on first use.
fn fine() -> &'static Fine {
    static FINE: OnceLock<Fine> = OnceLock::new();
    FINE.get_or_init(|| {
        // Started before any caller can see the timer, so none finds it not yet running. The
        // thread's own `fine()` waits until this initialisation is over.
        let started = std::thread::Builder::new()
            .name("capsize-timer".into())
            .spawn(|| fine().serve());
        Fine {
            queue: Mutex::new(Queue::default()),
            earlier: Condvar::new(),
            running: AtomicBool::new(started.is_ok()),
        }
    })
}

impl Fine {
    /// Queues a timer for `deadline`.
    fn arm(&self, deadline: StdInstant) -> State {
        let now = StdInstant::now();
        // First, so that the fallback below, once its tokio timer has fired, ends here.
        if deadline <= now {
            return State::Done;
        }
        if !self.running.load(AtomicOrdering::Acquire) {
            return State::Coarse(Box::pin(tokio::time::sleep_until(Instant::from_std(
                deadline,
            ))));
        }
        let entry = Arc::new(Entry::default());
        let deadline = deadline.checked_sub(WARM).unwrap_or(now);
        if deadline <= now {
            entry.fired.store(true, AtomicOrdering::Release);
            return State::Fine(entry);
        }
        let mut q = lock(&self.queue);
        let first = q.heap.peek().is_none_or(|Reverse(a)| deadline < a.deadline);
        q.seq += 1;
        let seq = q.seq;
        q.heap.push(Reverse(Armed {
            deadline,
            seq,
            entry: entry.clone(),
        }));
        drop(q);
        if first {
            self.earlier.notify_one();
        }
        State::Fine(entry)
    }

    /// The fine timer's thread: wakes each timer at its deadline, forever.
    fn serve(&self) {
        precise_sleeps();
        let mut due = Vec::new();
        let mut q = lock(&self.queue);
        loop {
            let now = StdInstant::now();
            while q.heap.peek().is_some_and(|Reverse(a)| a.deadline <= now) {
                if let Some(Reverse(a)) = q.heap.pop() {
                    due.push(a.entry);
                }
            }
            if !due.is_empty() {
                // Woken without the lock held, so that a woken task can arm its next timer.
                drop(q);
                due.drain(..).for_each(|e| e.fire());
                q = lock(&self.queue);
                continue;
            }
            q = match q.heap.peek().map(|Reverse(a)| a.deadline - now) {
                None => self.earlier.wait(q).unwrap_or_else(PoisonError::into_inner),
                Some(left) if left > SPIN => {
                    self.earlier
                        .wait_timeout(q, left - SPIN)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
                Some(_) => {
                    drop(q);
                    std::thread::yield_now();
                    lock(&self.queue)
                }
            };
        }
    }
}

/// Asks the kernel to end this thread's sleeps on time rather than up to 50 µs late (Linux's
/// default timer slack, which lets it batch wake-ups).
fn precise_sleeps() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK only sets a number on the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0);
    }
}

/// Locks `m`, whatever a panicking holder left in it (every value here is valid on its own).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn ends_at_its_deadline_not_before() {
        for micros in [0, 50, 900, 2_500, 9_000] {
            let deadline = Instant::now() + Duration::from_micros(micros);
            sleep_until(deadline).await;
            assert!(Instant::now() >= deadline, "{micros} µs: woke early");
        }
    }

    #[tokio::test]
    async fn a_passed_deadline_is_ready_at_once() {
        let past = Instant::now() - Duration::from_millis(5);
        let mut s = std::pin::pin!(sleep_until(past));
        let waker = Waker::noop();
        assert_eq!(
            s.as_mut().poll(&mut Context::from_waker(waker)),
            Poll::Ready(())
        );
    }

    #[tokio::test]
    async fn timers_due_together_all_fire_and_dropped_ones_do_not_block() {
        let base = Instant::now() + Duration::from_millis(2);
        // Half are dropped before their deadline: the rest still fire.
        let mut kept = Vec::new();
        for i in 0..200u64 {
            let mut s = Box::pin(sleep_until(base + Duration::from_micros(i % 7)));
            let waker = Waker::noop();
            let _ = s.as_mut().poll(&mut Context::from_waker(waker));
            if i % 2 == 0 {
                kept.push(s);
            }
        }
        let all = async {
            for s in kept {
                s.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), all)
            .await
            .expect("every timer kept fired");
        assert!(Instant::now() >= base + Duration::from_micros(6));
    }

    #[tokio::test]
    async fn without_the_fine_timer_a_timer_ends_on_tokios() {
        // A fine timer whose thread could not start: every timer falls back to tokio's wheel,
        // and ends there once (it used to re-arm forever after its deadline).
        let lone = Fine {
            queue: Mutex::new(Queue::default()),
            earlier: Condvar::new(),
            running: AtomicBool::new(false),
        };
        let deadline = StdInstant::now() + Duration::from_millis(3);
        let State::Coarse(mut s) = lone.arm(deadline) else {
            panic!("not running: tokio's timer")
        };
        s.as_mut().await;
        assert!(StdInstant::now() >= deadline);
        assert!(matches!(lone.arm(deadline), State::Done));
    }

    #[tokio::test]
    async fn a_coarse_timer_ends_on_tokios_wheel_not_before_its_deadline() {
        let deadline = Instant::now() + Duration::from_millis(3);
        let mut s = std::pin::pin!(coarse_sleep_until(deadline));
        let _ = s.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        assert!(matches!(s.state, State::Coarse(_)), "never the fine timer");
        s.as_mut().await;
        assert!(Instant::now() >= deadline);
        assert!(matches!(s.state, State::Done));
    }

    #[tokio::test]
    async fn a_duration_too_long_to_name_never_ends() {
        let s = sleep(Duration::MAX);
        assert!(s.deadline().is_none());
        let out = tokio::time::timeout(Duration::from_millis(20), s).await;
        assert!(out.is_err());
    }
}

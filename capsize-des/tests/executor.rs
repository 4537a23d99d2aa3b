//! The executor's promises: the clock jumps to the next live timer and stands still while
//! anything can run; ties go to the timer armed first; a run nothing can wake says so; tokio's
//! runtime-agnostic primitives work unchanged; the same futures give the same run.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use capsize_des::{Executor, Handle, Stalled};
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use tokio::sync::{Notify, Semaphore};

type Log = Rc<RefCell<Vec<(u64, usize)>>>;

/// Task `id` sleeps until `at` ns, then writes (now, id) in the log.
async fn wake_at(h: Handle, log: Log, id: usize, at: u64) {
    h.sleep_until_ns(at).await;
    log.borrow_mut().push((h.now_ns(), id));
}

#[test]
fn timers_fire_at_their_deadlines_and_ties_go_to_the_first_armed() {
    let exec = Executor::new();
    let h = exec.handle();
    let log: Log = Rc::default();
    let deadlines = [30, 10, 20, 10, 30, 0];
    let (h2, log2) = (h.clone(), log.clone());
    exec.block_on(async move {
        let tasks: Vec<_> = deadlines
            .iter()
            .enumerate()
            .map(|(id, &at)| h2.spawn(wake_at(h2.clone(), log2.clone(), id, at)))
            .collect();
        for t in tasks {
            t.await;
        }
    })
    .unwrap();
    // Tasks arm their timers in spawn order; at 10 and at 30, the first armed goes first. The
    // one due at 0 (now) completes without waiting.
    assert_eq!(
        *log.borrow(),
        [(0, 5), (10, 1), (10, 3), (20, 2), (30, 0), (30, 4)]
    );
    assert_eq!(exec.now(), Duration::from_nanos(30));
}

#[test]
fn a_dropped_timer_never_moves_the_clock() {
    let exec = Executor::new();
    let h = exec.handle();
    let out = exec
        .block_on(async move {
            let long = h.sleep(Duration::from_secs(100));
            let short = h.sleep(Duration::from_secs(5));
            tokio::select! {
                biased;
                _ = long => "long",
                _ = short => "short",
            }
        })
        .unwrap();
    assert_eq!(out, "short");
    // The 100 s timer was dropped with the select: the run ends at 5 s.
    assert_eq!(exec.now(), Duration::from_secs(5));

    // A run left with only a dropped timer stalls where it is, not at the timer's deadline.
    let exec = Executor::new();
    let h = exec.handle();
    let stalled = exec.block_on(async move {
        let mut long = Box::pin(h.sleep(Duration::from_secs(100)));
        futures_poll_once(long.as_mut()).await; // armed
        drop(long);
        Notify::new().notified().await;
    });
    assert_eq!(stalled, Err(Stalled { at_ns: 0 }));
}

/// Polls `fut` once (arming a timer, say) and returns.
async fn futures_poll_once<F: std::future::Future + Unpin>(mut fut: F) {
    std::future::poll_fn(|cx| {
        let _ = std::pin::Pin::new(&mut fut).poll(cx);
        std::task::Poll::Ready(())
    })
    .await
}

#[test]
fn a_run_nothing_can_wake_is_reported_with_its_instant() {
    let exec = Executor::new();
    let h = exec.handle();
    let result = exec.block_on(async move {
        h.sleep(Duration::from_millis(7)).await;
        Notify::new().notified().await; // nobody will notify
    });
    assert_eq!(result, Err(Stalled { at_ns: 7_000_000 }));
}

#[test]
fn a_tokio_semaphore_serialises_tasks_in_virtual_time() {
    let exec = Executor::new();
    let h = exec.handle();
    let log: Log = Rc::default();
    let log2 = log.clone();
    exec.block_on(async move {
        let permits = Arc::new(Semaphore::new(1));
        let tasks: Vec<_> = (0..3)
            .map(|id| {
                let (h, log, permits) = (h.clone(), log2.clone(), permits.clone());
                h.clone().spawn(async move {
                    let _permit = permits.acquire().await.unwrap();
                    h.sleep(Duration::from_nanos(10)).await;
                    log.borrow_mut().push((h.now_ns(), id));
                })
            })
            .collect();
        for t in tasks {
            t.await;
        }
    })
    .unwrap();
    // One permit, 10 ns each, FIFO: done at 10, 20, 30.
    assert_eq!(*log.borrow(), [(10, 0), (20, 1), (30, 2)]);
}

#[test]
fn a_spawned_tasks_output_comes_back_through_its_handle() {
    let exec = Executor::new();
    let h = exec.handle();
    let out = exec
        .block_on(async move {
            let a = h.spawn({
                let h = h.clone();
                async move {
                    h.sleep(Duration::from_millis(3)).await;
                    6
                }
            });
            a.await * 7
        })
        .unwrap();
    assert_eq!(out, 42);
    assert_eq!(exec.now(), Duration::from_millis(3));
}

/// 500 tasks, each sleeping three random times, logging each wake-up.
fn random_run(seed: u64) -> Vec<(u64, usize)> {
    let exec = Executor::new();
    let h = exec.handle();
    let log: Log = Rc::default();
    let log2 = log.clone();
    exec.block_on(async move {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let tasks: Vec<_> = (0..500)
            .map(|id| {
                let gaps: Vec<u64> = (0..3).map(|_| rng.random_range(0..50)).collect();
                let (h, log) = (h.clone(), log2.clone());
                h.clone().spawn(async move {
                    for gap in gaps {
                        h.sleep(Duration::from_nanos(gap)).await;
                        log.borrow_mut().push((h.now_ns(), id));
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await;
        }
    })
    .unwrap();
    let log = log.borrow().clone();
    log
}

#[test]
fn the_same_futures_give_the_same_run_and_time_never_goes_back() {
    let a = random_run(9);
    assert_eq!(a, random_run(9));
    assert_ne!(a, random_run(10));
    assert_eq!(a.len(), 1_500);
    assert!(a.windows(2).all(|w| w[0].0 <= w[1].0));
}

#[test]
fn executors_run_one_after_another_on_one_thread() {
    for _ in 0..3 {
        let exec = Executor::new();
        let h = exec.handle();
        // A task left waiting on a timer when the top future ends is dropped with the run.
        let out = exec
            .block_on(async move {
                h.spawn({
                    let h = h.clone();
                    async move { h.sleep(Duration::from_secs(60)).await }
                })
                .detach();
                h.sleep(Duration::from_secs(1)).await;
                h.now()
            })
            .unwrap();
        assert_eq!(out, Duration::from_secs(1));
    }
}

#[test]
fn a_task_left_pending_does_not_come_back_in_the_next_run_of_the_same_executor() {
    let exec = Executor::new();
    let h = exec.handle();
    let woke: Rc<RefCell<bool>> = Rc::default();
    let (h1, woke1) = (h.clone(), woke.clone());
    exec.block_on(async move {
        h1.spawn({
            let h = h1.clone();
            async move {
                h.sleep_until_ns(60).await;
                *woke1.borrow_mut() = true;
            }
        })
        .detach();
        h1.sleep_until_ns(10).await;
    })
    .unwrap();
    // The first run ended at 10 ns with the task's 60 ns timer armed: it was dropped then, so
    // the second run passes 60 ns without waking it.
    exec.block_on(async move { h.sleep_until_ns(120).await })
        .unwrap();
    assert_eq!(exec.now(), Duration::from_nanos(120));
    assert!(!*woke.borrow());
}

#[test]
fn a_timer_kept_from_an_earlier_run_cannot_disarm_a_later_runs_timer() {
    // A Sleep armed in the first run, kept outside it and dropped in the second, must not free
    // the slot the second run's timer now uses: that timer still fires, at its deadline.
    let exec = Executor::new();
    let h = exec.handle();
    let kept: Rc<RefCell<Option<capsize_des::Sleep>>> = Rc::default();
    let (h1, kept1) = (h.clone(), kept.clone());
    exec.block_on(async move {
        let mut early = h1.sleep_until_ns(1_000);
        // Polled once, so it arms a timer (slot 0), then handed out of the run still armed.
        assert!(poll_once_noop(std::pin::Pin::new(&mut early)).is_pending());
        *kept1.borrow_mut() = Some(early);
    })
    .unwrap();
    let h2 = h.clone();
    let ended = exec.block_on(async move {
        let mut own = h2.sleep_until_ns(50);
        // Armed first in this run: it takes the slot the kept Sleep had.
        assert!(poll_once_noop(std::pin::Pin::new(&mut own)).is_pending());
        drop(kept.borrow_mut().take());
        own.await;
        h2.now_ns()
    });
    assert_eq!(ended, Ok(50));
}

/// Polls `fut` once with a waker that does nothing.
fn poll_once_noop<F: std::future::Future + ?Sized>(
    fut: std::pin::Pin<&mut F>,
) -> std::task::Poll<F::Output> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    fut.poll(&mut cx)
}

//! Keeps wiremock's memory flat: every [`ROTATE_EVERY`] requests, the catch-all mock is reset
//! and mounted again in one step that no request can observe half done.
//!
//! wiremock 0.6.5 keeps a clone of every request a mock matched (`src/mounted_mock.rs:58`,
//! `matched_requests.push(request.clone())`), even with request recording disabled (that only
//! skips the second copy, `src/mock_server/bare_server.rs:46`). Dropping a scoped mock's guard
//! frees nothing: `MockGuard::drop` calls `deactivate` (`bare_server.rs:324`), which only marks
//! the mock out of scope (`src/mock_set.rs:115-117`); the mock and its requests stay in the set.
//! Only a reset frees them (`mock_set.rs:107-108`, `self.mocks = vec![]`), and a request handled
//! between a reset and the next `register` finds no mock: 404 (`mock_set.rs:84-88`).
//!
//! Why the swap here cannot be observed: wiremock serves on one thread, a current-thread tokio
//! runtime of its own (`bare_server.rs:75-83`), spawning every connection's task there
//! (`src/mock_server/hyper.rs:74`); a request takes the server's lock and releases it within a
//! single poll (`hyper.rs:33-38`: `write().await`, then `handle_request`, which never awaits;
//! the response delay is awaited after the lock is released, `hyper.rs:50`). The swap runs as a
//! task spawned onto that same runtime (the responder runs there), and both its lock
//! acquisitions (`bare_server.rs:129-131`, `105-106`) succeed on their first poll: the lock is
//! free whenever a task of that thread is polled, since nothing else touches the server after
//! start, and `unconstrained` keeps tokio's cooperative budget from yielding. So the reset and
//! the new mount happen inside one poll, and no request is handled in between. Both premises are
//! checked at run time: a responder not on a current-thread runtime never rotates
//! (`Rotations::unsupported`), and a swap that does not finish in its first poll is counted
//! (`Rotations::interleaved`) and completed; the tests require both counts to stay 0.

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::task::Poll;

use tokio::runtime::{Handle, RuntimeFlavor};
use wiremock::MockServer;

use super::respond::{catch_all, Shared};

/// Requests between two rotations: wiremock holds at most about this many request clones.
pub const ROTATE_EVERY: u64 = 1024;

/// What the rotations did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rotations {
    /// Resets of the catch-all mock (each frees the requests wiremock kept).
    pub done: u64,
    /// Swaps that did not finish in one poll, where a request could have seen no mock (expect 0).
    pub interleaved: u64,
    /// Rotations skipped because the responder did not run on a current-thread runtime.
    pub unsupported: u64,
}

/// The rotation state shared with the responder.
#[derive(Debug, Default)]
pub(crate) struct Rotation {
    since: AtomicU64,
    pending: AtomicBool,
    server: OnceLock<Weak<MockServer>>,
    done: AtomicU64,
    interleaved: AtomicU64,
    unsupported: AtomicU64,
}

impl Rotation {
    /// The server to rotate (held weakly: the caller's handle owns it).
    pub(crate) fn attach(&self, server: &Arc<MockServer>) {
        let _ = self.server.set(Arc::downgrade(server));
    }

    /// What the rotations did so far.
    pub(crate) fn stats(&self) -> Rotations {
        Rotations {
            done: self.done.load(Ordering::Relaxed),
            interleaved: self.interleaved.load(Ordering::Relaxed),
            unsupported: self.unsupported.load(Ordering::Relaxed),
        }
    }

    /// Counts a request (wiremock has just stored its clone) and starts a rotation when due.
    /// Called from the responder, on wiremock's server thread.
    pub(crate) fn on_request(&self, shared: &Arc<Shared>) {
        let n = self.since.fetch_add(1, Ordering::Relaxed) + 1;
        if n < ROTATE_EVERY || self.pending.swap(true, Ordering::AcqRel) {
            return;
        }
        match Handle::try_current() {
            Ok(h) if h.runtime_flavor() == RuntimeFlavor::CurrentThread => {
                h.spawn(rotate(Arc::clone(shared)));
            }
            // The argument above needs wiremock's single thread; without it, keep every
            // request's clone rather than risk a 404 (and never try again).
            _ => {
                self.unsupported.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Resets the server and mounts a fresh catch-all mock, in one poll.
async fn rotate(shared: Arc<Shared>) {
    let rotation = &shared.rotation;
    let Some(server) = rotation.server.get().and_then(Weak::upgrade) else {
        return;
    };
    let mock = catch_all(&shared);
    let swap = async {
        server.reset().await;
        server.register(mock).await;
    };
    let mut swap = pin!(tokio::task::unconstrained(swap));
    let first = poll_fn(|cx| Poll::Ready(swap.as_mut().poll(cx))).await;
    if first.is_pending() {
        rotation.interleaved.fetch_add(1, Ordering::Relaxed);
        swap.await;
    }
    rotation.since.store(0, Ordering::Relaxed);
    rotation.done.fetch_add(1, Ordering::Relaxed);
    rotation.pending.store(false, Ordering::Release);
}

//! Ctrl-C during a sweep: the first SIGINT or SIGTERM sets the sweep's stop (no point starts
//! after it, the runs in flight are abandoned) so that the points that finished can be
//! written; a second one exits at once, without writing, unless the outputs are being
//! committed, which finishes first (a commit is all or nothing, never half done).
//!
//! The signals are caught as `capsize exec` catches them, with tokio's `signal`, here on a
//! thread of their own, so the sweep's threads need no runtime.

#![allow(clippy::disallowed_methods)] // real time: signals, on a runtime of their own

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};

use tokio::signal::unix::{signal, SignalKind};

/// A sweep's signals, caught from [`Interrupt::install`] on until the process ends.
pub struct Interrupt {
    stop: Arc<AtomicBool>,
    signal: Arc<AtomicI32>,
    writing: Arc<Mutex<()>>,
}

impl Interrupt {
    /// Catches SIGINT and SIGTERM from now on; `command` names the messages (`capsize
    /// sweep`). The first says what happens on stderr and sets [`Interrupt::stop`].
    pub fn install(command: &'static str) -> std::io::Result<Interrupt> {
        let stop = Arc::new(AtomicBool::new(false));
        let caught = Arc::new(AtomicI32::new(0));
        let writing = Arc::new(Mutex::new(()));
        let (ready, listening) = mpsc::channel::<std::io::Result<()>>();
        let (flag, first, lock) = (Arc::clone(&stop), Arc::clone(&caught), Arc::clone(&writing));
        std::thread::Builder::new()
            .name("capsize-signals".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                rt.block_on(async move {
                    let (mut int, mut term) = match (
                        signal(SignalKind::interrupt()),
                        signal(SignalKind::terminate()),
                    ) {
                        (Ok(i), Ok(t)) => (i, t),
                        (Err(e), _) | (_, Err(e)) => {
                            let _ = ready.send(Err(e));
                            return;
                        }
                    };
                    let _ = ready.send(Ok(()));
                    loop {
                        let sig = tokio::select! {
                            biased;
                            _ = int.recv() => libc::SIGINT,
                            _ = term.recv() => libc::SIGTERM,
                        };
                        if first.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
                            flag.store(true, Ordering::SeqCst);
                            eprintln!(
                                "{command}: interrupted: no new point starts, the runs in progress are abandoned and the points that finished are written (marked partial); Ctrl-C again to quit without writing"
                            );
                        } else {
                            // Not in the middle of a commit: it finishes first.
                            let _held = lock.lock();
                            std::process::exit(128 + sig);
                        }
                    }
                });
            })?;
        listening
            .recv()
            .map_err(|_| std::io::Error::other("the signal thread ended before listening"))??;
        Ok(Interrupt {
            stop,
            signal: caught,
            writing,
        })
    }

    /// The stop a sweep watches ([`crate::analysis::sweep::SweepOptions::stop`]).
    pub fn stop(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stop)
    }

    /// The first signal caught, if any (`libc::SIGINT` or `libc::SIGTERM`).
    pub fn caught(&self) -> Option<i32> {
        Some(self.signal.load(Ordering::SeqCst)).filter(|s| *s != 0)
    }

    /// Held while the outputs are committed: a second signal waits for the commit to end.
    pub fn writing(&self) -> MutexGuard<'_, ()> {
        self.writing.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The exit code of a command stopped by `signal`: 128 + its number (130 SIGINT, 143
/// SIGTERM).
pub fn exit_code(signal: i32) -> u8 {
    u8::try_from(128 + signal).unwrap_or(130)
}

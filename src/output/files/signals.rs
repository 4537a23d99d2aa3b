//! SIGINT and SIGTERM while outputs are committed. From the first commit in progress to the
//! last one's end, the two signals only set a flag, which the commit reads between files (and
//! between chunks of one file): it then puts back everything it did, removes its staging
//! folders and returns the signal ([`super::OutputError::signal`]), so a command stopped
//! while it writes leaves `--out` as it was and exits 128 + the signal. A signal caught after
//! the last check, or by a commit that finishes through signals ([`Mode::Finish`]), is
//! delivered again when the handlers in force before are back: a command that catches them
//! (a sweep) hears it, any other ends as the signal says.
//!
//! The handler does nothing but store the signal's number (async-signal-safe); the previous
//! handlers (the defaults, or tokio's) are kept and put back exactly.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

/// What a commit does with a signal it catches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Stops: every file back as it was, the signal returned.
    Abort,
    /// Finishes, then the signal is delivered again.
    Finish,
}

/// The signal caught during the commits in progress (0: none).
static CAUGHT: AtomicI32 = AtomicI32::new(0);

/// The commits in progress, and the handlers that were in force before the first.
static STATE: Mutex<State> = Mutex::new(State {
    depth: 0,
    saved: Vec::new(),
});

struct State {
    depth: usize,
    saved: Vec<(libc::c_int, libc::sigaction)>,
}

// SAFETY: `sigaction` is plain data (a handler address, flags and a mask), held only to be
// handed back to the OS; nothing dereferences it.
unsafe impl Send for State {}

const SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

extern "C" fn caught(signal: libc::c_int) {
    CAUGHT.store(signal, Ordering::SeqCst);
}

/// The signals held while one commit runs (see the module).
pub(super) struct Guard {
    /// The signal this commit has already answered (by stopping), not to deliver again.
    answered: bool,
}

impl Guard {
    /// Holds SIGINT and SIGTERM until the guard is dropped.
    pub(super) fn hold() -> Guard {
        let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
        if state.depth == 0 {
            CAUGHT.store(0, Ordering::SeqCst);
            state.saved.clear();
            for signal in SIGNALS {
                // SAFETY: both structs are zeroed plain data, then filled in; the handler only
                // stores to an atomic, which is async-signal-safe. `old` receives the handler in
                // force, put back in `drop`.
                unsafe {
                    let mut new: libc::sigaction = std::mem::zeroed();
                    new.sa_sigaction = caught as extern "C" fn(libc::c_int) as libc::sighandler_t;
                    new.sa_flags = libc::SA_RESTART;
                    libc::sigemptyset(&mut new.sa_mask);
                    let mut old: libc::sigaction = std::mem::zeroed();
                    if libc::sigaction(signal, &new, &mut old) == 0 {
                        state.saved.push((signal, old));
                    }
                }
            }
        }
        state.depth += 1;
        Guard { answered: false }
    }

    /// The signal caught so far, if any; `answer` marks it answered by this commit.
    pub(super) fn caught(&mut self, answer: bool) -> Option<i32> {
        let signal = Some(CAUGHT.load(Ordering::SeqCst)).filter(|s| *s != 0);
        self.answered |= answer && signal.is_some();
        signal
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
        state.depth -= 1;
        if state.depth > 0 {
            return;
        }
        for (signal, old) in state.saved.drain(..) {
            // SAFETY: `old` is the handler `sigaction` handed over in `hold`, put back as it was.
            unsafe {
                libc::sigaction(signal, &old, std::ptr::null_mut());
            }
        }
        let signal = CAUGHT.swap(0, Ordering::SeqCst);
        if signal != 0 && !self.answered {
            drop(state);
            // SAFETY: raise sends the signal to this thread; its handler is the one in force
            // before the commit (the default: the process ends as the signal says).
            unsafe {
                libc::raise(signal);
            }
        }
    }
}

/// The name of `signal`, for messages.
pub(super) fn name(signal: i32) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}

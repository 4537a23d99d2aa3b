//! Timers: a heap keyed by (deadline, arming order), and the [`Sleep`] future that arms one.

use std::cell::{Cell, RefCell};
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use crate::Shared;

/// What a sleeping future and the heap share: the waker to call, and whether the sleep was
/// dropped (its entry is then skipped, lazily, when it reaches the top).
#[derive(Default)]
struct Slot {
    waker: RefCell<Option<Waker>>,
    dropped: Cell<bool>,
}

struct Entry {
    deadline: u64,
    /// Arming order: the tie-break between equal deadlines.
    seq: u64,
    slot: Rc<Slot>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.deadline, self.seq) == (other.deadline, other.seq)
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.deadline, self.seq).cmp(&(other.deadline, other.seq))
    }
}

/// The armed timers.
#[derive(Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<Entry>>,
    next_seq: u64,
}

impl Timers {
    fn arm(&mut self, deadline: u64, waker: Waker) -> Rc<Slot> {
        let slot = Rc::new(Slot {
            waker: RefCell::new(Some(waker)),
            dropped: Cell::new(false),
        });
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Reverse(Entry {
            deadline,
            seq,
            slot: Rc::clone(&slot),
        }));
        slot
    }

    /// The earliest deadline of a live timer and the wakers of every live timer due then, in
    /// arming order; `None` if no timer is armed.
    pub(crate) fn fire_next(&mut self) -> Option<(u64, Vec<Waker>)> {
        let mut at = None;
        let mut wakers = Vec::new();
        while let Some(Reverse(top)) = self.heap.peek() {
            if top.slot.dropped.get() {
                self.heap.pop();
                continue;
            }
            match at {
                None => at = Some(top.deadline),
                Some(t) if top.deadline != t => break,
                Some(_) => {}
            }
            let Some(Reverse(entry)) = self.heap.pop() else {
                break;
            };
            let waker = entry.slot.waker.borrow_mut().take();
            wakers.extend(waker);
        }
        at.map(|t| (t, wakers))
    }
}

/// A future that completes when the executor's clock reaches its deadline.
#[must_use = "a Sleep does nothing unless awaited"]
pub struct Sleep {
    shared: Rc<Shared>,
    deadline: u64,
    slot: Option<Rc<Slot>>,
}

impl std::fmt::Debug for Sleep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline_ns", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl Sleep {
    pub(crate) fn new(shared: Rc<Shared>, deadline: u64) -> Sleep {
        Sleep {
            shared,
            deadline,
            slot: None,
        }
    }

    /// The instant it completes, in nanoseconds since the start.
    pub fn deadline_ns(&self) -> u64 {
        self.deadline
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.shared.now.get() >= self.deadline {
            return Poll::Ready(());
        }
        match &self.slot {
            // Polled again before its time (woken by something else): keep the latest waker.
            Some(slot) => {
                let mut waker = slot.waker.borrow_mut();
                match waker.as_ref() {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *waker = Some(cx.waker().clone()),
                }
            }
            None => {
                let slot = self
                    .shared
                    .timers
                    .borrow_mut()
                    .arm(self.deadline, cx.waker().clone());
                self.slot = Some(slot);
            }
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(slot) = &self.slot {
            slot.dropped.set(true);
            slot.waker.borrow_mut().take();
        }
    }
}

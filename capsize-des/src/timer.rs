//! Timers: a heap keyed by (deadline, arming order), and the [`Sleep`] future that arms one.
//!
//! Arming a timer allocates nothing once the run is warm: a timer's waker lives in a slot of a
//! slab that the [`Sleep`] holds by index, freed for reuse when the `Sleep` is dropped. A heap
//! entry names its slot and the slot's generation; an entry whose slot was freed (its `Sleep`
//! dropped) is skipped when it reaches the top.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use crate::Shared;

/// A slot of the slab: the waker of an armed timer, and a generation that changes each time
/// the slot is freed.
#[derive(Default)]
struct Slot {
    waker: Option<Waker>,
    generation: u32,
}

struct Entry {
    /// The deadline in the high 64 bits, the arming order (the tie-break between equal
    /// deadlines) in the low: one comparison orders by both.
    key: u128,
    slot: u32,
    generation: u32,
}

impl Entry {
    fn deadline(&self) -> u64 {
        (self.key >> 64) as u64
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
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
        self.key.cmp(&other.key)
    }
}

/// The armed timers.
#[derive(Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<Entry>>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    next_seq: u64,
}

impl Timers {
    /// Arms a timer for `deadline` that wakes `waker`; returns its slot and generation.
    fn arm(&mut self, deadline: u64, waker: Waker) -> (u32, u32) {
        let slot = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot::default());
                // More than 4 billion timers armed at once would exhaust memory long before.
                u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let s = &mut self.slots[slot as usize];
        s.waker = Some(waker);
        let seq = self.next_seq;
        self.next_seq += 1;
        let generation = s.generation;
        self.heap.push(Reverse(Entry {
            key: (u128::from(deadline) << 64) | u128::from(seq),
            slot,
            generation,
        }));
        (slot, generation)
    }

    /// The slot `slot` of generation `generation`, if it is still that timer's.
    fn slot(&mut self, (slot, generation): (u32, u32)) -> Option<&mut Slot> {
        self.slots
            .get_mut(slot as usize)
            .filter(|s| s.generation == generation)
    }

    /// Replaces the waker of the timer armed in `slot`.
    fn rewake(&mut self, slot: (u32, u32), waker: &Waker) {
        if let Some(s) = self.slot(slot) {
            match &s.waker {
                Some(w) if w.will_wake(waker) => {}
                _ => s.waker = Some(waker.clone()),
            }
        }
    }

    /// Frees the timer armed in `slot`: it will never fire, and the slot can be reused.
    fn free(&mut self, slot: (u32, u32)) {
        if let Some(s) = self.slot(slot) {
            s.waker = None;
            s.generation = s.generation.wrapping_add(1);
            self.free.push(slot.0);
        }
    }

    /// Disarms every timer (the end of a run) and returns their wakers, to be dropped outside
    /// the borrow. Every slot is freed: a `Sleep` left from this run frees nothing later.
    pub(crate) fn clear(&mut self) -> Vec<Waker> {
        self.heap.clear();
        self.free.clear();
        let mut wakers = Vec::new();
        for (i, s) in self.slots.iter_mut().enumerate() {
            wakers.extend(s.waker.take());
            s.generation = s.generation.wrapping_add(1);
            self.free.push(u32::try_from(i).unwrap_or(u32::MAX));
        }
        wakers
    }

    /// The earliest deadline of a live timer, its wakers and those of every other live timer
    /// due then appended to `wakers` in arming order; `None` if no timer is armed.
    pub(crate) fn fire_next(&mut self, wakers: &mut Vec<Waker>) -> Option<u64> {
        let mut at = None;
        while let Some(Reverse(top)) = self.heap.peek() {
            let slot = &mut self.slots[top.slot as usize];
            if slot.generation != top.generation {
                self.heap.pop();
                continue;
            }
            match at {
                None => at = Some(top.deadline()),
                Some(t) if top.deadline() != t => break,
                Some(_) => {}
            }
            wakers.extend(slot.waker.take());
            self.heap.pop();
        }
        at
    }
}

/// A future that completes when the executor's clock reaches its deadline.
#[must_use = "a Sleep does nothing unless awaited"]
pub struct Sleep {
    shared: Rc<Shared>,
    deadline: u64,
    /// The slot it armed, and the slot's generation then.
    slot: Option<(u32, u32)>,
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
        let mut timers = self.shared.timers.borrow_mut();
        match self.slot {
            // Polled again before its time (woken by something else): keep the latest waker.
            Some(slot) => timers.rewake(slot, cx.waker()),
            None => {
                let slot = timers.arm(self.deadline, cx.waker().clone());
                drop(timers);
                self.slot = Some(slot);
            }
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            // Not borrowed: a Sleep is never dropped while the timers are in use (the executor
            // drops wakers outside its borrow). Were it, the slot would only stay unused.
            if let Ok(mut timers) = self.shared.timers.try_borrow_mut() {
                timers.free(slot);
            }
        }
    }
}

//! Token and iteration budgets for agents and the subagents they spawn.
//!
//! A root budget holds a number of tokens. A subagent's budget is drawn from its parent's:
//! the grant is reserved atomically and clamped to what the parent has left (a parent with
//! nothing left grants zero, and zero means zero). When the child is dropped, what it did not
//! use goes back to the parent. A budget that refuses a charge, or runs past its iteration cap,
//! is *exhausted*: its token is cancelled, so pending work that draws on it (and on any of its
//! children) stops with [`BudgetExhausted`].

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use thiserror::Error;
use tokio_util::sync::CancellationToken;

/// A budget was spent: the call or step asking for more was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum BudgetExhausted {
    /// A charge asked for more tokens than were left.
    #[error("token budget '{budget}' exhausted: asked for {requested}, {remaining} left")]
    Tokens {
        /// The budget's name.
        budget: String,
        /// Tokens asked for.
        requested: u64,
        /// Tokens that were left.
        remaining: u64,
    },
    /// An iteration past the cap was started.
    #[error("iteration cap of budget '{budget}' reached: {cap} iterations")]
    Iterations {
        /// The budget's name.
        budget: String,
        /// The cap.
        cap: u32,
    },
    /// A budget this one draws on was exhausted first.
    #[error("budget '{budget}' stopped: a budget it draws on is exhausted")]
    Parent {
        /// The budget's name.
        budget: String,
    },
}

#[derive(Debug)]
struct State {
    granted: u64,
    used: u64,
    /// Granted to children still alive.
    lent: u64,
    iterations: u32,
    exhausted: Option<BudgetExhausted>,
}

#[derive(Debug)]
struct Inner {
    name: String,
    max_iterations: Option<u32>,
    state: Mutex<State>,
    parent: Option<Budget>,
    spent: CancellationToken,
}

/// A shared token budget with an optional iteration cap. Clones share the same budget.
#[derive(Clone)]
pub struct Budget {
    inner: Arc<Inner>,
}

impl fmt::Debug for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.lock();
        f.debug_struct("Budget")
            .field("name", &self.inner.name)
            .field("granted", &s.granted)
            .field("used", &s.used)
            .field("lent", &s.lent)
            .finish()
    }
}

impl Budget {
    /// A root budget of `tokens`, with an optional cap on [`Budget::start_iteration`].
    pub fn new(name: impl Into<String>, tokens: u64, max_iterations: Option<u32>) -> Self {
        Budget::build(
            name.into(),
            tokens,
            max_iterations,
            None,
            CancellationToken::new(),
        )
    }

    fn build(
        name: String,
        granted: u64,
        max_iterations: Option<u32>,
        parent: Option<Budget>,
        spent: CancellationToken,
    ) -> Self {
        Budget {
            inner: Arc::new(Inner {
                name,
                max_iterations,
                state: Mutex::new(State {
                    granted,
                    used: 0,
                    lent: 0,
                    iterations: 0,
                    exhausted: None,
                }),
                parent,
                spent,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Plain counters, consistent after every statement: a poisoned lock is safe to reuse.
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The budget's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Tokens this budget was granted.
    pub fn granted(&self) -> u64 {
        self.lock().granted
    }

    /// Tokens charged to this budget, including what finished children used.
    pub fn used(&self) -> u64 {
        self.lock().used
    }

    /// Tokens neither used nor lent to live children.
    pub fn remaining(&self) -> u64 {
        let s = self.lock();
        s.granted - s.used - s.lent
    }

    /// Iterations started so far.
    pub fn iterations(&self) -> u32 {
        self.lock().iterations
    }

    /// Why the budget is exhausted, if it is (its own refusal, or a parent's).
    pub fn exhausted(&self) -> Option<BudgetExhausted> {
        self.exhausted_locked(&self.lock())
    }

    /// Resolves when this budget (or one it draws on) is exhausted.
    pub async fn spent(&self) -> BudgetExhausted {
        self.inner.spent.cancelled().await;
        self.exhausted().unwrap_or_else(|| BudgetExhausted::Parent {
            budget: self.inner.name.clone(),
        })
    }

    fn exhaust(&self, state: &mut State, why: BudgetExhausted) -> BudgetExhausted {
        state.exhausted.get_or_insert(why.clone());
        self.inner.spent.cancel();
        why
    }

    /// Draws a child budget of up to `tokens`, with its own optional iteration cap: reserved
    /// at once, clamped to what is left here.
    pub fn child(
        &self,
        name: impl Into<String>,
        tokens: u64,
        max_iterations: Option<u32>,
    ) -> Budget {
        let mut s = self.lock();
        let grant = tokens.min(s.granted - s.used - s.lent);
        s.lent += grant;
        drop(s);
        Budget::build(
            name.into(),
            grant,
            max_iterations,
            Some(self.clone()),
            self.inner.spent.child_token(),
        )
    }

    /// Charges `tokens`. If fewer are left, nothing is charged, the budget becomes exhausted
    /// (pending work drawing on it is cancelled), and the refusal is returned.
    pub fn charge(&self, tokens: u64) -> Result<(), BudgetExhausted> {
        let mut s = self.lock();
        if let Some(e) = self.exhausted_locked(&s) {
            return Err(e);
        }
        let remaining = s.granted - s.used - s.lent;
        if tokens > remaining {
            let why = BudgetExhausted::Tokens {
                budget: self.inner.name.clone(),
                requested: tokens,
                remaining,
            };
            return Err(self.exhaust(&mut s, why));
        }
        s.used += tokens;
        Ok(())
    }

    /// Gives back tokens charged for work that was never sent.
    pub(crate) fn refund(&self, tokens: u64) {
        let mut s = self.lock();
        s.used -= tokens.min(s.used);
    }

    /// Starts one more iteration (an agent turn). Past the cap, the budget becomes exhausted.
    pub fn start_iteration(&self) -> Result<u32, BudgetExhausted> {
        let mut s = self.lock();
        if let Some(e) = self.exhausted_locked(&s) {
            return Err(e);
        }
        if let Some(cap) = self.inner.max_iterations {
            if s.iterations >= cap {
                let why = BudgetExhausted::Iterations {
                    budget: self.inner.name.clone(),
                    cap,
                };
                return Err(self.exhaust(&mut s, why));
            }
        }
        s.iterations += 1;
        Ok(s.iterations)
    }

    fn exhausted_locked(&self, s: &State) -> Option<BudgetExhausted> {
        if let Some(e) = &s.exhausted {
            return Some(e.clone());
        }
        self.inner
            .spent
            .is_cancelled()
            .then(|| BudgetExhausted::Parent {
                budget: self.inner.name.clone(),
            })
    }

    /// Gives up this handle. When the last handle of a child budget goes, its unused tokens
    /// return to the parent and what it used is counted there.
    pub fn close(self) {}
}

impl Drop for Inner {
    fn drop(&mut self) {
        let Some(parent) = &self.parent else { return };
        let s = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        let (granted, used) = (s.granted, s.used);
        let mut p = parent.lock();
        p.lent -= granted;
        p.used += used;
    }
}

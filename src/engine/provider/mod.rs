//! The provider side of a run: where a call's attempt goes and how its answer comes back.
//!
//! [`Provider`] is what the workload driver calls for every attempt. Two implementations:
//! [`simulated::VirtualProvider`] feeds the clockless provider model the (paused) runtime clock
//! in-process; [`http::HttpProvider`] sends a real HTTP request to the mock provider (or any
//! compatible server). Both book the provider-side facts the recorder needs: arrivals over time
//! and orphaned quota (requests charged whose answers nobody used).

pub mod client;
pub mod http;
pub mod simulated;
pub mod transport;

use std::cell::Cell;
use std::future::Future;

use capsize_mock::Bill;

use crate::engine::recorder::{Recorder, Spent};
use crate::scheduler::{Moment, ProviderError};

/// One query, as its attempts see it: whether its caller has given up on it (an answer that
/// arrives after that is orphaned quota, and unused), and what the answers its calls used were
/// billed (a priced provider's). Small: every query's future holds one.
#[derive(Debug, Default)]
pub struct QueryState {
    /// Turns true when the caller has given up on the query.
    pub abandoned: Cell<bool>,
    used: Cell<Spent>,
    /// The replica of the client the query runs on.
    replica: u32,
}

impl QueryState {
    /// A query of replica `replica`'s.
    pub fn on_replica(replica: usize) -> Self {
        QueryState {
            replica: u32::try_from(replica).unwrap_or(u32::MAX),
            ..QueryState::default()
        }
    }

    /// The replica of the client the query runs on.
    pub fn replica(&self) -> usize {
        self.replica as usize
    }

    /// What the answers the query used were billed, so far.
    pub fn used(&self) -> Spent {
        self.used.get()
    }

    /// The query used an answer billed `bill`, unless it was abandoned already; returns
    /// whether it did.
    pub fn use_answer(&self, bill: &Bill) -> bool {
        if self.abandoned.get() {
            return false;
        }
        let spent = Spent {
            tokens: bill.tokens(),
            picodollars: bill.picodollars(),
        };
        self.used.set(self.used.get().plus(spent));
        true
    }
}

/// Where attempts go, for the query `query` (see [`QueryState`]).
pub trait Provider {
    /// One attempt of `tokens` along `route` (a route id of [`crate::engine::routes`]: where
    /// it goes and what it asks for there). Resolves when the answer arrives, or at the
    /// client's timeout; dropping the future abandons the request.
    fn request(
        &self,
        tokens: u64,
        route: u16,
        query: &QueryState,
    ) -> impl Future<Output = Result<(), ProviderError>>;
}

/// Counts a charged request as orphaned if it is dropped unanswered, or answered after its
/// query was abandoned.
struct OrphanWatch<'a, I: Moment> {
    charged: bool,
    answered: bool,
    abandoned: &'a Cell<bool>,
    recorder: &'a Recorder<I>,
}

impl<I: Moment> Drop for OrphanWatch<'_, I> {
    fn drop(&mut self) {
        if self.charged && (!self.answered || self.abandoned.get()) {
            self.recorder.orphaned();
        }
    }
}

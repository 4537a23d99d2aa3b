//! The client's own time in a run (`[scheduler.client]`): each attempt waits for one of the
//! client's threads and works on it before it leaves, and again after its answer arrives.
//!
//! Each provider takes its [`Clients`] and asks the query's for its send work before an
//! attempt leaves and its parse work after the answer (a branch a run without a client model
//! skips: the call path stays one piece of code, whose cost per call is gated). Only requests
//! to a provider pay it: a tool sent to none runs in the agent, not through its HTTP client.
//! One [`Client`] per replica (each process of a fleet has its own event loop), chosen by the
//! query's replica. An attempt dropped before it ends (its query abandoned) is not recorded:
//! `latency_ms.client` counts the attempts that ended. Its threads are
//! a fair semaphore: at one instant they go in the order they were asked for, the same rule as
//! the scheduler's permits. The work is drawn from the replica's own stream when a thread is
//! taken, so the same scenario and seed give the same run. The client's timeout per attempt
//! counts the provider's answer only, as an HTTP client's read timeout does: the work around it
//! is the client's, before the request is written and after the answer is read.
//!
//! The client's first attempt also does its warm-up before its send work. An attempt that
//! finds no idle connection in the client's pool as it asks for a thread opens one after its
//! send work: it waits the connection's time off the thread (the handshake is the kernel's),
//! then writes its request in a turn of its own, behind whatever waits for a thread by then,
//! as an asyncio client does. So tasks that start together on new connections leave together,
//! after all their send work, as the SDKs' requests did (the first 50 reached the provider
//! within 7 ms of each other). An answered attempt gives its connection back to the pool as
//! its answer arrives (the pool keeps `keepalive` idle ones); one that timed out, failed or
//! was dropped closes it, as an HTTP client does.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use capsize_mock::limits::duration_from_ms;
use capsize_mock::Latency;
use rand::rngs::Xoshiro256PlusPlus;
use rand::SeedableRng;
use tokio::sync::Semaphore;

use super::QueryState;
use crate::engine::recorder::Recorder;
use crate::engine::routes::Routes;
use crate::engine::scenario::ClientModel;
use crate::engine::timescale::TimeScale;
use crate::engine::workload::{stream_seed, streams};
use crate::scheduler::{Clock, Moment};

/// The replicas' clients of a run: none without a client model, else one per replica; and
/// which routes go through them (those to a provider).
pub struct Clients<C: Clock> {
    clients: Vec<Client<C>>,
    /// Per route: sent to a provider, through the client's HTTP client (not a tool run in the
    /// agent).
    to_provider: Vec<bool>,
}

impl<C: Clock> Clients<C> {
    /// No client model: attempts cost the client nothing.
    pub fn none() -> Self {
        Clients {
            clients: Vec::new(),
            to_provider: Vec::new(),
        }
    }

    /// `replicas` clients of `model` (none without one) for `routes` on `clock` at `scale`,
    /// replica `first + i` drawing from stream `first + i` of `seed`'s client stream (a
    /// replica in a process of its own is one of the fleet's), recording into `recorder`.
    pub fn new(
        (model, routes): (Option<&ClientModel>, &Routes),
        (first, replicas): (usize, usize),
        seed: u64,
        (clock, scale): (C, TimeScale),
        recorder: &Arc<Recorder<C::Instant>>,
    ) -> Self {
        let Some(model) = model else {
            return Clients::none();
        };
        recorder.keep_client_time();
        let stream = stream_seed(seed, streams::CLIENT);
        let clients = (0..replicas.max(1))
            .map(|i| {
                let seed = stream_seed(stream, (first + i) as u64);
                Client::new(model, seed, clock.clone(), scale, recorder.clone())
            })
            .collect();
        let to_provider = routes
            .routes
            .iter()
            .map(|r| routes.endpoints[r.endpoint].provider.is_some())
            .collect();
        Clients {
            clients,
            to_provider,
        }
    }

    /// The client an attempt of `query` along `route` goes through, if the run models one
    /// and the route goes to a provider.
    #[inline(always)]
    pub fn of(&self, query: &QueryState, route: u16) -> Option<&Client<C>> {
        match self.clients.len() {
            0 => None,
            n if self.to_provider.get(usize::from(route)) == Some(&true) => {
                self.clients.get(query.replica() % n)
            }
            _ => None,
        }
    }
}

/// One replica's client: its threads, its work, its pool of connections, its random stream.
pub struct Client<C: Clock> {
    clock: C,
    threads: Semaphore,
    send: Latency,
    parse: Latency,
    /// The warm-up, until the first attempt takes it.
    warmup: Cell<Option<Latency>>,
    connect: Latency,
    /// Idle connections in the pool.
    idle: Cell<usize>,
    keepalive: usize,
    rng: RefCell<Xoshiro256PlusPlus>,
    recorder: Arc<Recorder<C::Instant>>,
    scale: TimeScale,
}

impl<C: Clock> Client<C> {
    /// The client `model` on `clock` at `scale`, drawing from `seed`, recording into
    /// `recorder`.
    fn new(
        model: &ClientModel,
        seed: u64,
        clock: C,
        scale: TimeScale,
        recorder: Arc<Recorder<C::Instant>>,
    ) -> Self {
        Client {
            clock,
            threads: Semaphore::new(model.threads.min(Semaphore::MAX_PERMITS)),
            send: model.send.clone(),
            parse: model.parse.clone(),
            warmup: Cell::new(Some(model.warmup.clone())),
            connect: model.connect.clone(),
            idle: Cell::new(0),
            keepalive: model.keepalive,
            rng: RefCell::new(Xoshiro256PlusPlus::seed_from_u64(seed)),
            recorder,
            scale,
        }
    }

    /// The work before an attempt leaves (the client's warm-up first if this is its first
    /// attempt), then, if no connection is idle, opening one and a turn to write the request;
    /// returns the time it all took (runtime).
    ///
    /// Boxed, as is [`Client::done`]: the providers' call path holds only a pointer to it, so a
    /// run without a client model does not carry its state in every attempt's future (a cost
    /// per call the gate measured).
    pub fn send(&self) -> Pin<Box<dyn Future<Output = Duration> + '_>> {
        Box::pin(self.send_work())
    }

    async fn send_work(&self) -> Duration {
        let new_connection = match self.idle.get() {
            0 => true,
            n => {
                self.idle.set(n - 1);
                false
            }
        };
        let warmup = self.warmup.take();
        let asked = self.clock.now();
        self.work(&[warmup.as_ref(), Some(&self.send)]).await;
        if new_connection && !none(&self.connect) {
            let ms = self.connect.sample(&mut *self.rng.borrow_mut());
            self.wait(ms).await;
            // Connected: the request is written in a turn of its own, behind the work
            // waiting for a thread by then (never closed: no error but a closed semaphore).
            let _thread = self.threads.acquire().await.ok();
        }
        self.clock.now().saturating_duration_since(asked)
    }

    /// The attempt is over: if an answer arrived (not after a timeout or a transport error)
    /// its connection goes back to the pool and the work after it is done; then the time the
    /// attempt cost the client, `spent` before it left included (runtime), is recorded.
    pub fn done(&self, spent: Duration, answered: bool) -> Pin<Box<dyn Future<Output = ()> + '_>> {
        Box::pin(self.done_work(spent, answered))
    }

    async fn done_work(&self, mut spent: Duration, answered: bool) {
        if answered {
            if self.idle.get() < self.keepalive {
                self.idle.set(self.idle.get() + 1);
            }
            spent += self.work(&[Some(&self.parse)]).await;
        }
        self.recorder.client_time(spent);
    }

    /// Waits for a thread and works `works` on it, one after another; returns the time both
    /// took (runtime). Work that is none (a constant zero) takes no thread.
    async fn work(&self, works: &[Option<&Latency>]) -> Duration {
        if works.iter().flatten().all(|w| none(w)) {
            return Duration::ZERO;
        }
        let asked = self.clock.now();
        // Never closed: the only error is a closed semaphore.
        let _thread = self.threads.acquire().await.ok();
        let ms: f64 = {
            let rng = &mut *self.rng.borrow_mut();
            works.iter().flatten().map(|w| w.sample(rng)).sum()
        };
        self.wait(ms).await;
        self.clock.now().saturating_duration_since(asked)
    }

    /// Waits `ms` of model time.
    async fn wait(&self, ms: f64) {
        let start = self.clock.now();
        let until = start + self.scale.to_runtime(duration_from_ms(ms));
        self.clock.sleep_until(until).await;
    }
}

/// Whether `work` is none: a constant zero.
fn none(work: &Latency) -> bool {
    matches!(work, Latency::Constant(ms) if *ms <= 0.0)
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::*;
    use crate::engine::sim::runtime::{DesRuntime, Runtime};
    use crate::scheduler::Nanos;

    /// Ten attempts at once on one thread, 1 ms to send and 2 ms to parse, answered 50 ms after
    /// they leave: the n-th leaves at n ms, is answered at n + 50 ms and queues behind the
    /// parses before it.
    #[test]
    fn attempts_queue_for_one_thread_before_and_after_the_provider() {
        let model = ClientModel::one_thread(Latency::Constant(1.0), Latency::Constant(2.0));
        let ends = crate::engine::sim::runtime::run_virtual(crate::engine::sim::TICK, |rt| {
            let rt: DesRuntime<Nanos> = rt;
            async move {
                let recorder = Arc::new(Recorder::new(TimeScale::VIRTUAL, 1));
                recorder.keep_client_time();
                let client = Rc::new(Client::new(
                    &model,
                    7,
                    rt.clone(),
                    TimeScale::VIRTUAL,
                    recorder,
                ));
                let t0 = rt.now();
                let tasks: Vec<_> = (0..10)
                    .map(|_| {
                        let (client, rt) = (client.clone(), rt.clone());
                        rt.clone().spawn(async move {
                            let spent = client.send().await;
                            let left = rt.now();
                            rt.sleep_until(left + Duration::from_millis(50)).await;
                            client.done(spent, true).await;
                            rt.now() - t0
                        })
                    })
                    .collect();
                let mut ends = Vec::new();
                for t in tasks {
                    ends.push(t.await);
                }
                ends
            }
        })
        .unwrap();
        // Sends take the thread 0-10 ms; the first answer comes at 51 ms, the thread is free,
        // and the parses run back to back: the n-th (from 1) ends at 51 + 2n - 2 + 2 = 51 + 2n
        // ... all after the sends, since the first answer comes after the last send.
        let want: Vec<Duration> = (1..=10)
            .map(|n| Duration::from_millis(51 + 2 * n))
            .collect();
        assert_eq!(ends, want);
    }
}

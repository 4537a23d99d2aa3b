//! Building a [`Scheduler`]: the clock, the jitter RNG, the observer, the limiters (its own
//! from the configuration, another scheduler's, or given: on Redis) and an adaptive limit,
//! checked together by [`Builder::build`].

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use rand::rngs::Xoshiro256PlusPlus;
use rand::{Rng, SeedableRng};
use tokio::sync::Semaphore;

use crate::adaptive::{self, Adaptive};
use crate::{
    BoxRng, Clock, ConfigError, Inner, Observer, RateLimiter, Scheduler, SchedulerConfig,
    TokioClock,
};

/// Builds a [`Scheduler`] from a validated [`SchedulerConfig`].
pub struct Builder<C: Clock = TokioClock> {
    clock: C,
    config: SchedulerConfig,
    rng: BoxRng,
    observer: Option<Arc<dyn Observer<C::Instant>>>,
    /// Another scheduler whose limiters this one shares.
    shared: Option<Scheduler<C>>,
    /// Limiters built by the caller (a limiter on Redis), instead of the configuration's.
    given: Option<Limiters<C>>,
    /// An adaptive limit on calls in flight, instead of `max_concurrency`.
    adaptive: Option<Adaptive>,
}

impl<C: Clock> Builder<C> {
    /// Reads time from `clock` instead, a clock of the same instants (a simulator's virtual
    /// clock on tokio's instants; [`Scheduler::builder_on`] starts a builder on a clock of other
    /// instants, such as [`crate::Nanos`]).
    pub fn clock<D: Clock<Instant = C::Instant>>(self, clock: D) -> Builder<D> {
        Builder {
            clock,
            config: self.config,
            rng: self.rng,
            observer: self.observer,
            shared: None,
            given: None,
            adaptive: self.adaptive,
        }
    }

    /// Limits calls in flight with `policy` ([`crate::Aimd`] or [`crate::Gradient`])
    /// instead of the configuration's `max_concurrency`: the limit moves with successes and
    /// their latency and is cut by 429s and timeouts (see [`adaptive`]).
    pub fn adaptive_concurrency(mut self, policy: impl Into<Adaptive>) -> Self {
        self.adaptive = Some(policy.into());
        self
    }

    /// Shares `other`'s rate limiters (buckets, queue and Retry-After pause) instead of
    /// building its own: replicas of one client keeping one limit between them, as a fleet on
    /// one API key does with a shared limiter. This configuration's `limits` and
    /// `named_limits` are then not used; its concurrency and retry policy are its own. Call
    /// it after [`Builder::clock`]: `other` reads the same clock.
    pub fn share_limiters(mut self, other: &Scheduler<C>) -> Self {
        self.shared = Some(other.clone());
        self
    }

    /// Uses these limiters, the default one and named ones, instead of building them from the
    /// configuration's `limits` and `named_limits`: limiters built by the caller, such as
    /// `RateLimiter::shared` on Redis (feature `redis`). Names must be unique and non-empty.
    pub fn limiters(
        mut self,
        default: Option<RateLimiter<C>>,
        named: Vec<(String, RateLimiter<C>)>,
    ) -> Self {
        let named = named.into_iter().map(|(n, l)| (n, Arc::new(l))).collect();
        self.given = Some((default.map(Arc::new), named));
        self
    }

    /// Seeds the jitter RNG (Xoshiro256++; the default seed is 0).
    pub fn seed(mut self, seed: u64) -> Self {
        self.rng = Box::new(Xoshiro256PlusPlus::seed_from_u64(seed));
        self
    }

    /// Uses `rng` for jitter.
    pub fn rng(mut self, rng: impl Rng + Send + 'static) -> Self {
        self.rng = Box::new(rng);
        self
    }

    /// Reports to `observer`: every event, or only call ends if it wants no events.
    pub fn observer(mut self, observer: Arc<dyn Observer<C::Instant>>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Checks the configuration and builds the scheduler. Rate-limit buckets start full now.
    pub fn build(mut self) -> Result<Scheduler<C>, ConfigError> {
        self.config.retry.validate()?;
        let (limiter, named) = match (&self.shared, self.given.take()) {
            (Some(other), _) => (other.inner.limiter.clone(), other.inner.named.clone()),
            (None, Some((default, named))) => {
                for (i, (name, _)) in named.iter().enumerate() {
                    if name.is_empty() || named[..i].iter().any(|(n, _)| n == name) {
                        return Err(ConfigError::LimitName(name.clone()));
                    }
                }
                (default, named)
            }
            (None, None) => self.own_limiters()?,
        };
        let adaptive = match self.adaptive {
            Some(a) if !a.is_valid() => return Err(ConfigError::Adaptive(a)),
            Some(a) => Some(adaptive::AdaptiveLimit::new(a, self.clock.now())),
            None => None,
        };
        let permits = match (self.config.max_concurrency, &adaptive) {
            (_, Some(_)) | (0, None) => None,
            (n, None) => Some(Semaphore::new(n.min(Semaphore::MAX_PERMITS))),
        };
        Ok(Scheduler {
            inner: Arc::new(Inner {
                clock: self.clock,
                permits,
                adaptive,
                limiter,
                named,
                retry: self.config.retry,
                rng: Mutex::new(self.rng),
                events: self.observer.as_ref().is_some_and(|o| o.wants_events()),
                balances: self.observer.as_ref().is_some_and(|o| o.wants_balances()),
                observer: self.observer,
                next_id: AtomicU64::new(0),
            }),
        })
    }
}

/// A scheduler's default limiter and its named ones.
type Limiters<C> = (
    Option<Arc<RateLimiter<C>>>,
    Vec<(String, Arc<RateLimiter<C>>)>,
);

impl<C: Clock> Builder<C> {
    /// The limiters of the configuration, buckets full now.
    fn own_limiters(&self) -> Result<Limiters<C>, ConfigError> {
        let limiter = match &self.config.limits {
            Some(l) => Some(Arc::new(RateLimiter::with_clock(l, self.clock.clone())?)),
            None => None,
        };
        let mut named: Vec<(String, Arc<RateLimiter<C>>)> = Vec::new();
        for (name, config) in &self.config.named_limits {
            if name.is_empty() || named.iter().any(|(n, _)| n == name) {
                return Err(ConfigError::LimitName(name.clone()));
            }
            let limiter = RateLimiter::with_clock(config, self.clock.clone()).map_err(|e| {
                ConfigError::NamedLimit {
                    name: name.clone(),
                    error: Box::new(e),
                }
            })?;
            named.push((name.clone(), Arc::new(limiter)));
        }
        Ok((limiter, named))
    }
}

impl Scheduler {
    /// Starts building a scheduler for `config`, on tokio's clock.
    pub fn builder(config: SchedulerConfig) -> Builder {
        Scheduler::builder_on(config, TokioClock)
    }
}

impl<C: Clock> Scheduler<C> {
    /// Starts building a scheduler for `config` on `clock`, whose instants may be other than
    /// tokio's (a virtual clock's [`crate::Nanos`]): its scopes, events and observer are then
    /// on those.
    pub fn builder_on(config: SchedulerConfig, clock: C) -> Builder<C> {
        Builder {
            clock,
            config,
            rng: Box::new(Xoshiro256PlusPlus::seed_from_u64(0)),
            observer: None,
            shared: None,
            given: None,
            adaptive: None,
        }
    }
}

//! Anthropic-style split token limits: input tokens per minute (`itpm`, the prompt, charged at
//! admission) and output tokens per minute (`otpm`, charged as the request's `max_tokens` at
//! admission and settled to the tokens generated when the answer completes, as that API counts
//! them). Clockless, like the window it keeps one of per limit; a settlement waits in a queue
//! until the model's time reaches the answer's last token.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::window::{Limit, Ticket, Usage, Window, WindowKind};

/// What a request costs each split limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    /// Its prompt.
    pub input: u64,
    /// Its `max_tokens` (0 if it set none).
    pub output: u64,
}

/// A charge to correct at `at`: from `charged` output tokens to `actual`.
#[derive(Debug, Clone, Copy)]
struct Pending {
    ticket: Ticket,
    charged: u64,
    actual: u64,
}

/// The input and output token limits of one provider.
#[derive(Debug, Clone)]
pub struct SplitLimits {
    input: Window,
    output: Window,
    /// Settlements due, by (instant, order of arrival).
    pending: BTreeMap<(Duration, u64), Pending>,
    arrivals: u64,
}

impl SplitLimits {
    /// Limits of `itpm` and `otpm` (`None`: unlimited), counted as `kind` says.
    pub fn new(kind: WindowKind, itpm: Option<f64>, otpm: Option<f64>) -> Self {
        SplitLimits {
            input: Window::new(kind, None, itpm),
            output: Window::new(kind, None, otpm),
            pending: BTreeMap::new(),
            arrivals: 0,
        }
    }

    /// Puts other limits in force from `now` on (see [`Window::set_limits`]).
    pub fn set_limits(&mut self, now: Duration, itpm: Option<f64>, otpm: Option<f64>) {
        self.input.set_limits(now, None, itpm);
        self.output.set_limits(now, None, otpm);
    }

    /// Whether neither limit is set (nothing to count or settle).
    #[inline]
    pub fn is_unlimited(&self) -> bool {
        self.input.is_unlimited() && self.output.is_unlimited()
    }

    /// Applies every settlement due by `now`, in the order they fall due.
    pub fn settle_until(&mut self, now: Duration) {
        while let Some(entry) = self.pending.first_entry() {
            let at = entry.key().0;
            if at > now {
                break;
            }
            let p = entry.remove();
            self.output.settle(at, p.ticket, p.charged, p.actual);
        }
    }

    /// Whether a request costing `cost` can ever fit: `Err` names the limit it never fits.
    pub fn admits(&self, cost: Split) -> Result<(), Limit> {
        self.input
            .admits(cost.input)
            .map_err(|_| Limit::InputTokens)?;
        self.output
            .admits(cost.output)
            .map_err(|_| Limit::OutputTokens)
    }

    /// Whether a request costing `cost` fits now, charging nothing: `Err` holds the limit that
    /// refuses it longest and how long until it fits (`None`: never).
    pub fn fit(&mut self, now: Duration, cost: Split) -> Result<(), (Limit, Option<Duration>)> {
        let input = self.input.fit(now, cost.input);
        let output = self.output.fit(now, cost.output);
        match (input, output) {
            (Ok(()), Ok(())) => Ok(()),
            (Err(None), _) => Err((Limit::InputTokens, None)),
            (_, Err(None)) => Err((Limit::OutputTokens, None)),
            (Err(Some(i)), Err(Some(o))) if o > i => Err((Limit::OutputTokens, Some(o))),
            (Err(Some(i)), _) => Err((Limit::InputTokens, Some(i))),
            (_, Err(Some(o))) => Err((Limit::OutputTokens, Some(o))),
        }
    }

    /// Charges a request costing `cost` at `now` (after [`SplitLimits::fit`] said it fits);
    /// the ticket settles its output tokens.
    pub fn commit(&mut self, now: Duration, cost: Split) -> Ticket {
        self.input.commit(now, cost.input);
        self.output.commit(now, cost.output)
    }

    /// Settles the output tokens of the charge `ticket` names, `charged` at admission, to
    /// `actual` at `at` (the answer's last token).
    pub fn settle_at(&mut self, at: Duration, ticket: Ticket, charged: u64, actual: u64) {
        if charged == actual {
            return;
        }
        self.arrivals += 1;
        let p = Pending {
            ticket,
            charged,
            actual,
        };
        self.pending.insert((at, self.arrivals), p);
    }

    /// Input and output token usage at `now`, for headers.
    pub fn usage(&mut self, now: Duration) -> (Option<Usage>, Option<Usage>) {
        (self.input.usage(now).1, self.output.usage(now).1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::duration_from_secs as s;

    #[test]
    fn output_tokens_are_charged_as_max_tokens_and_settled_at_the_last_token() {
        let mut l = SplitLimits::new(WindowKind::Sliding, Some(10_000.0), Some(1_000.0));
        let cost = Split {
            input: 2_000,
            output: 800,
        };
        assert_eq!(l.fit(s(0.0), cost), Ok(()));
        let ticket = l.commit(s(0.0), cost);
        // Generated 100 tokens, the last at 5 s: until then the 800 stand.
        l.settle_at(s(5.0), ticket, 800, 100);
        let second = Split {
            input: 0,
            output: 800,
        };
        l.settle_until(s(4.0));
        assert_eq!(
            l.fit(s(4.0), second),
            Err((Limit::OutputTokens, Some(s(56.0))))
        );
        l.settle_until(s(5.0));
        assert_eq!(l.fit(s(5.0), second), Ok(()));
        let (input, output) = l.usage(s(5.0));
        assert_eq!(input.map(|u| u.remaining), Some(8_000.0));
        assert_eq!(output.map(|u| u.remaining), Some(900.0));
    }

    #[test]
    fn the_limit_that_refuses_longest_is_named() {
        let mut l = SplitLimits::new(WindowKind::Fixed, Some(1_000.0), Some(1_000.0));
        let cost = Split {
            input: 600,
            output: 600,
        };
        l.commit(s(0.0), cost);
        // Both are over at 10 s, and both back at 60 s: input is named first.
        assert_eq!(
            l.fit(s(10.0), cost),
            Err((Limit::InputTokens, Some(s(50.0))))
        );
        let output_only = Split {
            input: 0,
            output: 600,
        };
        assert_eq!(
            l.fit(s(10.0), output_only),
            Err((Limit::OutputTokens, Some(s(50.0))))
        );
        assert_eq!(
            l.admits(Split {
                input: 0,
                output: 1_001
            }),
            Err(Limit::OutputTokens)
        );
        assert_eq!(
            l.admits(Split {
                input: 1_001,
                output: 0
            }),
            Err(Limit::InputTokens)
        );
    }
}

//! What a provider bills: its prices per million tokens of each kind (`price = {
//! input_per_mtok, output_per_mtok, cached_input_per_mtok, cached_input_share, bill_errors }`),
//! and which answers are billed.
//!
//! An answered request is billed: served, even to a client that had stopped waiting for it
//! (the provider did the work), and with `bill_errors` a 5xx the model failed an accepted
//! request with. A refusal (429, a request too large, an outage's or a full provider's 503) is
//! not, nor a request never answered. A request's prompt is its tokens less its `max_tokens`;
//! its output is what it generated (a generating provider), else its `max_tokens`. Of the
//! prompt, `cached_input_share` is billed at the cached rate (rounded to whole tokens).
//!
//! Money is counted in whole picodollars (10⁻¹² $): a price per million tokens of up to six
//! decimals is a whole number of picodollars per token, so a bill is exact and the same
//! whatever order its requests are added in. Bills and their token counts are `u128`: one
//! answer at the bounds (10¹² tokens at $10⁶ a million) is 10²⁴ picodollars, and a total holds
//! 3.4 × 10¹⁴ of those ($3.4 × 10²⁶) before it would saturate, more answers than a run can
//! simulate or a mock serve (a million a second for ten years).

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;

/// Picodollars per dollar.
pub const PICODOLLARS: f64 = 1e12;
/// The highest price accepted, in dollars per million tokens.
pub const MAX_PER_MTOK: f64 = 1e6;

/// The `price` table as written: dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPrice {
    /// A prompt's tokens.
    pub input_per_mtok: f64,
    /// An answer's tokens.
    pub output_per_mtok: f64,
    /// A prompt's tokens read from the provider's cache (absent: the input price).
    pub cached_input_per_mtok: Option<f64>,
    /// The share of each prompt read from the cache, in [0, 1].
    #[serde(default)]
    pub cached_input_share: f64,
    /// Whether a 5xx answer to an accepted request is billed.
    #[serde(default)]
    pub bill_errors: bool,
}

/// A validated price: picodollars per token of each kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// A prompt's token.
    pub input: u64,
    /// A cached prompt token.
    pub cached_input: u64,
    /// An answer's token.
    pub output: u64,
    /// The share of a prompt read from the cache.
    pub cached_input_share: f64,
    /// Whether a 5xx answer to an accepted request is billed.
    pub bill_errors: bool,
}

/// What was billed: requests, tokens of each kind, and their price (see the module's doc for
/// why the sums are `u128`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bill {
    /// Requests billed.
    pub requests: u64,
    /// Prompt tokens billed at the input rate.
    pub input_tokens: u128,
    /// Prompt tokens billed at the cached rate.
    pub cached_input_tokens: u128,
    /// Answer tokens billed.
    pub output_tokens: u128,
    /// The prompt tokens' price at the input rate, in picodollars.
    pub input_picodollars: u128,
    /// The cached prompt tokens' price, in picodollars.
    pub cached_input_picodollars: u128,
    /// The answer tokens' price, in picodollars.
    pub output_picodollars: u128,
}

impl Bill {
    /// Whether nothing was billed.
    pub fn is_empty(&self) -> bool {
        *self == Bill::default()
    }

    /// Both bills added.
    pub fn plus(self, o: Bill) -> Bill {
        Bill {
            requests: self.requests.saturating_add(o.requests),
            input_tokens: self.input_tokens.saturating_add(o.input_tokens),
            cached_input_tokens: self
                .cached_input_tokens
                .saturating_add(o.cached_input_tokens),
            output_tokens: self.output_tokens.saturating_add(o.output_tokens),
            input_picodollars: self.input_picodollars.saturating_add(o.input_picodollars),
            cached_input_picodollars: self
                .cached_input_picodollars
                .saturating_add(o.cached_input_picodollars),
            output_picodollars: self.output_picodollars.saturating_add(o.output_picodollars),
        }
    }

    /// What was billed since `before`, an earlier reading (or a part) of this bill.
    pub fn since(self, before: Bill) -> Bill {
        Bill {
            requests: self.requests.saturating_sub(before.requests),
            input_tokens: self.input_tokens.saturating_sub(before.input_tokens),
            cached_input_tokens: self
                .cached_input_tokens
                .saturating_sub(before.cached_input_tokens),
            output_tokens: self.output_tokens.saturating_sub(before.output_tokens),
            input_picodollars: self
                .input_picodollars
                .saturating_sub(before.input_picodollars),
            cached_input_picodollars: self
                .cached_input_picodollars
                .saturating_sub(before.cached_input_picodollars),
            output_picodollars: self
                .output_picodollars
                .saturating_sub(before.output_picodollars),
        }
    }

    /// Every token billed.
    pub fn tokens(&self) -> u128 {
        self.input_tokens
            .saturating_add(self.cached_input_tokens)
            .saturating_add(self.output_tokens)
    }

    /// The whole price, in picodollars.
    pub fn picodollars(&self) -> u128 {
        self.input_picodollars
            .saturating_add(self.cached_input_picodollars)
            .saturating_add(self.output_picodollars)
    }

    /// The price in dollars.
    pub fn usd(&self) -> f64 {
        usd(self.picodollars())
    }

    /// The header a billed answer carries: `requests input cached output` (tokens), then the
    /// three prices in picodollars, in that order.
    pub fn header(&self) -> String {
        format!(
            "{} {} {} {} {} {} {}",
            self.requests,
            self.input_tokens,
            self.cached_input_tokens,
            self.output_tokens,
            self.input_picodollars,
            self.cached_input_picodollars,
            self.output_picodollars
        )
    }

    /// Reads [`Bill::header`]'s value; `Err` says what is wrong with it.
    pub fn parse_header(value: &str) -> Result<Bill, String> {
        let bad = || format!("{value:?} is not seven whole numbers");
        let n: Vec<u128> = value
            .split_ascii_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map_err(|_| bad())?;
        let [requests, input_tokens, cached_input_tokens, output_tokens, input_picodollars, cached_input_picodollars, output_picodollars] =
            n[..]
        else {
            return Err(bad());
        };
        Ok(Bill {
            requests: u64::try_from(requests).map_err(|_| bad())?,
            input_tokens,
            cached_input_tokens,
            output_tokens,
            input_picodollars,
            cached_input_picodollars,
            output_picodollars,
        })
    }
}

/// The header a billed answer carries its bill in ([`Bill::header`]).
pub const BILL_HEADER: &str = "x-capsize-bill";

impl Price {
    /// The bill of one request of `input` prompt tokens and `output` answer tokens: exact for
    /// any counts (a `u64` of tokens times a `u64` price per token always fits a `u128`).
    pub fn bill(&self, input: u64, output: u64) -> Bill {
        // The cached share, rounded to whole tokens (exact below 2⁵³ tokens, and never more
        // than the prompt).
        let cached = ((input as f64) * self.cached_input_share).round() as u64;
        let cached = u128::from(cached.min(input));
        let fresh = u128::from(input) - cached;
        let output = u128::from(output);
        Bill {
            requests: 1,
            input_tokens: fresh,
            cached_input_tokens: cached,
            output_tokens: output,
            input_picodollars: fresh * u128::from(self.input),
            cached_input_picodollars: cached * u128::from(self.cached_input),
            output_picodollars: output * u128::from(self.output),
        }
    }
}

/// Picodollars as dollars (the nearest `f64`).
pub fn usd(picodollars: u128) -> f64 {
    picodollars as f64 / PICODOLLARS
}

/// Dollars per million tokens as picodollars per token: a number in [0, [`MAX_PER_MTOK`]]
/// with at most six decimals.
fn per_token(key: &str, per_mtok: f64) -> Result<u64, ConfigError> {
    let pico = per_mtok * 1e6;
    if !(per_mtok.is_finite() && (0.0..=MAX_PER_MTOK).contains(&per_mtok))
        || (pico - pico.round()).abs() > 1e-6 * pico.max(1.0)
    {
        return Err(ConfigError::new(
            key,
            format!(
                "must be dollars per million tokens in [0, {MAX_PER_MTOK}] with at most six decimals, got {per_mtok}"
            ),
        ));
    }
    Ok(pico.round() as u64)
}

impl RawPrice {
    /// Validates the table; `key` names it in an error (`provider.price`).
    pub fn build(&self, key: &str) -> Result<Price, ConfigError> {
        let input = per_token(&format!("{key}.input_per_mtok"), self.input_per_mtok)?;
        let share = self.cached_input_share;
        if !(0.0..=1.0).contains(&share) {
            return Err(ConfigError::new(
                format!("{key}.cached_input_share"),
                format!("must be a share in [0, 1], got {share}"),
            ));
        }
        Ok(Price {
            input,
            cached_input: match self.cached_input_per_mtok {
                Some(p) => per_token(&format!("{key}.cached_input_per_mtok"), p)?,
                None => input,
            },
            output: per_token(&format!("{key}.output_per_mtok"), self.output_per_mtok)?,
            cached_input_share: share,
            bill_errors: self.bill_errors,
        })
    }
}

/// Reads a `u128` count as JSON holds it: an integer up to `u64::MAX`, past it the nearest
/// `f64` (how any JSON reader, and a summary as a JSON value, sees a wider `u128`); also
/// through `#[serde(flatten)]`, which cannot carry a `u128`.
pub fn wide_count<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u128, D::Error> {
    wide::count(d)
}

/// Reads a [`Bill`] as a summary holds it (each count by [`wide_count`]), inside a
/// `#[serde(flatten)]` too. A bill's own `Deserialize` is exact past `u64::MAX`, but only from
/// JSON text read straight into it (the mock's `/stats`).
pub fn lenient_bill<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Bill, D::Error> {
    /// [`Bill`], each count read by [`wide_count`].
    #[derive(Deserialize)]
    struct Lenient {
        requests: u64,
        #[serde(deserialize_with = "wide_count")]
        input_tokens: u128,
        #[serde(deserialize_with = "wide_count")]
        cached_input_tokens: u128,
        #[serde(deserialize_with = "wide_count")]
        output_tokens: u128,
        #[serde(deserialize_with = "wide_count")]
        input_picodollars: u128,
        #[serde(deserialize_with = "wide_count")]
        cached_input_picodollars: u128,
        #[serde(deserialize_with = "wide_count")]
        output_picodollars: u128,
    }
    let b = Lenient::deserialize(d)?;
    Ok(Bill {
        requests: b.requests,
        input_tokens: b.input_tokens,
        cached_input_tokens: b.cached_input_tokens,
        output_tokens: b.output_tokens,
        input_picodollars: b.input_picodollars,
        cached_input_picodollars: b.cached_input_picodollars,
        output_picodollars: b.output_picodollars,
    })
}

mod wide {
    use serde::de::{Deserializer, Error, Visitor};
    use std::fmt;

    /// Reads a count of 0 or more: an integer, or a whole non-negative number written wider.
    pub(super) fn count<'de, D: Deserializer<'de>>(d: D) -> Result<u128, D::Error> {
        d.deserialize_any(Count)
    }

    struct Count;

    impl Visitor<'_> for Count {
        type Value = u128;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a count of 0 or more")
        }

        fn visit_u64<E: Error>(self, v: u64) -> Result<u128, E> {
            Ok(u128::from(v))
        }

        fn visit_u128<E: Error>(self, v: u128) -> Result<u128, E> {
            Ok(v)
        }

        fn visit_i64<E: Error>(self, v: i64) -> Result<u128, E> {
            u128::try_from(v).map_err(|_| E::custom(format!("a count of 0 or more, got {v}")))
        }

        fn visit_f64<E: Error>(self, v: f64) -> Result<u128, E> {
            // 2^128 as an f64: every whole value below it converts exactly.
            if v >= 0.0
                && v.fract() == 0.0
                && v < 340_282_366_920_938_463_463_374_607_431_768_211_456.0
            {
                Ok(v as u128)
            } else {
                Err(E::custom(format!("a count of 0 or more, got {v}")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn price(input: f64, output: f64, cached: Option<f64>, share: f64) -> Price {
        RawPrice {
            input_per_mtok: input,
            output_per_mtok: output,
            cached_input_per_mtok: cached,
            cached_input_share: share,
            bill_errors: false,
        }
        .build("provider.price")
        .expect("valid")
    }

    #[test]
    fn a_bill_is_whole_picodollars_worked_by_hand() {
        // $3 / $15 / $0.30 per million: 3,000,000 / 15,000,000 / 300,000 p$ a token.
        let p = price(3.0, 15.0, Some(0.3), 0.25);
        assert_eq!(
            (p.input, p.output, p.cached_input),
            (3_000_000, 15_000_000, 300_000)
        );
        // 1,000 prompt tokens, 250 of them cached; 200 answer tokens.
        let b = p.bill(1_000, 200);
        assert_eq!(
            (b.input_tokens, b.cached_input_tokens, b.output_tokens),
            (750, 250, 200)
        );
        // 750 x 3e6 + 250 x 3e5 + 200 x 15e6 = 2.25e9 + 7.5e7 + 3e9 = 5.325e9 p$.
        assert_eq!(
            (
                b.input_picodollars,
                b.cached_input_picodollars,
                b.output_picodollars
            ),
            (2_250_000_000, 75_000_000, 3_000_000_000)
        );
        assert_eq!(b.picodollars(), 5_325_000_000);
        assert!((b.usd() - 0.005325).abs() < 1e-15);
        // A sixth decimal is a whole picodollar; a seventh is refused.
        assert_eq!(price(0.000001, 0.0, None, 0.0).input, 1);
        let err = RawPrice {
            input_per_mtok: 0.0000001,
            output_per_mtok: 1.0,
            cached_input_per_mtok: None,
            cached_input_share: 0.0,
            bill_errors: false,
        }
        .build("provider.price")
        .unwrap_err();
        assert_eq!(err.key, "provider.price.input_per_mtok");
        // No cached price: the cached share is billed at the input rate.
        assert_eq!(
            price(2.0, 8.0, None, 0.5).bill(10, 0).picodollars(),
            20_000_000
        );
    }

    #[test]
    fn the_header_reads_back_and_bad_ones_are_named() {
        let b = price(3.0, 15.0, None, 0.0).bill(40, 2);
        assert_eq!(Bill::parse_header(&b.header()), Ok(b));
        for bad in [
            "",
            "1 2 3 4 5 6",
            "1 2 3 4 5 6 7 8",
            "1 2 x 4 5 6 7",
            "-1 2 3 4 5 6 7",
        ] {
            assert!(Bill::parse_header(bad).is_err(), "{bad:?}");
        }
        assert_eq!(b.plus(b).since(b), b);
    }

    #[test]
    fn a_bill_at_the_bounds_is_exact_past_a_u64() {
        // 10¹² prompt and 10¹² answer tokens at $10⁶ a million (10¹² p$ a token), a quarter
        // of the prompt cached at $1: 10²⁴ p$ of answer alone, past a u64 (1.8e19).
        let p = price(MAX_PER_MTOK, MAX_PER_MTOK, Some(1.0), 0.25);
        let b = p.bill(1_000_000_000_000, 1_000_000_000_000);
        assert_eq!(
            (b.input_tokens, b.cached_input_tokens, b.output_tokens),
            (750_000_000_000, 250_000_000_000, 1_000_000_000_000)
        );
        assert_eq!(b.input_picodollars, 750_000_000_000_000_000_000_000);
        assert_eq!(b.cached_input_picodollars, 250_000_000_000_000_000);
        assert_eq!(b.output_picodollars, 1_000_000_000_000_000_000_000_000);
        assert_eq!(b.picodollars(), 1_750_000_250_000_000_000_000_000);
        assert_eq!(b.usd(), 1_750_000_250_000.0);
        // Summed and sent over the header, to the picodollar.
        let two = b.plus(b);
        assert_eq!(two.picodollars(), 3_500_000_500_000_000_000_000_000);
        assert_eq!(Bill::parse_header(&two.header()), Ok(two));
        assert_eq!(
            two.header(),
            "2 1500000000000 500000000000 2000000000000 1500000000000000000000000 500000000000000000 2000000000000000000000000"
        );
        // A request count past a u64 is not a bill.
        assert!(Bill::parse_header("18446744073709551616 0 0 0 0 0 0").is_err());
    }
}

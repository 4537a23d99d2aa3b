//! Reading Retry-After from a provider's response headers.
//!
//! `retry-after-ms` (milliseconds, OpenAI) wins over `retry-after`, which is either
//! delta-seconds or an HTTP-date. A date is measured against the response's own `Date` header
//! when it has one (no clock skew), else against the wall-clock time the caller passes in: the
//! scheduler reads no wall clock itself.

use std::time::Duration;

use thiserror::Error;

/// A rate-limit header that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// The value is not a number of seconds, milliseconds, or an HTTP-date.
    #[error("header {header}: cannot read {value:?} as {expected}")]
    Invalid {
        /// The header's name.
        header: &'static str,
        /// The value received.
        value: String,
        /// What it should have been.
        expected: &'static str,
    },
    /// An HTTP-date with neither a `Date` header nor a wall-clock time to measure it against.
    #[error("header retry-after: {value:?} is a date, but the response has no Date header to measure it against")]
    NoReference {
        /// The value received.
        value: String,
    },
}

fn non_negative(value: &str) -> Option<f64> {
    let v: f64 = value.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0).then_some(v)
}

/// The wait a response asks for, if any. `now_unix` is the wall-clock time in Unix seconds,
/// used only for an HTTP-date when the response has no `Date` header.
pub fn retry_after_from_headers<'a>(
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
    now_unix: Option<i64>,
) -> Result<Option<Duration>, HeaderError> {
    let (mut ms, mut after, mut date) = (None, None, None);
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("retry-after-ms") {
            ms = Some(value);
        } else if name.eq_ignore_ascii_case("retry-after") {
            after = Some(value);
        } else if name.eq_ignore_ascii_case("date") {
            date = Some(value);
        }
    }
    if let Some(v) = ms {
        let ms = non_negative(v).ok_or_else(|| HeaderError::Invalid {
            header: "retry-after-ms",
            value: v.to_string(),
            expected: "a non-negative number of milliseconds",
        })?;
        return Ok(Some(Duration::from_secs_f64(ms / 1000.0)));
    }
    let Some(v) = after else { return Ok(None) };
    if let Some(secs) = non_negative(v) {
        return Ok(Some(Duration::from_secs_f64(secs)));
    }
    let at = parse_http_date(v).ok_or_else(|| HeaderError::Invalid {
        header: "retry-after",
        value: v.to_string(),
        expected: "delta-seconds or an HTTP-date",
    })?;
    let reference = match date {
        Some(d) => parse_http_date(d).ok_or_else(|| HeaderError::Invalid {
            header: "date",
            value: d.to_string(),
            expected: "an HTTP-date",
        })?,
        None => now_unix.ok_or_else(|| HeaderError::NoReference {
            value: v.to_string(),
        })?,
    };
    Ok(Some(Duration::from_secs(
        at.saturating_sub(reference).max(0) as u64,
    )))
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Parses an HTTP-date (IMF-fixdate, RFC 850 or asctime) into Unix seconds.
pub fn parse_http_date(s: &str) -> Option<i64> {
    let parts: Vec<&str> = s.split_whitespace().collect();
    let (day, month, year, time) = match parts.as_slice() {
        // Sun, 06 Nov 1994 08:49:37 GMT
        [_, d, m, y, t, "GMT"] => (d.parse().ok()?, *m, y.parse().ok()?, *t),
        // Sunday, 06-Nov-94 08:49:37 GMT
        [_, dmy, t, "GMT"] => {
            let mut it = dmy.split('-');
            let d = it.next()?.parse().ok()?;
            let m = it.next()?;
            let y: i64 = it.next()?.parse().ok()?;
            let y = if y < 70 {
                2000 + y
            } else if y < 100 {
                1900 + y
            } else {
                y
            };
            (d, m, y, *t)
        }
        // Sun Nov  6 08:49:37 1994
        [_, m, d, t, y] => (d.parse().ok()?, *m, y.parse().ok()?, *t),
        _ => return None,
    };
    let month = MONTHS.iter().position(|&n| n == month)? as i64 + 1;
    let hms: Vec<i64> = time
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [h, mi, se] = hms.as_slice() else {
        return None;
    };
    let valid = (1..=31).contains(&day)
        && (0..24).contains(h)
        && (0..60).contains(mi)
        && (0..=60).contains(se);
    valid.then(|| days_from_civil(year, month, day) * 86_400 + h * 3600 + mi * 60 + se)
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_date_formats_agree() {
        let want = Some(784_111_777);
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), want);
        assert_eq!(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), want);
        assert_eq!(parse_http_date("Sun Nov  6 08:49:37 1994"), want);
        assert_eq!(parse_http_date("Sun, 06 Foo 1994 08:49:37 GMT"), None);
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 25:49:37 GMT"), None);
    }

    #[test]
    fn ms_wins_then_seconds_then_date_against_the_date_header() {
        let h = [("Retry-After", "7"), ("retry-after-ms", "1500")];
        assert_eq!(
            retry_after_from_headers(h, None),
            Ok(Some(Duration::from_millis(1500)))
        );
        let h = [("retry-after", "7")];
        assert_eq!(
            retry_after_from_headers(h, None),
            Ok(Some(Duration::from_secs(7)))
        );
        let h = [
            ("date", "Sun, 06 Nov 1994 08:49:37 GMT"),
            ("retry-after", "Sun, 06 Nov 1994 08:49:49 GMT"),
        ];
        assert_eq!(
            retry_after_from_headers(h, None),
            Ok(Some(Duration::from_secs(12)))
        );
        let h = [("retry-after", "Sun, 06 Nov 1994 08:49:49 GMT")];
        assert_eq!(
            retry_after_from_headers(h, Some(784_111_777 + 2)),
            Ok(Some(Duration::from_secs(10)))
        );
        assert!(matches!(
            retry_after_from_headers(h, None),
            Err(HeaderError::NoReference { .. })
        ));
        // A date in the past asks for no wait.
        assert_eq!(
            retry_after_from_headers(h, Some(784_111_777 + 60)),
            Ok(Some(Duration::ZERO))
        );
        assert_eq!(retry_after_from_headers([("x", "y")], None), Ok(None));
    }

    #[test]
    fn bad_values_name_the_header() {
        let e = retry_after_from_headers([("retry-after", "soon")], None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "header retry-after: cannot read \"soon\" as delta-seconds or an HTTP-date"
        );
        let e = retry_after_from_headers([("retry-after-ms", "-5")], None).unwrap_err();
        assert!(e.to_string().starts_with("header retry-after-ms:"));
    }
}

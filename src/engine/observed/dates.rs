//! Dates as request logs write them (`2023-11-16 18:15:46.6805900`, ISO 8601), read without
//! a panic whatever the text: every part is taken with `get` and checked to be ASCII digits.

/// `YYYY-MM-DD[ T]HH:MM:SS[.fraction][Z|±HH:MM]` as nanoseconds since the epoch (UTC); `None`
/// for anything else, a day the month does not have (30 February) among them. Every part is
/// taken with `get`, so text that is not ASCII where digits belong is `None`, never a panic.
pub fn date_time(s: &str) -> Option<i64> {
    let s = s.trim();
    let sep = |i: usize, ok: &[u8]| s.as_bytes().get(i).is_some_and(|b| ok.contains(b));
    if !sep(4, b"-") || !sep(7, b"-") || !sep(10, b" T") || !sep(13, b":") || !sep(16, b":") {
        return None;
    }
    let num = |r: std::ops::Range<usize>| num_in(s, r);
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || sec > 60
    {
        return None;
    }
    let mut rest = s.get(19..)?;
    let mut frac_ns = 0i64;
    if let Some(f) = rest.strip_prefix('.') {
        let digits = f.bytes().take_while(u8::is_ascii_digit).count();
        rest = f.get(digits..)?;
        let padded: String = f
            .get(..digits.min(9))?
            .chars()
            .chain("000000000".chars())
            .take(9)
            .collect();
        frac_ns = padded.parse().ok()?;
    }
    let offset_s = match rest.as_bytes() {
        [] | [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), ..] if rest.len() == 6 && rest.as_bytes()[3] == b':' => {
            let (oh, om) = (num_in(rest, 1..3)?, num_in(rest, 4..6)?);
            if oh > 23 || om > 59 {
                return None;
            }
            let sign = if *sign == b'-' { -1 } else { 1 };
            sign * (oh * 3600 + om * 60)
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo, d);
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_s;
    secs.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// The digits of `s` at `r` as a number (`None` if they are not all ASCII digits).
fn num_in(s: &str, r: std::ops::Range<usize>) -> Option<i64> {
    let part = s.get(r)?;
    part.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| part.parse().ok())
        .flatten()
}

/// The days of month `m` of year `y` (proleptic Gregorian).
fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
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
    fn dates_read_as_the_azure_trace_and_iso_write_them() {
        assert_eq!(date_time("1970-01-01 00:00:00"), Some(0));
        assert_eq!(
            date_time("2023-11-16 18:15:46.6805900"),
            Some(1_700_158_546_680_590_000)
        );
        assert_eq!(
            date_time("2023-11-16T19:15:46+01:00"),
            Some(1_700_158_546_000_000_000)
        );
        assert_eq!(date_time("2023-13-01 00:00:00"), None);
        assert_eq!(date_time("yesterday"), None);
    }

    #[test]
    fn a_day_the_month_does_not_have_is_no_date() {
        assert_eq!(date_time("2023-02-30 00:00:00"), None);
        assert_eq!(date_time("2023-04-31 00:00:00"), None);
        assert_eq!(date_time("2023-02-29 00:00:00"), None);
        assert_eq!(
            date_time("2024-02-29 00:00:00"),
            Some(1_709_164_800_000_000_000)
        );
        assert_eq!(date_time("1900-02-29 00:00:00"), None);
        assert_eq!(
            date_time("2000-02-29 00:00:00"),
            Some(951_782_400_000_000_000)
        );
        assert_eq!(date_time("2023-11-16 18:15:46+24:00"), None);
        assert_eq!(date_time("2023-11-16 18:15:46+01-00"), None);
    }

    #[test]
    fn text_that_is_not_ascii_anywhere_in_a_date_is_no_date_and_no_panic() {
        // X1: `+aé00` once panicked slicing bytes inside 'é'.
        assert_eq!(date_time("2023-11-16 18:15:46+a\u{e9}00"), None);
        let date = "2023-11-16T18:15:46.123+01:00";
        for (i, _) in date.char_indices().chain([(date.len(), ' ')]) {
            for c in ['\u{e9}', '\u{1f600}', '\u{202e}', '\u{0}'] {
                let mut put = date.to_string();
                put.insert(i, c);
                assert_eq!(date_time(&put), None, "{put:?}");
                let mut swapped: Vec<char> = date.chars().collect();
                if i < swapped.len() {
                    swapped[i] = c;
                    let swapped: String = swapped.into_iter().collect();
                    assert_eq!(date_time(&swapped), None, "{swapped:?}");
                }
            }
        }
    }
}

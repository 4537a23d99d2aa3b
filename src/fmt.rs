//! Numbers for people, as every table, report and message capsize writes prints them. The
//! bottom of `src/`: every layer reads it, it reads nothing of capsize.

/// `v` to six significant digits, without separators, for a table read by programs (dollars:
/// a query may cost a fraction of a cent).
pub fn six_figures(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    if !v.is_finite() {
        return v.to_string();
    }
    let digits = 5 - v.abs().log10().floor() as i32;
    let scale = 10f64.powi(digits);
    format!("{}", (v * scale).round() / scale)
}

/// A number for people: integers whole, others to about four significant figures, with
/// thousands separated by commas (`10,000`, `166.7`, `1.25`, `0.0125`); from 10^15 up, four
/// significant figures and a power of ten (`1e308`, `2.5e16`), not hundreds of digits.
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let a = v.abs();
    if a >= 1e15 {
        let text = format!("{v:.3e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
        return format!("{mantissa}e{exponent}");
    }
    let decimals = if (v - v.round()).abs() <= 1e-9 * a {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        (2 - a.log10().floor() as i32).clamp(0, 12) as usize
    };
    let text = format!("{v:.decimals$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    let (sign, digits) = text.strip_prefix('-').map_or(("", text), |d| ("-", d));
    let (int, frac) = digits
        .split_once('.')
        .map_or((digits, None), |(i, f)| (i, Some(f)));
    let mut grouped = String::new();
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    let sign = if grouped == "0" && frac.is_none() {
        ""
    } else {
        sign
    };
    match frac {
        Some(frac) => format!("{sign}{grouped}.{frac}"),
        None => format!("{sign}{grouped}"),
    }
}

/// `3.2×`: a factor for a sentence, one decimal under 10, whole (rounded up) above.
pub fn times(factor: f64) -> String {
    if factor < 10.0 {
        format!("{:.1}×", (factor * 10.0).ceil() / 10.0)
    } else {
        format!("{:.0}×", factor.ceil())
    }
}

#[cfg(test)]
mod tests {
    use super::fmt_num;

    #[test]
    fn numbers_for_people_and_huge_ones_as_powers_of_ten() {
        assert_eq!(fmt_num(10_000.0), "10,000");
        assert_eq!(fmt_num(166.666_666), "166.7");
        assert_eq!(fmt_num(0.0125), "0.0125");
        assert_eq!(fmt_num(999_999_999_999_999.0), "999,999,999,999,999");
        assert_eq!(fmt_num(1e15), "1e15");
        assert_eq!(fmt_num(1e308), "1e308");
        assert_eq!(fmt_num(-2.5e16), "-2.5e16");
        assert_eq!(fmt_num(1.234_56e20), "1.235e20");
    }
}

//! Numbers as Spark writes them as text: doubles as Java prints them, decimals with
//! their scale. JSON and text casts both need them, so they sit below both.

use std::fmt::Write as _;

/// Writes a double as Java prints it (`1.0`, `1.0E10`, `NaN`, `Infinity`).
pub(crate) fn write_java_double(buf: &mut String, f: f64) {
    if f.is_nan() {
        buf.push_str("NaN");
    } else if f.is_infinite() {
        buf.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
    } else if f.fract() == 0.0 && f.abs() < 1e7 {
        let _ = write!(buf, "{f:.1}");
    } else if f.abs() >= 1e7 {
        let text = format!("{f:E}");
        let (mantissa, exponent) = text.split_once('E').unwrap_or((&text, "0"));
        let mantissa = if mantissa.contains('.') {
            mantissa.to_string()
        } else {
            format!("{mantissa}.0")
        };
        let _ = write!(buf, "{mantissa}E{exponent}");
    } else {
        let _ = write!(buf, "{f}");
    }
}

/// Renders an unscaled decimal with its scale, as `12.50`.
pub(crate) fn format_decimal(unscaled: i128, scale: i8) -> String {
    if scale <= 0 {
        let zeros = "0".repeat(usize::from(scale.unsigned_abs()));
        return format!("{unscaled}{zeros}");
    }
    let digits = unscaled.unsigned_abs().to_string();
    let scale = usize::from(scale.unsigned_abs());
    let digits = format!("{digits:0>width$}", width = scale + 1);
    let (whole, fraction) = digits.split_at(digits.len() - scale);
    let sign = if unscaled < 0 { "-" } else { "" };
    format!("{sign}{whole}.{fraction}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_keep_their_scale() {
        assert_eq!(format_decimal(1250, 2), "12.50");
        assert_eq!(format_decimal(-5, 3), "-0.005");
        assert_eq!(format_decimal(7, 0), "7");
        assert_eq!(format_decimal(7, -2), "700");
    }

    #[test]
    fn doubles_look_like_java_prints_them() {
        let render = |f| {
            let mut text = String::new();
            write_java_double(&mut text, f);
            text
        };
        assert_eq!(render(1.0), "1.0");
        assert_eq!(render(2.5), "2.5");
        assert_eq!(render(1e10), "1.0E10");
        assert_eq!(render(f64::NAN), "NaN");
        assert_eq!(render(f64::NEG_INFINITY), "-Infinity");
    }
}

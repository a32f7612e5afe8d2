//! Calendar formatting for dates and timestamps, without a time zone database.

/// Formats days since 1970-01-01 as `yyyy-MM-dd`.
pub fn format_date(days: i32) -> String {
    let (y, m, d) = civil_from_days(i64::from(days));
    format!("{y:04}-{m:02}-{d:02}")
}

/// Formats microseconds since the epoch as Spark's `to_json` does in UTC:
/// `yyyy-MM-ddTHH:mm:ss.SSSZ`.
pub fn format_timestamp_micros(micros: i64) -> String {
    format!("{}Z", format_timestamp_ntz_micros(micros))
}

/// Formats microseconds since 1970-01-01T00:00:00 (no time zone) as
/// `yyyy-MM-ddTHH:mm:ss.SSS`.
pub fn format_timestamp_ntz_micros(micros: i64) -> String {
    let millis = micros.div_euclid(1000);
    let (days, ms_of_day) = (millis.div_euclid(86_400_000), millis.rem_euclid(86_400_000));
    let (y, mo, d) = civil_from_days(days);
    let (h, mi, s, ms) = (
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1000 % 60,
        ms_of_day % 1000,
    );
    if !(0..=9999).contains(&y) {
        return format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}");
    }
    // Digit by digit, without the formatting machinery: guests format a timestamp per
    // row.
    let mut text = String::with_capacity(23);
    push_padded(&mut text, y as u32, 4);
    text.push('-');
    push_padded(&mut text, mo, 2);
    text.push('-');
    push_padded(&mut text, d, 2);
    text.push('T');
    push_padded(&mut text, h as u32, 2);
    text.push(':');
    push_padded(&mut text, mi as u32, 2);
    text.push(':');
    push_padded(&mut text, s as u32, 2);
    text.push('.');
    push_padded(&mut text, ms as u32, 3);
    text
}

/// Writes the last `width` decimal digits of `value`, zero-padded.
fn push_padded(text: &mut String, value: u32, width: u32) {
    for place in (0..width).rev() {
        text.push(char::from(b'0' + (value / 10u32.pow(place) % 10) as u8));
    }
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian calendar).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_and_leap_days() {
        assert_eq!(format_date(0), "1970-01-01");
        assert_eq!(format_date(19_782), "2024-02-29");
        assert_eq!(format_date(-1), "1969-12-31");
        assert_eq!(format_timestamp_micros(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn timestamps_beyond_four_digit_years_keep_the_general_format() {
        let days_to_year_10000 = 2_932_897_i64;
        let micros = days_to_year_10000 * 86_400_000_000;
        assert_eq!(
            format_timestamp_ntz_micros(micros),
            "10000-01-01T00:00:00.000"
        );
        assert_eq!(
            format_timestamp_ntz_micros(59_000),
            "1970-01-01T00:00:00.059"
        );
    }
}

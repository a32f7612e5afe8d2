//! Calendar formatting for dates and timestamps, without a time zone database.

/// Formats days since 1970-01-01 as `yyyy-MM-dd`.
pub fn format_date(days: i32) -> String {
    let mut text = String::with_capacity(10);
    push_date(&mut text, days);
    text
}

/// Formats microseconds since the epoch as Spark's `to_json` does in UTC:
/// `yyyy-MM-ddTHH:mm:ss.SSSZ`.
pub fn format_timestamp_micros(micros: i64) -> String {
    let mut text = String::with_capacity(24);
    push_timestamp_micros(&mut text, micros);
    text
}

/// Formats microseconds since 1970-01-01T00:00:00 (no time zone) as
/// `yyyy-MM-ddTHH:mm:ss.SSS`.
pub fn format_timestamp_ntz_micros(micros: i64) -> String {
    let mut text = String::with_capacity(23);
    push_timestamp_ntz_micros(&mut text, micros);
    text
}

/// Appends [`format_date`]'s text to `text`.
pub(crate) fn push_date(text: &mut String, days: i32) {
    let (y, m, d) = civil_from_days(i64::from(days));
    push_year(text, y);
    text.push('-');
    push_padded(text, m, 2);
    text.push('-');
    push_padded(text, d, 2);
}

/// Appends [`format_timestamp_micros`]'s text to `text`.
pub(crate) fn push_timestamp_micros(text: &mut String, micros: i64) {
    push_timestamp_ntz_micros(text, micros);
    text.push('Z');
}

/// Appends [`format_timestamp_ntz_micros`]'s text to `text`, digit by digit without the
/// formatting machinery: guests format a timestamp per row.
pub(crate) fn push_timestamp_ntz_micros(text: &mut String, micros: i64) {
    let millis = micros.div_euclid(1000);
    let (days, ms_of_day) = (millis.div_euclid(86_400_000), millis.rem_euclid(86_400_000));
    let (y, mo, d) = civil_from_days(days);
    push_year(text, y);
    text.push('-');
    push_padded(text, mo, 2);
    text.push('-');
    push_padded(text, d, 2);
    text.push('T');
    push_padded(text, (ms_of_day / 3_600_000) as u32, 2);
    text.push(':');
    push_padded(text, (ms_of_day / 60_000 % 60) as u32, 2);
    text.push(':');
    push_padded(text, (ms_of_day / 1000 % 60) as u32, 2);
    text.push('.');
    push_padded(text, (ms_of_day % 1000) as u32, 3);
}

/// Writes a year with at least four digits, as `{y:04}` does (a sign before negative
/// years).
fn push_year(text: &mut String, year: i64) {
    if (0..=9999).contains(&year) {
        push_padded(text, year as u32, 4);
    } else {
        use std::fmt::Write as _;
        let _ = write!(text, "{year:04}");
    }
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
        assert_eq!(format_timestamp_ntz_micros(0), "1970-01-01T00:00:00.000");
    }

    #[test]
    fn years_outside_four_digits_keep_their_sign_and_digits() {
        assert_eq!(format_date(-719_528), "0000-01-01");
        assert_eq!(format_date(-719_529), "-001-12-31");
        assert_eq!(format_date(2_932_897), "10000-01-01");
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

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
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}")
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
}

//! JSON as Spark's `to_json` writes it: nulls left out, Java-style doubles, ISO
//! timestamps in UTC, binary as base64.

use std::fmt::Write as _;

use crate::time::{format_date, format_timestamp_micros, format_timestamp_ntz_micros};
use crate::value::{Value, format_decimal};

/// Builds one JSON object field by field; null values are left out.
#[derive(Debug)]
pub struct JsonObject {
    buf: String,
}

impl Default for JsonObject {
    fn default() -> JsonObject {
        JsonObject::new()
    }
}

impl JsonObject {
    /// An empty object.
    pub fn new() -> JsonObject {
        JsonObject::in_buffer(String::new())
    }

    /// An empty object written at the end of `buf` (to reuse its allocation).
    pub fn in_buffer(mut buf: String) -> JsonObject {
        buf.clear();
        buf.push('{');
        JsonObject { buf }
    }

    /// Adds a field unless `value` is null.
    pub fn field(mut self, name: &str, value: Value<'_>) -> JsonObject {
        self.push(name, &value);
        self
    }

    /// Adds a field unless `value` is null, in place.
    pub fn push(&mut self, name: &str, value: &Value<'_>) {
        if *value == Value::Null {
            return;
        }
        if self.buf.len() > 1 {
            self.buf.push(',');
        }
        write_json_string(&mut self.buf, name);
        self.buf.push(':');
        write_json_value(&mut self.buf, value);
    }

    /// The finished object's text.
    pub fn finish(mut self) -> String {
        self.buf.push('}');
        self.buf
    }
}

/// Writes a non-null value as JSON; null writes `null`.
pub fn write_json_value(buf: &mut String, value: &Value<'_>) {
    match value {
        Value::Null => buf.push_str("null"),
        Value::Boolean(b) => buf.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => push_integer(buf, *i),
        Value::Float(f) => write_float(buf, *f),
        Value::Str(s) => write_json_string(buf, s),
        Value::Decimal(unscaled, scale) => buf.push_str(&format_decimal(*unscaled, *scale)),
        Value::Bytes(b) => {
            buf.push('"');
            write_base64(buf, b);
            buf.push('"');
        }
        Value::Date(days) => write_json_string(buf, &format_date(*days)),
        Value::Timestamp(micros) => write_json_string(buf, &format_timestamp_micros(*micros)),
        Value::TimestampNtz(micros) => {
            write_json_string(buf, &format_timestamp_ntz_micros(*micros))
        }
        Value::Json(json) => buf.push_str(json),
    }
}

/// Writes a double as Java prints it (`1.0`, `1.0E10`); NaN and infinities as
/// strings, as Spark does.
pub(crate) fn write_float(buf: &mut String, f: f64) {
    if !f.is_finite() {
        let name = if f.is_nan() {
            "NaN"
        } else if f > 0.0 {
            "Infinity"
        } else {
            "-Infinity"
        };
        write_json_string(buf, name);
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

/// Writes `s` as a JSON string literal.
pub fn write_json_string(buf: &mut String, s: &str) {
    buf.reserve(s.len() + 2);
    buf.push('"');
    // Runs without a character to escape are found eight bytes at a time and copied
    // whole: a Wasm guest spends most of its time here when it goes byte by byte.
    let bytes = s.as_bytes();
    let (mut at, mut run) = (0, 0);
    while at < bytes.len() {
        if let Some(word) = bytes.get(at..at + 8)
            && !needs_escape(u64::from_le_bytes(word.try_into().expect("eight bytes")))
        {
            at += 8;
            continue;
        }
        let escaped = match bytes[at] {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => {
                at += 1;
                continue;
            }
        };
        // Every escaped byte is ASCII, so `at` is a character boundary.
        buf.push_str(&s[run..at]);
        if escaped.is_empty() {
            let _ = write!(buf, "\\u{:04X}", bytes[at]);
        } else {
            buf.push_str(escaped);
        }
        at += 1;
        run = at;
    }
    buf.push_str(&s[run..]);
    buf.push('"');
}

/// Whether any of the eight bytes in `word` is a quote, a backslash or a control
/// character (the bit tricks of "Bit Twiddling Hacks": a byte below `n`, for `n` up to
/// 128, borrows into its high bit; bytes from 128 up are masked out by `!word`).
fn needs_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let quote = zero_byte(word ^ (ONES * u64::from(b'"')));
    let backslash = zero_byte(word ^ (ONES * u64::from(b'\\')));
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    quote | backslash | control != 0
}

/// Writes `value` in decimal, without the formatting machinery (a hot path in guests).
fn push_integer(buf: &mut String, value: i64) {
    if value < 0 {
        buf.push('-');
    }
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = value.unsigned_abs();
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    buf.extend(digits[at..].iter().map(|&d| char::from(d)));
}

fn write_base64(buf: &mut String, bytes: &[u8]) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= chunk.len() {
                buf.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                buf.push('=');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nulls_are_left_out_and_strings_escaped() {
        let json = JsonObject::new()
            .field("a", Value::Str("x\"y\n"))
            .field("b", Value::Null)
            .field("c", Value::Int(-3))
            .finish();
        assert_eq!(json, r#"{"a":"x\"y\n","c":-3}"#);
    }

    #[test]
    fn every_control_character_and_non_ascii_text_is_written_as_json_says() {
        let text: String = (0u8..0x20)
            .map(char::from)
            .chain("a\"b\\c é€😀 ".chars())
            .collect();
        let mut written = String::new();
        write_json_string(&mut written, &text);
        // serde_json reads it back to the same text.
        let read: String = serde_json::from_str(&written).unwrap();
        assert_eq!(read, text);
        assert!(written.starts_with("\"\\u0000\\u0001"), "{written}");
        assert!(written.contains("\\b\\t\\n\\u000B\\f\\r"), "{written}");
    }

    #[test]
    fn an_escape_is_found_at_every_place_in_a_word() {
        for length in 0..20 {
            for place in 0..length {
                for special in ['"', '\\', '\n', '\u{1f}'] {
                    let mut text: String = "é".repeat(length);
                    text.replace_range(
                        text.char_indices()
                            .nth(place)
                            .map(|(i, _)| i..i + 2)
                            .unwrap(),
                        &special.to_string(),
                    );
                    let mut written = String::new();
                    write_json_string(&mut written, &text);
                    let read: String = serde_json::from_str(&written).unwrap();
                    assert_eq!(read, text, "{written}");
                }
            }
        }
    }

    #[test]
    fn integers_are_written_in_full() {
        for value in [0, 7, -7, 10, 1_000_000_007, i64::MAX, i64::MIN] {
            let mut written = String::new();
            push_integer(&mut written, value);
            assert_eq!(written, value.to_string());
        }
    }

    #[test]
    fn floats_look_like_java_doubles() {
        let render = |f| JsonObject::new().field("f", Value::Float(f)).finish();
        assert_eq!(render(1.0), r#"{"f":1.0}"#);
        assert_eq!(render(2.5), r#"{"f":2.5}"#);
        assert_eq!(render(1e10), r#"{"f":1.0E10}"#);
        assert_eq!(render(f64::NAN), r#"{"f":"NaN"}"#);
    }

    #[test]
    fn binary_is_base64() {
        let render = |b: &[u8]| JsonObject::new().field("b", Value::Bytes(b)).finish();
        assert_eq!(render(b"Man"), r#"{"b":"TWFu"}"#);
        assert_eq!(render(b"Ma"), r#"{"b":"TWE="}"#);
        assert_eq!(render(b"M"), r#"{"b":"TQ=="}"#);
    }

    #[test]
    fn temporal_values_use_spark_formats() {
        let json = JsonObject::new()
            .field("d", Value::Date(19737))
            .field("t", Value::Timestamp(1_705_314_600_123_456))
            .finish();
        assert_eq!(json, r#"{"d":"2024-01-15","t":"2024-01-15T10:30:00.123Z"}"#);
    }
}

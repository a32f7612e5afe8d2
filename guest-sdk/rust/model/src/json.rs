//! JSON as Spark's `to_json` writes it: nulls left out, Java-style doubles, ISO
//! timestamps in UTC, binary as base64.

use std::fmt::Write as _;

use crate::number::{format_decimal, write_java_double};
use crate::time::{push_date, push_timestamp_micros, push_timestamp_ntz_micros};
use crate::value::Value;

/// A field name as JSON (quoted, escaped, with its colon), written once for objects
/// that have the same fields row after row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonKey(String);

impl JsonKey {
    /// The key for field `name`.
    pub fn new(name: &str) -> JsonKey {
        let mut key = String::with_capacity(name.len() + 3);
        write_json_string(&mut key, name);
        key.push(':');
        JsonKey(key)
    }
}

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

    /// Adds a field by its prepared key unless `value` is null, in place: what
    /// [`JsonObject::push`] does without escaping the name again.
    pub fn push_keyed(&mut self, key: &JsonKey, value: &Value<'_>) {
        if *value == Value::Null {
            return;
        }
        if self.buf.len() > 1 {
            self.buf.push(',');
        }
        self.buf.push_str(&key.0);
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
        // Spark writes NaN and the infinities as strings.
        Value::Float(f) if !f.is_finite() => quoted(buf, |buf| write_java_double(buf, *f)),
        Value::Float(f) => write_java_double(buf, *f),
        Value::Str(s) => write_json_string(buf, s),
        Value::Decimal(unscaled, scale) => buf.push_str(&format_decimal(*unscaled, *scale)),
        Value::Bytes(b) => {
            buf.push('"');
            write_base64(buf, b);
            buf.push('"');
        }
        // Dates and timestamps are digits and separators: nothing to escape.
        Value::Date(days) => quoted(buf, |buf| push_date(buf, *days)),
        Value::Timestamp(micros) => quoted(buf, |buf| push_timestamp_micros(buf, *micros)),
        Value::TimestampNtz(micros) => quoted(buf, |buf| push_timestamp_ntz_micros(buf, *micros)),
        Value::Json(json) => buf.push_str(json),
    }
}

/// Writes what `write` writes between quotes.
fn quoted(buf: &mut String, write: impl FnOnce(&mut String)) {
    buf.push('"');
    write(buf);
    buf.push('"');
}

/// Writes `s` as a JSON string literal.
pub fn write_json_string(buf: &mut String, s: &str) {
    buf.reserve(s.len() + 2);
    buf.push('"');
    // Runs without a character to escape are found eight bytes at a time and copied
    // whole: a Wasm guest spends most of its time here when it goes byte by byte.
    let bytes = s.as_bytes();
    let mut run = 0;
    while let Some(at) = next_escape(bytes, run) {
        // Every escaped byte is ASCII, so `at` is a character boundary.
        buf.push_str(&s[run..at]);
        match bytes[at] {
            b'"' => buf.push_str("\\\""),
            b'\\' => buf.push_str("\\\\"),
            b'\n' => buf.push_str("\\n"),
            b'\r' => buf.push_str("\\r"),
            b'\t' => buf.push_str("\\t"),
            0x08 => buf.push_str("\\b"),
            0x0c => buf.push_str("\\f"),
            control => {
                let _ = write!(buf, "\\u{control:04X}");
            }
        }
        run = at + 1;
    }
    buf.push_str(&s[run..]);
    buf.push('"');
}

/// The index of the first byte from `from` on that JSON escapes: a quote, a backslash
/// or a control character.
fn next_escape(bytes: &[u8], from: usize) -> Option<usize> {
    let word_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight"));
    let mut at = from;
    while at + 8 <= bytes.len() {
        let found = escapes(word_at(at));
        if found != 0 {
            return Some(at + found.trailing_zeros() as usize / 8);
        }
        at += 8;
    }
    if at == bytes.len() {
        return None;
    }
    if bytes.len() >= 8 {
        // The last eight bytes, those already looked at shifted out: shifting in zero
        // bytes (which count as escapes) keeps a borrow from a byte looked at before
        // out of the rest.
        let last = bytes.len() - 8;
        let found = escapes(word_at(last) >> ((at - last) * 8));
        let index = found.trailing_zeros() as usize / 8;
        return (index < bytes.len() - at).then_some(at + index);
    }
    bytes[at..]
        .iter()
        .position(|&b| b < 0x20 || b == b'"' || b == b'\\')
        .map(|i| at + i)
}

/// The high bit of each byte of `word` (little-endian) that is a quote, a backslash or a
/// control character (the bit tricks of "Bit Twiddling Hacks": a byte below `n`, for `n`
/// up to 128, borrows into its high bit; bytes from 128 up are masked out by `!word`).
/// A borrow can only mark bytes above a marked one, so the lowest mark is exact.
fn escapes(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let quote = zero_byte(word ^ (ONES * u64::from(b'"')));
    let backslash = zero_byte(word ^ (ONES * u64::from(b'\\')));
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    quote | backslash | control
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
    fn a_byte_after_an_escape_is_never_taken_for_one() {
        // '#' is one above '"', '!' one above ' ': after a quote or a control
        // character a carry could mark them.
        for text in [
            "abcdefgh\"#",
            "abcdefghi\"#j",
            "\"#######",
            "ab\u{1}!cdefgh",
            "\"#",
        ] {
            let mut written = String::new();
            write_json_string(&mut written, text);
            assert_eq!(written, serde_json::to_string(text).unwrap());
        }
    }

    #[test]
    fn a_prepared_key_writes_what_the_name_would() {
        let mut by_name = JsonObject::new();
        let mut by_key = JsonObject::new();
        for (name, value) in [
            ("a\"b", Value::Int(1)),
            ("skip", Value::Null),
            ("c", Value::Str("x")),
        ] {
            by_name.push(name, &value);
            by_key.push_keyed(&JsonKey::new(name), &value);
        }
        assert_eq!(by_key.finish(), by_name.finish());
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

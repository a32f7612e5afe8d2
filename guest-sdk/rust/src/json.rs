//! A small JSON object writer with Spark's `to_json` conventions.

use std::fmt::Write as _;

use crate::batch::Value;
use crate::time::{format_date, format_timestamp_micros, format_timestamp_ntz_micros};

/// Writes one JSON object field by field.
///
/// Follows Spark's `to_json`: null fields are left out, timestamps are ISO 8601 with
/// milliseconds (`2024-01-15T10:30:00.000Z`), binary is base64, decimals are numbers.
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
        JsonObject {
            buf: String::from("{"),
        }
    }

    /// Adds a field; a null value is left out.
    pub fn field(mut self, name: &str, value: Value<'_>) -> JsonObject {
        if value == Value::Null {
            return self;
        }
        if self.buf.len() > 1 {
            self.buf.push(',');
        }
        write_string(&mut self.buf, name);
        self.buf.push(':');
        write_value(&mut self.buf, value);
        self
    }

    /// The object's text.
    pub fn finish(mut self) -> String {
        self.buf.push('}');
        self.buf
    }
}

fn write_value(buf: &mut String, value: Value<'_>) {
    match value {
        Value::Null => buf.push_str("null"),
        Value::Boolean(b) => buf.push_str(if b { "true" } else { "false" }),
        Value::Int(i) => {
            let _ = write!(buf, "{i}");
        }
        Value::Float(f) => write_float(buf, f),
        Value::Str(s) | Value::Text(s) => write_string(buf, s),
        Value::Decimal(d) => buf.push_str(d),
        Value::Bytes(b) => {
            buf.push('"');
            write_base64(buf, b);
            buf.push('"');
        }
        Value::Date(days) => write_string(buf, &format_date(days)),
        Value::Timestamp(micros) => write_string(buf, &format_timestamp_micros(micros)),
        Value::TimestampNtz(micros) => write_string(buf, &format_timestamp_ntz_micros(micros)),
    }
}

/// Java's `Double.toString` shape for common values: `1.0`, `2.5`, `1.0E10`; JSON has no
/// NaN or infinity, so Spark writes them as strings.
fn write_float(buf: &mut String, f: f64) {
    if !f.is_finite() {
        let name = if f.is_nan() {
            "NaN"
        } else if f > 0.0 {
            "Infinity"
        } else {
            "-Infinity"
        };
        write_string(buf, name);
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

fn write_string(buf: &mut String, s: &str) {
    buf.push('"');
    for c in s.chars() {
        match c {
            '"' => buf.push_str("\\\""),
            '\\' => buf.push_str("\\\\"),
            '\n' => buf.push_str("\\n"),
            '\r' => buf.push_str("\\r"),
            '\t' => buf.push_str("\\t"),
            '\u{08}' => buf.push_str("\\b"),
            '\u{0c}' => buf.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(buf, "\\u{:04X}", c as u32);
            }
            c => buf.push(c),
        }
    }
    buf.push('"');
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

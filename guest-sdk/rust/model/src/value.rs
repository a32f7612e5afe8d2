//! One value of a change row, and the change type.

use crate::number::{format_decimal, write_java_double};

/// What happened to a row, as Delta's `_change_type` column says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChangeType {
    /// A new row.
    Insert,
    /// The row as it was before an update.
    UpdatePreimage,
    /// The row as it is after an update.
    UpdatePostimage,
    /// A removed row, with its last values.
    Delete,
}

impl ChangeType {
    /// Every change type, in the contract's order.
    pub const ALL: [ChangeType; 4] = [
        ChangeType::Insert,
        ChangeType::UpdatePreimage,
        ChangeType::UpdatePostimage,
        ChangeType::Delete,
    ];

    /// The name Delta uses in `_change_type`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeType::Insert => "insert",
            ChangeType::UpdatePreimage => "update_preimage",
            ChangeType::UpdatePostimage => "update_postimage",
            ChangeType::Delete => "delete",
        }
    }

    /// Parses a Delta `_change_type` name.
    pub fn parse(name: &str) -> Option<ChangeType> {
        ChangeType::ALL
            .into_iter()
            .find(|change| change.as_str() == name.trim())
    }
}

/// One value of a row, borrowed from its batch where it can be.
#[derive(Clone, Debug, PartialEq)]
pub enum Value<'a> {
    /// SQL null.
    Null,
    /// A boolean.
    Boolean(bool),
    /// Any integer column (byte, short, integer, long).
    Int(i64),
    /// A float or double column.
    Float(f64),
    /// A string column.
    Str(&'a str),
    /// A binary column.
    Bytes(&'a [u8]),
    /// A date: days since 1970-01-01.
    Date(i32),
    /// A timestamp: microseconds since 1970-01-01T00:00:00Z.
    Timestamp(i64),
    /// A timestamp without time zone: microseconds since 1970-01-01T00:00:00.
    TimestampNtz(i64),
    /// A decimal: the unscaled integer and the scale.
    Decimal(i128, i8),
    /// A nested value (struct, array, map), already rendered as JSON.
    Json(String),
}

impl Value<'_> {
    /// The value as text, as Spark casts it to a string (nested values as JSON);
    /// `None` for null.
    pub fn to_text(&self) -> Option<String> {
        Some(match self {
            Value::Null => return None,
            Value::Boolean(b) => b.to_string(),
            Value::Int(i) => i.to_string(),
            Value::Float(f) => {
                let mut text = String::new();
                write_java_double(&mut text, *f);
                text
            }
            Value::Str(s) => (*s).to_string(),
            Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
            Value::Date(days) => crate::format_date(*days),
            Value::Timestamp(micros) => crate::format_timestamp_micros(*micros),
            Value::TimestampNtz(micros) => crate::format_timestamp_ntz_micros(*micros),
            Value::Decimal(unscaled, scale) => format_decimal(*unscaled, *scale),
            Value::Json(json) => json.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_types_round_trip() {
        for change in ChangeType::ALL {
            assert_eq!(ChangeType::parse(change.as_str()), Some(change));
        }
        assert_eq!(ChangeType::parse("upsert"), None);
    }
}

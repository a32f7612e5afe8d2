//! The batch helpers: selections and natively encoded records, described by a guest
//! and carried out over the whole batch.
//!
//! The host runs these for the contract's `select-change-types`, `select-where` and
//! `emit-encoded`; the Rust SDK runs them natively in unit tests.

use std::ops::ControlFlow;

use arrow_array::RecordBatch;

use crate::column::Column;
use crate::json::{JsonKey, JsonObject};
use crate::packed::{PackedRecords, Record};
use crate::text::spark_substring;
use crate::value::{ChangeType, Value};

/// Name of the change type column in a change feed batch.
pub const CHANGE_TYPE: &str = "_change_type";
/// Name of the commit version column in a change feed batch.
pub const COMMIT_VERSION: &str = "_commit_version";
/// Name of the commit timestamp column in a change feed batch.
pub const COMMIT_TIMESTAMP: &str = "_commit_timestamp";
/// The change columns, which are not data columns.
pub const CHANGE_COLUMNS: [&str; 3] = [CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP];

/// A constant in a predicate or an encoded field.
#[derive(Clone, Debug, PartialEq)]
pub enum Scalar {
    /// SQL null.
    Null,
    /// A boolean.
    Boolean(bool),
    /// An integer.
    Integer(i64),
    /// A floating point number.
    Float(f64),
    /// A string.
    Text(String),
}

impl Scalar {
    /// The constant for a message: as Rust shows it, text cut to 100 bytes (a guest
    /// chooses it, and the host builds the message).
    fn described(&self) -> String {
        match self {
            Scalar::Text(text) if text.len() > 100 => {
                let mut end = 100;
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                format!("Text({:?}…)", &text[..end])
            }
            other => format!("{other:?}"),
        }
    }

    /// The constant as a value.
    pub fn value(&self) -> Value<'_> {
        match self {
            Scalar::Null => Value::Null,
            Scalar::Boolean(b) => Value::Boolean(*b),
            Scalar::Integer(i) => Value::Int(*i),
            Scalar::Float(f) => Value::Float(*f),
            Scalar::Text(s) => Value::Str(s),
        }
    }
}

/// How a predicate compares a column's value with its constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Comparison {
    Equal,
    NotEqual,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
    IsNull,
    IsNotNull,
}

/// A condition on one column.
#[derive(Clone, Debug, PartialEq)]
pub struct Predicate {
    /// The column (dotted path for struct fields).
    pub column: String,
    /// The comparison.
    pub op: Comparison,
    /// The constant.
    pub value: Scalar,
}

/// Where an encoded field's value comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldValue {
    /// A column's value.
    Column(String),
    /// Spark's `substring(column, pos, len)`.
    Substring {
        /// The string column.
        column: String,
        /// 1-based position of the first character.
        pos: u32,
        /// Most characters to take.
        len: u32,
    },
    /// A constant.
    Constant(Scalar),
    /// The row's `_change_type`.
    ChangeType,
    /// The row's `_commit_version`.
    CommitVersion,
    /// The row's `_commit_timestamp`.
    CommitTimestamp,
}

/// How each record's value is made.
#[derive(Clone, Debug, PartialEq)]
pub enum ValueEncoding {
    /// A JSON object of these fields (name, value), nulls left out.
    Json(Vec<(String, FieldValue)>),
    /// A JSON object of every data column, as Spark's `to_json(struct(*))`.
    JsonRow,
    /// No value: tombstones.
    Tombstone,
}

/// Records to make for a selection of rows, one per row.
#[derive(Clone, Debug, PartialEq)]
pub struct EncodeSpec {
    /// The rows.
    pub rows: Vec<u32>,
    /// The key, as text; none when absent or null.
    pub key: Option<FieldValue>,
    /// The value.
    pub value: ValueEncoding,
    /// Whether delete rows become tombstones, keeping row order.
    pub delete_as_tombstone: bool,
    /// The topic; the pipeline's when absent.
    pub topic: Option<String>,
    /// Headers (name, value as text); null values are left out.
    pub headers: Vec<(String, FieldValue)>,
}

/// Why a helper could not do what it was asked; the message is a sentence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HelperError(pub String);

impl std::fmt::Display for HelperError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HelperError {}

fn column<'a>(batch: &'a RecordBatch, name: &str) -> Result<Column<'a>, HelperError> {
    Column::find(batch, name).map_err(|e| HelperError(e.to_string()))
}

/// Each row's change type.
pub fn change_types(batch: &RecordBatch) -> Result<Vec<ChangeType>, HelperError> {
    let changes = column(batch, CHANGE_TYPE)?;
    (0..batch.num_rows())
        .map(|row| {
            let name = changes.str(row).unwrap_or_default();
            ChangeType::parse(name).ok_or_else(|| {
                HelperError(format!("Row {row} has an unknown _change_type `{name}`."))
            })
        })
        .collect()
}

/// The rows to consider: `within`, checked against the batch, or all of them.
/// The rows of `within` (all of the batch's when absent), refusing an index past its end.
pub fn candidates(batch: &RecordBatch, within: Option<&[u32]>) -> Result<Vec<u32>, HelperError> {
    match within {
        None => Ok((0..batch.num_rows() as u32).collect()),
        Some(rows) => {
            if let Some(bad) = rows.iter().find(|&&r| r as usize >= batch.num_rows()) {
                return Err(HelperError(format!(
                    "Row {bad} is out of range: the batch has {} rows.",
                    batch.num_rows()
                )));
            }
            Ok(rows.to_vec())
        }
    }
}

/// The rows (of `within`, or all) whose change type is one of `types`, in order.
pub fn select_change_types(
    batch: &RecordBatch,
    types: &[ChangeType],
    within: Option<&[u32]>,
) -> Result<Vec<u32>, HelperError> {
    let changes = change_types(batch)?;
    Ok(candidates(batch, within)?
        .into_iter()
        .filter(|&row| types.contains(&changes[row as usize]))
        .collect())
}

/// The rows (of `within`, or all) where `predicate` holds, in order. Null compares as
/// false, as in SQL.
pub fn select_where(
    batch: &RecordBatch,
    predicate: &Predicate,
    within: Option<&[u32]>,
) -> Result<Vec<u32>, HelperError> {
    let values = column(batch, &predicate.column)?;
    let constant = predicate.value.value();
    let mut selected = Vec::new();
    for row in candidates(batch, within)? {
        let value = values.value(row as usize);
        let keep = match predicate.op {
            Comparison::IsNull => value == Value::Null,
            Comparison::IsNotNull => value != Value::Null,
            op => {
                let ordering = compare(&value, &constant).map_err(|found| {
                    HelperError(format!(
                        "Cannot compare column `{}` ({found}) with {}.",
                        predicate.column,
                        predicate.value.described()
                    ))
                })?;
                ordering.is_some_and(|o| match op {
                    Comparison::Equal => o.is_eq(),
                    Comparison::NotEqual => o.is_ne(),
                    Comparison::Less => o.is_lt(),
                    Comparison::LessOrEqual => o.is_le(),
                    Comparison::Greater => o.is_gt(),
                    _ => o.is_ge(),
                })
            }
        };
        if keep {
            selected.push(row);
        }
    }
    Ok(selected)
}

/// Orders a column value against a constant: `None` when either is null, an error
/// naming the column's kind when the types do not compare.
fn compare(value: &Value<'_>, constant: &Value<'_>) -> Result<Option<std::cmp::Ordering>, String> {
    use Value as V;
    Ok(match (value, constant) {
        (V::Null, _) | (_, V::Null) => None,
        (V::Boolean(a), V::Boolean(b)) => Some(a.cmp(b)),
        (V::Int(a), V::Int(b)) => Some(a.cmp(b)),
        (V::Int(a), V::Float(b)) => (*a as f64).partial_cmp(b),
        (V::Float(a), V::Int(b)) => a.partial_cmp(&(*b as f64)),
        (V::Float(a), V::Float(b)) => a.partial_cmp(b),
        (V::Str(a), V::Str(b)) => Some((*a).cmp(*b)),
        (V::Date(_) | V::Timestamp(_) | V::TimestampNtz(_), V::Str(b)) => {
            let text = value.to_text().unwrap_or_default();
            Some(text.as_str().cmp(*b))
        }
        (V::Decimal(..), V::Int(_) | V::Float(_)) => {
            let a: f64 = value
                .to_text()
                .unwrap_or_default()
                .parse()
                .unwrap_or(f64::NAN);
            let b = match constant {
                V::Int(i) => *i as f64,
                V::Float(f) => *f,
                _ => f64::NAN,
            };
            a.partial_cmp(&b)
        }
        (found, _) => return Err(kind(found).to_string()),
    })
}

fn kind(value: &Value<'_>) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Boolean(_) => "boolean",
        Value::Int(_) => "integer",
        Value::Float(_) => "floating point",
        Value::Str(_) => "string",
        Value::Bytes(_) => "binary",
        Value::Date(_) => "date",
        Value::Timestamp(_) | Value::TimestampNtz(_) => "timestamp",
        Value::Decimal(..) => "decimal",
        Value::Json(_) => "nested",
    }
}

/// A field value resolved against the batch once, read row by row.
enum Prepared<'a> {
    Column(Column<'a>),
    Substring(Column<'a>, usize, usize),
    Constant(Value<'a>),
    ChangeType(Column<'a>),
}

impl<'a> Prepared<'a> {
    fn new(batch: &'a RecordBatch, field: &'a FieldValue) -> Result<Prepared<'a>, HelperError> {
        Ok(match field {
            FieldValue::Column(name) => Prepared::Column(column(batch, name)?),
            FieldValue::Substring {
                column: name,
                pos,
                len,
            } => {
                let values = column(batch, name)?;
                if !values.is_string() {
                    return Err(HelperError(format!(
                        "substring needs a string column and `{name}` is not one."
                    )));
                }
                Prepared::Substring(values, *pos as usize, *len as usize)
            }
            FieldValue::Constant(scalar) => Prepared::Constant(scalar.value()),
            FieldValue::ChangeType => Prepared::ChangeType(column(batch, CHANGE_TYPE)?),
            FieldValue::CommitVersion => Prepared::Column(column(batch, COMMIT_VERSION)?),
            FieldValue::CommitTimestamp => Prepared::Column(column(batch, COMMIT_TIMESTAMP)?),
        })
    }

    fn value(&self, row: usize) -> Value<'a> {
        match self {
            Prepared::Column(c) | Prepared::ChangeType(c) => c.value(row),
            Prepared::Substring(c, pos, len) => match c.str(row) {
                Some(s) => Value::Str(spark_substring(s, *pos, *len)),
                None => Value::Null,
            },
            Prepared::Constant(v) => v.clone(),
        }
    }
}

/// Appends the value as record bytes (key or header): strings as they are, others as
/// text. Returns false, appending nothing, for null.
pub fn text_bytes(value: &Value<'_>, out: &mut Vec<u8>) -> bool {
    match value {
        Value::Null => return false,
        Value::Str(s) => out.extend_from_slice(s.as_bytes()),
        Value::Bytes(b) => out.extend_from_slice(b),
        other => out.extend_from_slice(other.to_text().unwrap_or_default().as_bytes()),
    }
    true
}

/// Where encoded records go: packed (the SDK, which hands them across the boundary) or
/// as records (the host, which produces them), without converting one into the other.
///
/// A sink may stop the encoding (`Break`), for example when a budget is spent; it keeps
/// its own account of why.
pub trait RecordSink {
    /// Adds a record to the pipeline's topic without headers.
    fn push_parts(
        &mut self,
        source_row: u32,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> ControlFlow<()> {
        self.push_record(Record {
            source_row,
            key: key.map(<[u8]>::to_vec),
            value: value.map(<[u8]>::to_vec),
            ..Record::default()
        })
    }
    /// Adds any record.
    fn push_record(&mut self, record: Record) -> ControlFlow<()>;
}

impl RecordSink for PackedRecords {
    fn push_parts(
        &mut self,
        source_row: u32,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> ControlFlow<()> {
        PackedRecords::push_parts(self, source_row, key, value);
        ControlFlow::Continue(())
    }

    fn push_record(&mut self, record: Record) -> ControlFlow<()> {
        self.push(&record);
        ControlFlow::Continue(())
    }
}

impl RecordSink for Vec<Record> {
    fn push_record(&mut self, record: Record) -> ControlFlow<()> {
        self.push(record);
        ControlFlow::Continue(())
    }
}

/// Makes one record per row of `spec.rows` into `out`; returns how many rows were
/// encoded, fewer than `spec.rows` only when the sink stopped the encoding.
pub fn encode(
    batch: &RecordBatch,
    spec: &EncodeSpec,
    out: &mut impl RecordSink,
) -> Result<u32, HelperError> {
    let rows = candidates(batch, Some(&spec.rows))?;
    let key = spec
        .key
        .as_ref()
        .map(|k| Prepared::new(batch, k))
        .transpose()?;
    let fields: Vec<(JsonKey, Prepared<'_>)> = match &spec.value {
        ValueEncoding::Json(fields) => fields
            .iter()
            .map(|(name, value)| Ok((JsonKey::new(name), Prepared::new(batch, value)?)))
            .collect::<Result<_, HelperError>>()?,
        ValueEncoding::JsonRow => crate::column::top_level(batch, &CHANGE_COLUMNS)
            .map(|(name, values)| (JsonKey::new(name), Prepared::Column(values)))
            .collect(),
        ValueEncoding::Tombstone => Vec::new(),
    };
    let headers: Vec<(&str, Prepared<'_>)> = spec
        .headers
        .iter()
        .map(|(name, value)| Ok((name.as_str(), Prepared::new(batch, value)?)))
        .collect::<Result<_, HelperError>>()?;
    let changes = if spec.delete_as_tombstone {
        change_types(batch)?
    } else {
        Vec::new()
    };
    let mut key_bytes = Vec::new();
    let mut json = String::new();
    let simple = spec.topic.is_none() && headers.is_empty();
    let mut encoded = 0;
    for &row in &rows {
        let row_index = row as usize;
        key_bytes.clear();
        let has_key = key
            .as_ref()
            .is_some_and(|k| text_bytes(&k.value(row_index), &mut key_bytes));
        let tombstone = matches!(spec.value, ValueEncoding::Tombstone)
            || changes.get(row_index) == Some(&ChangeType::Delete);
        let value = match tombstone {
            true => None,
            false => {
                let mut object = JsonObject::in_buffer(std::mem::take(&mut json));
                for (key, field) in &fields {
                    object.push_keyed(key, &field.value(row_index));
                }
                json = object.finish();
                Some(json.as_bytes())
            }
        };
        let key = has_key.then_some(key_bytes.as_slice());
        if simple {
            if out.push_parts(row, key, value).is_break() {
                return Ok(encoded);
            }
            encoded += 1;
            continue;
        }
        let mut record = Record {
            source_row: row,
            topic: spec.topic.clone(),
            key: key.map(<[u8]>::to_vec),
            value: value.map(<[u8]>::to_vec),
            ..Record::default()
        };
        for (name, field) in &headers {
            let mut bytes = Vec::new();
            if text_bytes(&field.value(row_index), &mut bytes) {
                record.headers.push((name.to_string(), bytes));
            }
        }
        if out.push_record(record).is_break() {
            return Ok(encoded);
        }
        encoded += 1;
    }
    Ok(encoded)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array, StringArray, TimestampMicrosecondArray};
    use arrow_schema::{DataType, Field, Schema, TimeUnit};

    use super::*;

    fn batch() -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new("id", DataType::Utf8, true),
            Field::new("amount", DataType::Int64, true),
            Field::new(CHANGE_TYPE, DataType::Utf8, false),
            Field::new(COMMIT_VERSION, DataType::Int64, false),
            Field::new(
                COMMIT_TIMESTAMP,
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                false,
            ),
        ]);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![
                Some("ObjectId('a1')"),
                Some("b"),
                None,
            ])),
            Arc::new(Int64Array::from(vec![Some(5), None, Some(7)])),
            Arc::new(StringArray::from(vec![
                "insert",
                "update_preimage",
                "delete",
            ])),
            Arc::new(Int64Array::from(vec![1, 2, 2])),
            Arc::new(TimestampMicrosecondArray::from(vec![0, 0, 1000]).with_timezone("UTC")),
        ];
        RecordBatch::try_new(Arc::new(schema), columns).unwrap()
    }

    #[test]
    fn selections_by_change_type_and_predicate() {
        let batch = batch();
        let kept = select_change_types(&batch, &[ChangeType::Insert, ChangeType::Delete], None);
        assert_eq!(kept.unwrap(), [0, 2]);
        let over = Predicate {
            column: "amount".into(),
            op: Comparison::Greater,
            value: Scalar::Integer(5),
        };
        assert_eq!(select_where(&batch, &over, None).unwrap(), [2]);
        assert_eq!(
            select_where(&batch, &over, Some(&[0, 1])).unwrap(),
            Vec::<u32>::new()
        );
        let wrong = Predicate {
            value: Scalar::Text("x".into()),
            ..over
        };
        assert_eq!(
            select_where(&batch, &wrong, None).unwrap_err().0,
            r#"Cannot compare column `amount` (integer) with Text("x")."#
        );
        let long = Predicate {
            value: Scalar::Text("\n".repeat(1_000_000)),
            ..wrong
        };
        let message = select_where(&batch, &long, None).unwrap_err().0;
        assert!(message.len() < 300, "a guest's constant is cut: {message}");
    }

    #[test]
    fn encoded_records_match_hand_made_json() {
        let batch = batch();
        let spec = EncodeSpec {
            rows: vec![0, 2],
            key: Some(FieldValue::Column("id".into())),
            delete_as_tombstone: false,
            value: ValueEncoding::Json(vec![
                (
                    "id".into(),
                    FieldValue::Substring {
                        column: "id".into(),
                        pos: 11,
                        len: 2,
                    },
                ),
                ("amount".into(), FieldValue::Column("amount".into())),
                ("change".into(), FieldValue::ChangeType),
            ]),
            topic: None,
            headers: vec![],
        };
        let mut out = PackedRecords::default();
        assert_eq!(encode(&batch, &spec, &mut out).unwrap(), 2);
        let records = out.unpack(3).unwrap();
        assert_eq!(records[0].key.as_deref(), Some(&b"ObjectId('a1')"[..]));
        assert_eq!(
            records[0].value.as_deref(),
            Some(&br#"{"id":"a1","amount":5,"change":"insert"}"#[..])
        );
        assert_eq!(records[1].key, None);
        assert_eq!(
            records[1].value.as_deref(),
            Some(&br#"{"amount":7,"change":"delete"}"#[..])
        );
    }

    /// Takes records until it holds `room` of them.
    struct Bounded {
        records: Vec<Record>,
        room: usize,
    }

    impl RecordSink for Bounded {
        fn push_record(&mut self, record: Record) -> ControlFlow<()> {
            if self.records.len() == self.room {
                return ControlFlow::Break(());
            }
            self.records.push(record);
            ControlFlow::Continue(())
        }
    }

    #[test]
    fn a_sink_can_stop_the_encoding() {
        let batch = batch();
        for headers in [vec![], vec![("op".to_string(), FieldValue::ChangeType)]] {
            let spec = EncodeSpec {
                rows: vec![0, 1, 2],
                key: None,
                value: ValueEncoding::JsonRow,
                delete_as_tombstone: false,
                topic: None,
                headers,
            };
            let mut out = Bounded {
                records: Vec::new(),
                room: 2,
            };
            assert_eq!(encode(&batch, &spec, &mut out).unwrap(), 2);
            assert_eq!(out.records.len(), 2);
        }
    }

    #[test]
    fn deletes_become_tombstones_in_row_order() {
        let batch = batch();
        let spec = EncodeSpec {
            rows: vec![0, 1, 2],
            key: Some(FieldValue::CommitVersion),
            value: ValueEncoding::JsonRow,
            delete_as_tombstone: true,
            topic: None,
            headers: vec![],
        };
        let mut out = PackedRecords::default();
        encode(&batch, &spec, &mut out).unwrap();
        let values: Vec<_> = out
            .unpack(3)
            .unwrap()
            .into_iter()
            .map(|r| r.value.is_some())
            .collect();
        assert_eq!(values, [true, true, false]);
    }

    #[test]
    fn json_rows_leave_out_change_columns_and_nulls() {
        let batch = batch();
        let spec = EncodeSpec {
            rows: vec![1],
            key: None,
            value: ValueEncoding::JsonRow,
            delete_as_tombstone: true,
            topic: Some("t".into()),
            headers: vec![("v".into(), FieldValue::CommitVersion)],
        };
        let mut out = PackedRecords::default();
        encode(&batch, &spec, &mut out).unwrap();
        let record = &out.unpack(3).unwrap()[0];
        assert_eq!(record.value.as_deref(), Some(&br#"{"id":"b"}"#[..]));
        assert_eq!(record.topic.as_deref(), Some("t"));
        assert_eq!(record.headers, [("v".to_string(), b"2".to_vec())]);
    }

    #[test]
    fn unknown_columns_and_rows_are_named() {
        let batch = batch();
        let spec = EncodeSpec {
            rows: vec![5],
            key: None,
            value: ValueEncoding::Tombstone,
            delete_as_tombstone: false,
            topic: None,
            headers: vec![],
        };
        let mut out = PackedRecords::default();
        assert_eq!(
            encode(&batch, &spec, &mut out).unwrap_err().0,
            "Row 5 is out of range: the batch has 3 rows."
        );
        let spec = EncodeSpec {
            rows: vec![0],
            key: Some(FieldValue::Column("nope".into())),
            ..spec
        };
        assert_eq!(
            encode(&batch, &spec, &mut out).unwrap_err().0,
            "The batch has no column named `nope`."
        );
    }
}

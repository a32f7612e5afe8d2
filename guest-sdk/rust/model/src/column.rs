//! Typed reading of one Arrow column, struct fields addressed by dotted paths.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type,
    Int64Type, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, PrimitiveArray, RecordBatch, StructArray};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, TimeUnit};

use crate::json::write_json_value;
use crate::value::Value;

/// Why a column could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ColumnError {
    /// No column or struct field has this name.
    Missing(String),
}

impl std::fmt::Display for ColumnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ColumnError::Missing(name) => write!(f, "The batch has no column named `{name}`."),
        }
    }
}

impl std::error::Error for ColumnError {}

/// A column ready to read value by value: the array is downcast once, and the nulls of
/// enclosing structs are folded in (Arrow does not push them down to children).
#[derive(Clone)]
pub struct Column<'a> {
    reader: Reader<'a>,
    nulls: Option<NullBuffer>,
}

#[derive(Clone)]
enum Reader<'a> {
    Boolean(&'a arrow_array::BooleanArray),
    Int8(&'a PrimitiveArray<Int8Type>),
    Int16(&'a PrimitiveArray<Int16Type>),
    Int32(&'a PrimitiveArray<Int32Type>),
    Int64(&'a PrimitiveArray<Int64Type>),
    UInt8(&'a PrimitiveArray<UInt8Type>),
    UInt16(&'a PrimitiveArray<UInt16Type>),
    UInt32(&'a PrimitiveArray<UInt32Type>),
    UInt64(&'a PrimitiveArray<UInt64Type>),
    Float32(&'a PrimitiveArray<Float32Type>),
    Float64(&'a PrimitiveArray<Float64Type>),
    Utf8(&'a arrow_array::StringArray),
    LargeUtf8(&'a arrow_array::LargeStringArray),
    Utf8View(&'a arrow_array::StringViewArray),
    Binary(&'a arrow_array::BinaryArray),
    LargeBinary(&'a arrow_array::LargeBinaryArray),
    BinaryView(&'a arrow_array::BinaryViewArray),
    Date32(&'a PrimitiveArray<Date32Type>),
    Timestamp {
        values: &'a [i64],
        unit: TimeUnit,
        utc: bool,
    },
    Decimal128(&'a PrimitiveArray<Decimal128Type>, i8),
    Struct(&'a StructArray),
    Nested(&'a dyn Array),
}

/// A leaf column of a batch: a top-level column, or a struct field under its dotted
/// path, with the nulls of its enclosing structs.
#[derive(Clone, Debug)]
pub struct LeafColumn {
    /// The column's name, struct fields as dotted paths (`fullDocument.owner_id`).
    pub name: String,
    /// Its values.
    pub array: ArrayRef,
    /// Nulls of the values and of every enclosing struct.
    pub nulls: Option<NullBuffer>,
}

impl LeafColumn {
    /// A reader of the column's values.
    pub fn reader(&self) -> Column<'_> {
        Column::with_parent_nulls(self.array.as_ref(), self.nulls.clone())
    }
}

/// Every leaf column of `batch` in order, structs flattened to dotted paths, except
/// the columns named in `skip`.
pub fn leaf_columns(batch: &RecordBatch, skip: &[&str]) -> Vec<LeafColumn> {
    fn walk(
        name: String,
        array: &ArrayRef,
        parent: Option<&NullBuffer>,
        out: &mut Vec<LeafColumn>,
    ) {
        let nulls = NullBuffer::union(parent, array.logical_nulls().as_ref());
        match array.as_struct_opt() {
            Some(structs) => {
                for (field, child) in structs.fields().iter().zip(structs.columns()) {
                    walk(
                        format!("{name}.{}", field.name()),
                        child,
                        nulls.as_ref(),
                        out,
                    );
                }
            }
            None => out.push(LeafColumn {
                name,
                array: array.clone(),
                nulls,
            }),
        }
    }
    let mut out = Vec::new();
    for (field, array) in batch.schema().fields().iter().zip(batch.columns()) {
        if !skip.contains(&field.name().as_str()) {
            walk(field.name().clone(), array, None, &mut out);
        }
    }
    out
}

/// The top-level columns of `batch` (structs whole), except those named in `skip`.
pub(crate) fn top_level<'a>(
    batch: &'a RecordBatch,
    skip: &'a [&str],
) -> impl Iterator<Item = (&'a str, Column<'a>)> {
    batch
        .schema_ref()
        .fields()
        .iter()
        .zip(batch.columns())
        .filter(|(field, _)| !skip.contains(&field.name().as_str()))
        .map(|(field, array)| (field.name().as_str(), Column::new(array.as_ref())))
}

impl<'a> Column<'a> {
    /// Reads `array` as it is.
    pub fn new(array: &'a dyn Array) -> Column<'a> {
        Column::with_parent_nulls(array, None)
    }

    /// Finds a column of `batch` by name, or a struct field by its dotted path
    /// (`fullDocument.owner_id`). An exact top-level name wins over a path.
    pub fn find(batch: &'a RecordBatch, name: &str) -> Result<Column<'a>, ColumnError> {
        if let Some(array) = batch.column_by_name(name) {
            return Ok(Column::new(array.as_ref()));
        }
        let missing = || ColumnError::Missing(name.to_string());
        let mut parts = name.split('.');
        let first = parts.next().ok_or_else(missing)?;
        let mut array: &ArrayRef = batch.column_by_name(first).ok_or_else(missing)?;
        let mut nulls = array.logical_nulls();
        for part in parts {
            let structs = array.as_struct_opt().ok_or_else(missing)?;
            array = structs.column_by_name(part).ok_or_else(missing)?;
            nulls = NullBuffer::union(nulls.as_ref(), array.logical_nulls().as_ref());
        }
        Ok(Column::with_parent_nulls(array.as_ref(), nulls))
    }

    fn with_parent_nulls(array: &'a dyn Array, parent: Option<NullBuffer>) -> Column<'a> {
        let nulls = NullBuffer::union(parent.as_ref(), array.logical_nulls().as_ref());
        let reader = match array.data_type() {
            DataType::Boolean => Reader::Boolean(array.as_boolean()),
            DataType::Int8 => Reader::Int8(array.as_primitive()),
            DataType::Int16 => Reader::Int16(array.as_primitive()),
            DataType::Int32 => Reader::Int32(array.as_primitive()),
            DataType::Int64 => Reader::Int64(array.as_primitive()),
            DataType::UInt8 => Reader::UInt8(array.as_primitive()),
            DataType::UInt16 => Reader::UInt16(array.as_primitive()),
            DataType::UInt32 => Reader::UInt32(array.as_primitive()),
            DataType::UInt64 => Reader::UInt64(array.as_primitive()),
            DataType::Float32 => Reader::Float32(array.as_primitive()),
            DataType::Float64 => Reader::Float64(array.as_primitive()),
            DataType::Utf8 => Reader::Utf8(array.as_string()),
            DataType::LargeUtf8 => Reader::LargeUtf8(array.as_string()),
            DataType::Utf8View => Reader::Utf8View(array.as_string_view()),
            DataType::Binary => Reader::Binary(array.as_binary()),
            DataType::LargeBinary => Reader::LargeBinary(array.as_binary()),
            DataType::BinaryView => Reader::BinaryView(array.as_binary_view()),
            DataType::Date32 => Reader::Date32(array.as_primitive()),
            DataType::Timestamp(unit, zone) => Reader::Timestamp {
                values: timestamp_values(array, *unit),
                unit: *unit,
                utc: zone.is_some(),
            },
            DataType::Decimal128(_, scale) => Reader::Decimal128(array.as_primitive(), *scale),
            DataType::Struct(_) => Reader::Struct(array.as_struct()),
            _ => Reader::Nested(array),
        };
        Column { reader, nulls }
    }

    /// Whether the value at `row` is null.
    pub fn is_null(&self, row: usize) -> bool {
        self.nulls.as_ref().is_some_and(|n| n.is_null(row))
    }

    /// The value at `row`.
    pub fn value(&self, row: usize) -> Value<'a> {
        if self.is_null(row) {
            return Value::Null;
        }
        match &self.reader {
            Reader::Boolean(a) => Value::Boolean(a.value(row)),
            Reader::Int8(a) => Value::Int(i64::from(a.value(row))),
            Reader::Int16(a) => Value::Int(i64::from(a.value(row))),
            Reader::Int32(a) => Value::Int(i64::from(a.value(row))),
            Reader::Int64(a) => Value::Int(a.value(row)),
            Reader::UInt8(a) => Value::Int(i64::from(a.value(row))),
            Reader::UInt16(a) => Value::Int(i64::from(a.value(row))),
            Reader::UInt32(a) => Value::Int(i64::from(a.value(row))),
            Reader::UInt64(a) => Value::Int(a.value(row) as i64),
            Reader::Float32(a) => Value::Float(f64::from(a.value(row))),
            Reader::Float64(a) => Value::Float(a.value(row)),
            Reader::Utf8(a) => Value::Str(a.value(row)),
            Reader::LargeUtf8(a) => Value::Str(a.value(row)),
            Reader::Utf8View(a) => Value::Str(a.value(row)),
            Reader::Binary(a) => Value::Bytes(a.value(row)),
            Reader::LargeBinary(a) => Value::Bytes(a.value(row)),
            Reader::BinaryView(a) => Value::Bytes(a.value(row)),
            Reader::Date32(a) => Value::Date(a.value(row)),
            Reader::Timestamp { values, unit, utc } => {
                let micros = to_micros(values[row], *unit);
                if *utc {
                    Value::Timestamp(micros)
                } else {
                    Value::TimestampNtz(micros)
                }
            }
            Reader::Decimal128(a, scale) => Value::Decimal(a.value(row), *scale),
            Reader::Struct(a) => Value::Json(struct_json(a, row)),
            Reader::Nested(a) => Value::Json(nested_json(*a, row)),
        }
    }

    /// The value at `row` if it is a string; `None` for null or another type.
    pub fn str(&self, row: usize) -> Option<&'a str> {
        match self.value(row) {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Whether the column holds strings.
    pub fn is_string(&self) -> bool {
        matches!(
            self.reader,
            Reader::Utf8(_) | Reader::LargeUtf8(_) | Reader::Utf8View(_)
        )
    }
}

fn timestamp_values(array: &dyn Array, unit: TimeUnit) -> &[i64] {
    use arrow_array::types::{
        TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
        TimestampSecondType,
    };
    match unit {
        TimeUnit::Second => array.as_primitive::<TimestampSecondType>().values(),
        TimeUnit::Millisecond => array.as_primitive::<TimestampMillisecondType>().values(),
        TimeUnit::Microsecond => array.as_primitive::<TimestampMicrosecondType>().values(),
        TimeUnit::Nanosecond => array.as_primitive::<TimestampNanosecondType>().values(),
    }
}

fn to_micros(value: i64, unit: TimeUnit) -> i64 {
    match unit {
        TimeUnit::Second => value.saturating_mul(1_000_000),
        TimeUnit::Millisecond => value.saturating_mul(1000),
        TimeUnit::Microsecond => value,
        TimeUnit::Nanosecond => value.div_euclid(1000),
    }
}

/// A struct value as a JSON object, null fields left out as Spark's `to_json` does.
fn struct_json(array: &StructArray, row: usize) -> String {
    let mut json = crate::JsonObject::new();
    for (field, child) in array.fields().iter().zip(array.columns()) {
        json = json.field(field.name(), Column::new(child.as_ref()).value(row));
    }
    json.finish()
}

/// A list or map value as JSON; other types as a JSON string of their debug text.
fn nested_json(array: &dyn Array, row: usize) -> String {
    let mut out = String::new();
    match array.data_type() {
        DataType::List(_) | DataType::LargeList(_) => {
            let values = if let Some(list) = array.as_list_opt::<i32>() {
                list.value(row)
            } else {
                array.as_list::<i64>().value(row)
            };
            out.push('[');
            let items = Column::new(values.as_ref());
            for i in 0..values.len() {
                if i > 0 {
                    out.push(',');
                }
                match items.value(i) {
                    Value::Null => out.push_str("null"),
                    value => write_json_value(&mut out, &value),
                }
            }
            out.push(']');
        }
        DataType::Map(..) => {
            let entries = array.as_map().value(row);
            let (keys, values) = (
                Column::new(entries.column(0).as_ref()),
                Column::new(entries.column(1).as_ref()),
            );
            out.push('{');
            for i in 0..entries.len() {
                if i > 0 {
                    out.push(',');
                }
                crate::write_json_string(&mut out, &keys.value(i).to_text().unwrap_or_default());
                out.push(':');
                match values.value(i) {
                    Value::Null => out.push_str("null"),
                    value => write_json_value(&mut out, &value),
                }
            }
            out.push('}');
        }
        other => crate::write_json_string(&mut out, &format!("<{other}>")),
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int32Array, ListArray, StringArray};
    use arrow_schema::{Field, Fields, Schema};

    use super::*;

    fn batch() -> RecordBatch {
        let inner = Fields::from(vec![
            Field::new("owner_id", DataType::Utf8, true),
            Field::new("n", DataType::Int32, true),
        ]);
        let doc = StructArray::new(
            inner.clone(),
            vec![
                Arc::new(StringArray::from(vec![Some("a"), Some("b")])) as ArrayRef,
                Arc::new(Int32Array::from(vec![Some(1), None])),
            ],
            Some(NullBuffer::from(vec![true, false])),
        );
        let tags = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
            Some(vec![Some(1), None]),
            None,
        ]);
        let schema = Schema::new(vec![
            Field::new("doc", DataType::Struct(inner), true),
            Field::new("tags", tags.data_type().clone(), true),
        ]);
        RecordBatch::try_new(Arc::new(schema), vec![Arc::new(doc), Arc::new(tags)]).unwrap()
    }

    #[test]
    fn dotted_paths_reach_struct_fields_and_inherit_struct_nulls() {
        let batch = batch();
        let owner = Column::find(&batch, "doc.owner_id").unwrap();
        assert_eq!(owner.value(0), Value::Str("a"));
        assert_eq!(owner.value(1), Value::Null);
        assert_eq!(
            Column::find(&batch, "doc.nope").err(),
            Some(ColumnError::Missing("doc.nope".into()))
        );
    }

    #[test]
    fn leaf_columns_flatten_structs() {
        let batch = batch();
        let leaves = leaf_columns(&batch, &["tags"]);
        let names: Vec<_> = leaves.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["doc.owner_id", "doc.n"]);
        assert_eq!(leaves[0].reader().value(1), Value::Null);
    }

    #[test]
    fn nested_values_render_as_json() {
        let batch = batch();
        let doc = Column::find(&batch, "doc").unwrap();
        assert_eq!(
            doc.value(0),
            Value::Json(r#"{"owner_id":"a","n":1}"#.into())
        );
        assert_eq!(doc.value(1), Value::Null);
        let tags = Column::find(&batch, "tags").unwrap();
        assert_eq!(tags.value(0), Value::Json("[1,null]".into()));
    }
}

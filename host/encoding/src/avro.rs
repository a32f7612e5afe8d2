//! Avro: schemas derived from Arrow types, and values written in Avro's binary
//! encoding straight from the arrays.
//!
//! Delta's types map to Avro as Spark's `to_avro` maps them: nullable columns become
//! `["null", T]` unions, decimals the `decimal` logical type on bytes, dates `date`,
//! timestamps `timestamp-micros` (`local-timestamp-micros` without a time zone),
//! structs records, arrays arrays, maps with string keys maps (other maps arrays of
//! key-value records).

use std::collections::BTreeSet;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type,
    Int64Type, UInt8Type, UInt16Type, UInt32Type,
};
use arrow_array::{Array, ArrayRef};
use arrow_schema::{DataType, TimeUnit};
use serde_json::{Value as Json, json};

use crate::fields::{self, SourceField};
use sluice_model::helpers::HelperError;

/// Avro record and field names: letters, digits and `_`, not starting with a digit.
pub(crate) fn avro_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// Named types already used in one schema: Avro wants each record name once.
#[derive(Default)]
pub(crate) struct Names(BTreeSet<String>);

impl Names {
    /// `wanted`, or `wanted_2`, `wanted_3`... when it is taken.
    pub(crate) fn claim(&mut self, wanted: &str) -> String {
        let base = avro_name(wanted);
        let mut name = base.clone();
        let mut n = 1;
        while !self.0.insert(name.clone()) {
            n += 1;
            name = format!("{base}_{n}");
        }
        name
    }
}

/// The schema of the top-level record `name` of `fields`, and a writer for its rows.
/// Records nested in it are named by their path (`fullDocument`, `st_inner`), so a
/// column added elsewhere never renames them.
pub(crate) fn record(
    name: &str,
    namespace: &str,
    fields: &[SourceField],
    names: &mut Names,
) -> Result<(Json, Writer), HelperError> {
    nested_record(name, namespace, None, fields, names)
}

/// A record named `name` whose fields nest under `path` (none at the top level).
fn nested_record(
    name: &str,
    namespace: &str,
    path: Option<&str>,
    fields: &[SourceField],
    names: &mut Names,
) -> Result<(Json, Writer), HelperError> {
    let name = names.claim(name);
    let mut schemas = Vec::with_capacity(fields.len());
    let mut writers = Vec::with_capacity(fields.len());
    let mut field_names = BTreeSet::new();
    for field in fields {
        let field_name = avro_name(&field.name);
        if !field_names.insert(field_name.clone()) {
            return Err(HelperError(format!(
                "Two fields are both named `{field_name}` in Avro (names keep only letters, digits and `_`); rename one."
            )));
        }
        let field_path = match path {
            Some(path) => format!("{path}_{}", field.name),
            None => field.name.clone(),
        };
        let (schema, writer) = typed(&field.array, field.nullable, &field_path, names)?;
        let mut entry = json!({"name": field_name, "type": schema});
        if field.nullable {
            entry["default"] = Json::Null;
        }
        schemas.push(entry);
        writers.push(writer);
    }
    let mut schema = json!({"type": "record", "name": name, "fields": schemas});
    if !namespace.is_empty() {
        schema["namespace"] = json!(namespace);
    }
    Ok((schema, Writer::record(writers)))
}

/// The schema and writer of one array, a `["null", T]` union when it is nullable;
/// records in it are named after `name`, its path.
pub(crate) fn typed(
    array: &ArrayRef,
    nullable: bool,
    name: &str,
    names: &mut Names,
) -> Result<(Json, Writer), HelperError> {
    if *array.data_type() == DataType::Null {
        return Ok((json!("null"), Writer::new(array, false, Node::Null)));
    }
    let (schema, node) = plain(array, name, names)?;
    Ok(if nullable {
        (json!(["null", schema]), Writer::new(array, true, node))
    } else {
        (schema, Writer::new(array, false, node))
    })
}

fn plain(array: &ArrayRef, name: &str, names: &mut Names) -> Result<(Json, Node), HelperError> {
    Ok(match array.data_type() {
        DataType::Boolean => (json!("boolean"), Node::Boolean),
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::UInt8 | DataType::UInt16 => {
            (json!("int"), Node::Int)
        }
        DataType::Int64 | DataType::UInt32 => (json!("long"), Node::Long),
        DataType::Float32 => (json!("float"), Node::Float),
        DataType::Float64 => (json!("double"), Node::Double),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => (json!("string"), Node::Str),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
            (json!("bytes"), Node::Bytes)
        }
        DataType::Date32 => (json!({"type": "int", "logicalType": "date"}), Node::Date),
        DataType::Timestamp(unit, zone) => {
            let logical = match zone {
                Some(_) => "timestamp-micros",
                None => "local-timestamp-micros",
            };
            (
                json!({"type": "long", "logicalType": logical}),
                Node::Timestamp(*unit),
            )
        }
        DataType::Decimal128(precision, scale) => (
            json!({"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}),
            Node::Decimal,
        ),
        DataType::Struct(_) => {
            let fields = fields::struct_fields(array);
            let (schema, writer) = nested_record(name, "", Some(name), &fields, names)?;
            (schema, writer.node)
        }
        DataType::List(item) | DataType::LargeList(item) => {
            let items = match array.data_type() {
                DataType::List(_) => array.as_list::<i32>().values().clone(),
                _ => array.as_list::<i64>().values().clone(),
            };
            let (schema, writer) = typed(&items, item.is_nullable(), name, names)?;
            (
                json!({"type": "array", "items": schema}),
                Node::Array(Box::new(writer)),
            )
        }
        DataType::Map(_, _) => {
            let map = array.as_map();
            let keys = map.keys().clone();
            let values = map.values().clone();
            let values_nullable = map.entries().fields()[1].is_nullable();
            let (value_schema, value_writer) =
                typed(&values, values_nullable, &format!("{name}_value"), names)?;
            if matches!(
                keys.data_type(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            ) {
                (
                    json!({"type": "map", "values": value_schema}),
                    Node::Map(
                        Box::new(Writer::new(&keys, false, Node::Str)),
                        Box::new(value_writer),
                    ),
                )
            } else {
                let (key_schema, key_writer) = typed(&keys, false, &format!("{name}_key"), names)?;
                let entry = names.claim(&format!("{name}_entry"));
                (
                    json!({"type": "array", "items": {"type": "record", "name": entry, "fields": [
                        {"name": "key", "type": key_schema},
                        {"name": "value", "type": value_schema},
                    ]}}),
                    Node::Map(Box::new(key_writer), Box::new(value_writer)),
                )
            }
        }
        other => {
            return Err(HelperError(format!(
                "Column `{name}` has Arrow type {other}, which the Avro encoding does not support."
            )));
        }
    })
}

/// Writes one array's values in Avro binary.
pub(crate) struct Writer {
    array: ArrayRef,
    nullable: bool,
    node: Node,
}

enum Node {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Str,
    Bytes,
    Date,
    Timestamp(TimeUnit),
    Decimal,
    Record(Vec<Writer>),
    Array(Box<Writer>),
    /// Keys and values; an Avro map (string keys) and an array of key-value records
    /// are written alike: blocks of key then value.
    Map(Box<Writer>, Box<Writer>),
}

impl Writer {
    fn new(array: &ArrayRef, nullable: bool, node: Node) -> Writer {
        Writer {
            array: array.clone(),
            nullable,
            node,
        }
    }

    fn record(fields: Vec<Writer>) -> Writer {
        let empty: ArrayRef = std::sync::Arc::new(arrow_array::NullArray::new(0));
        Writer::new(&empty, false, Node::Record(fields))
    }

    /// Writes the top-level record's fields for `row`.
    pub(crate) fn write_row(&self, row: usize, out: &mut Vec<u8>) {
        if let Node::Record(fields) = &self.node {
            for field in fields {
                field.write(row, out);
            }
        }
    }

    /// Writes the value at `row`.
    pub(crate) fn write(&self, row: usize, out: &mut Vec<u8>) {
        if self.nullable {
            if self.array.is_null(row) {
                write_long(out, 0);
                return;
            }
            write_long(out, 1);
        }
        let array = &self.array;
        match &self.node {
            Node::Null => {}
            Node::Boolean => out.push(u8::from(array.as_boolean().value(row))),
            Node::Int => write_long(out, int_value(array, row)),
            Node::Long => write_long(out, int_value(array, row)),
            Node::Float => {
                out.extend_from_slice(&array.as_primitive::<Float32Type>().value(row).to_le_bytes())
            }
            Node::Double => {
                out.extend_from_slice(&array.as_primitive::<Float64Type>().value(row).to_le_bytes())
            }
            Node::Str => write_bytes(out, string_value(array, row).as_bytes()),
            Node::Bytes => write_bytes(out, binary_value(array, row)),
            Node::Date => write_long(
                out,
                i64::from(array.as_primitive::<Date32Type>().value(row)),
            ),
            Node::Timestamp(unit) => write_long(out, timestamp_micros(array, *unit, row)),
            Node::Decimal => {
                let unscaled = array.as_primitive::<Decimal128Type>().value(row);
                let (bytes, start) = minimal_twos_complement(unscaled);
                write_bytes(out, &bytes[start..]);
            }
            Node::Record(fields) => {
                for field in fields {
                    field.write(row, out);
                }
            }
            Node::Array(items) => {
                // One block of every item, then the empty block that ends the array.
                let range = fields::list_range(array, row);
                if !range.is_empty() {
                    write_long(out, range.len() as i64);
                    for item in range {
                        items.write(item, out);
                    }
                }
                write_long(out, 0);
            }
            Node::Map(keys, values) => {
                let map = array.as_map();
                let offsets = map.value_offsets();
                let range = offsets[row] as usize..offsets[row + 1] as usize;
                if !range.is_empty() {
                    write_long(out, range.len() as i64);
                    for entry in range {
                        keys.write(entry, out);
                        values.write(entry, out);
                    }
                }
                write_long(out, 0);
            }
        }
    }
}

fn int_value(array: &ArrayRef, row: usize) -> i64 {
    match array.data_type() {
        DataType::Int8 => i64::from(array.as_primitive::<Int8Type>().value(row)),
        DataType::Int16 => i64::from(array.as_primitive::<Int16Type>().value(row)),
        DataType::Int32 => i64::from(array.as_primitive::<Int32Type>().value(row)),
        DataType::UInt8 => i64::from(array.as_primitive::<UInt8Type>().value(row)),
        DataType::UInt16 => i64::from(array.as_primitive::<UInt16Type>().value(row)),
        DataType::UInt32 => i64::from(array.as_primitive::<UInt32Type>().value(row)),
        _ => array.as_primitive::<Int64Type>().value(row),
    }
}

fn string_value(array: &ArrayRef, row: usize) -> &str {
    match array.data_type() {
        DataType::LargeUtf8 => array.as_string::<i64>().value(row),
        DataType::Utf8View => array.as_string_view().value(row),
        _ => array.as_string::<i32>().value(row),
    }
}

fn binary_value(array: &ArrayRef, row: usize) -> &[u8] {
    match array.data_type() {
        DataType::LargeBinary => array.as_binary::<i64>().value(row),
        DataType::BinaryView => array.as_binary_view().value(row),
        _ => array.as_binary::<i32>().value(row),
    }
}

fn timestamp_micros(array: &ArrayRef, unit: TimeUnit, row: usize) -> i64 {
    use arrow_array::types::{
        TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
        TimestampSecondType,
    };
    match unit {
        TimeUnit::Second => array
            .as_primitive::<TimestampSecondType>()
            .value(row)
            .saturating_mul(1_000_000),
        TimeUnit::Millisecond => array
            .as_primitive::<TimestampMillisecondType>()
            .value(row)
            .saturating_mul(1_000),
        TimeUnit::Microsecond => array.as_primitive::<TimestampMicrosecondType>().value(row),
        TimeUnit::Nanosecond => array
            .as_primitive::<TimestampNanosecondType>()
            .value(row)
            .div_euclid(1_000),
    }
}

/// Avro's `long`: zig-zag, then 7 bits a byte, low bits first.
pub(crate) fn write_long(out: &mut Vec<u8>, value: i64) {
    let mut n = ((value << 1) ^ (value >> 63)) as u64;
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Avro's `bytes` and `string`: the length, then the bytes.
pub(crate) fn write_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    write_long(out, bytes.len() as i64);
    out.extend_from_slice(bytes);
}

/// The big-endian two's-complement bytes of `value`, as few as keep its sign: the
/// whole buffer and where they start in it.
fn minimal_twos_complement(value: i128) -> ([u8; 16], usize) {
    let bytes = value.to_be_bytes();
    let mut start = 0;
    while start < 15 {
        let (this, next) = (bytes[start], bytes[start + 1]);
        let redundant = (this == 0x00 && next & 0x80 == 0) || (this == 0xff && next & 0x80 != 0);
        if !redundant {
            break;
        }
        start += 1;
    }
    (bytes, start)
}

//! Avro: schemas derived from Arrow types, and values written in Avro's binary
//! encoding straight from the arrays.
//!
//! Delta's types map to Avro as Spark's `to_avro` maps them: nullable columns become
//! `["null", T]` unions, decimals the `decimal` logical type on bytes, dates `date`,
//! timestamps `timestamp-micros` (`local-timestamp-micros` without a time zone),
//! structs records, arrays arrays, maps with string keys maps (other maps arrays of
//! key-value records).

use std::collections::{BTreeSet, HashMap};

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type,
    Int64Type, UInt8Type, UInt16Type, UInt32Type,
};
use arrow_array::{Array, ArrayRef};
use arrow_schema::{DataType, TimeUnit};
use serde_json::{Value as Json, json};

use crate::fields::{self, SourceField};
use crate::names::{avro_name, full_name};
use crate::wire::{write_bytes, write_long};
use sluice_model::helpers::HelperError;
use sluice_model::{Column, Value};

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
    /// For a union: the branch of null (when it has one) and of the value.
    union: Option<(Option<i64>, i64)>,
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
    /// A field of a supplied schema the record lacks: always the union's null.
    Absent,
    /// Any value as Spark casts it to text, into a `string`.
    Text,
    /// Any number into a `double` (`single`: a `float`).
    Number {
        single: bool,
    },
    /// A timestamp into `timestamp-millis`.
    TimestampMillis(TimeUnit),
}

impl Writer {
    fn new(array: &ArrayRef, nullable: bool, node: Node) -> Writer {
        Writer {
            array: array.clone(),
            union: nullable.then_some((Some(0), 1)),
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
        if let Some((null, value)) = self.union {
            // A null where the union has none was refused before writing began.
            if let Some(null) = null
                && (matches!(self.node, Node::Absent) || self.array.is_null(row))
            {
                write_long(out, null);
                return;
            }
            write_long(out, value);
        }
        let array = &self.array;
        match &self.node {
            Node::Null | Node::Absent => {}
            Node::Text => {
                let text = Column::new(array.as_ref()).value(row).to_text();
                write_bytes(out, text.unwrap_or_default().as_bytes());
            }
            Node::Number { single } => {
                let number = match Column::new(array.as_ref()).value(row) {
                    Value::Float(f) => f,
                    Value::Int(i) => i as f64,
                    _ => 0.0,
                };
                match single {
                    true => out.extend_from_slice(&(number as f32).to_le_bytes()),
                    false => out.extend_from_slice(&number.to_le_bytes()),
                }
            }
            Node::TimestampMillis(unit) => {
                write_long(out, timestamp_micros(array, *unit, row).div_euclid(1000))
            }
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

/// A writer of `fields` with the supplied record schema `schema`: each schema field takes
/// the record field of its name (a field the record lacks must allow null, and is
/// null); record fields the schema lacks are left out.
pub(crate) fn supplied(schema: &Json, fields: &[SourceField]) -> Result<Writer, HelperError> {
    let schema = &inline_references(schema, "", &mut HashMap::new(), &mut Vec::new());
    let writers = supplied_fields(schema, "", |name| {
        fields
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.array.clone())
    })?;
    Ok(Writer::record(writers))
}

/// `schema` with each reference to a named type it defined earlier replaced by the
/// definition, so that writers need not resolve names. A reference inside its own
/// definition (a recursive type) stays a name.
fn inline_references(
    schema: &Json,
    namespace: &str,
    defined: &mut HashMap<String, Json>,
    open: &mut Vec<String>,
) -> Json {
    const PRIMITIVES: [&str; 8] = [
        "null", "boolean", "int", "long", "float", "double", "bytes", "string",
    ];
    match schema {
        Json::String(name) if !PRIMITIVES.contains(&name.as_str()) => {
            let full = match name.contains('.') {
                true => name.clone(),
                false => full_name(namespace, name),
            };
            match defined.get(&full).or_else(|| defined.get(name)) {
                Some(definition) if !open.contains(&full) => definition.clone(),
                _ => schema.clone(),
            }
        }
        Json::Array(branches) => Json::Array(
            branches
                .iter()
                .map(|b| inline_references(b, namespace, defined, open))
                .collect(),
        ),
        Json::Object(object) => {
            let mut copy = object.clone();
            match object.get("type") {
                Some(Json::String(kind))
                    if matches!(kind.as_str(), "record" | "enum" | "fixed") =>
                {
                    let name = object
                        .get("name")
                        .and_then(Json::as_str)
                        .unwrap_or_default();
                    let full = match (name.contains('.'), object.get("namespace")) {
                        (true, _) => name.to_string(),
                        (false, Some(Json::String(own))) => full_name(own, name),
                        (false, _) => full_name(namespace, name),
                    };
                    let own = full.rsplit_once('.').map_or("", |(ns, _)| ns).to_string();
                    open.push(full.clone());
                    if let Some(Json::Array(fields)) = copy.get_mut("fields") {
                        for field in fields.iter_mut() {
                            let inlined = inline_references(&field["type"], &own, defined, open);
                            field["type"] = inlined;
                        }
                    }
                    open.pop();
                    defined.insert(full, Json::Object(copy.clone()));
                }
                Some(Json::String(kind)) if kind == "array" || kind == "map" => {
                    let part = if kind == "array" { "items" } else { "values" };
                    if let Some(inner) = object.get(part) {
                        let inlined = inline_references(inner, namespace, defined, open);
                        copy.insert(part.to_string(), inlined);
                    }
                }
                // `{"type": "Address"}`: a reference in an object.
                Some(reference @ Json::String(_)) => {
                    let inlined = inline_references(reference, namespace, defined, open);
                    if inlined.is_object() {
                        return inlined;
                    }
                }
                _ => {}
            }
            Json::Object(copy)
        }
        other => other.clone(),
    }
}

fn supplied_fields(
    record: &Json,
    path: &str,
    find: impl Fn(&str) -> Option<ArrayRef>,
) -> Result<Vec<Writer>, HelperError> {
    let mut writers = Vec::new();
    for field in record["fields"].as_array().into_iter().flatten() {
        let name = field["name"].as_str().unwrap_or_default();
        let field_path = if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}.{name}")
        };
        let schema = &field["type"];
        writers.push(match find(name) {
            Some(array) if *array.data_type() != DataType::Null => {
                supplied_writer(schema, &array, &field_path)?
            }
            _ => {
                let Some(null) = null_branch(schema) else {
                    return Err(HelperError(format!(
                        "Field `{field_path}` of the supplied Avro schema has no value in the record, and its type does not allow null."
                    )));
                };
                let empty: ArrayRef = std::sync::Arc::new(arrow_array::NullArray::new(0));
                Writer {
                    array: empty,
                    union: Some((Some(null), null)),
                    node: Node::Absent,
                }
            }
        });
    }
    Ok(writers)
}

/// The full name of an Avro schema: a named type's `namespace.name` (its name alone when
/// it is dotted, or has no namespace of its own), a primitive's type.
pub(crate) fn full_name_of(schema: &Json) -> String {
    match schema {
        Json::String(name) => name.clone(),
        Json::Object(object) => {
            let name = object
                .get("name")
                .or_else(|| object.get("type"))
                .and_then(Json::as_str)
                .unwrap_or_default();
            match object.get("namespace").and_then(Json::as_str) {
                Some(namespace) if !name.contains('.') => full_name(namespace, name),
                _ => name.to_string(),
            }
        }
        _ => String::new(),
    }
}

/// The index of `null` in a union schema.
fn null_branch(schema: &Json) -> Option<i64> {
    schema
        .as_array()?
        .iter()
        .position(|branch| branch == "null")
        .map(|i| i as i64)
}

/// The writer of `array` into `schema` (a union with null, or one type).
fn supplied_writer(schema: &Json, array: &ArrayRef, path: &str) -> Result<Writer, HelperError> {
    if let Some(branches) = schema.as_array() {
        let null = null_branch(schema);
        // The first branch that takes the value as it is, else the first that takes it
        // as text, else the first branch's refusal.
        let mut text = None;
        let mut refusal = None;
        for (index, branch) in branches.iter().enumerate().filter(|(_, b)| *b != "null") {
            match supplied_node(branch, array, path) {
                Ok(Node::Text) => {
                    text.get_or_insert(index);
                }
                Ok(node) => {
                    return Ok(Writer {
                        array: array.clone(),
                        union: Some((null, index as i64)),
                        node,
                    });
                }
                Err(e) => {
                    refusal.get_or_insert(e);
                }
            }
        }
        return match (text, refusal) {
            (Some(index), _) => Ok(Writer {
                array: array.clone(),
                union: Some((null, index as i64)),
                node: Node::Text,
            }),
            (None, Some(refusal)) => Err(refusal),
            (None, None) => Err(HelperError(format!(
                "Field `{path}` of the supplied Avro schema is only null."
            ))),
        };
    }
    Ok(Writer {
        array: array.clone(),
        union: None,
        node: supplied_node(schema, array, path)?,
    })
}

fn supplied_node(schema: &Json, array: &ArrayRef, path: &str) -> Result<Node, HelperError> {
    let data_type = array.data_type();
    let (kind, logical) = match schema {
        Json::String(kind) => (kind.as_str(), None),
        Json::Object(object) => (
            object
                .get("type")
                .and_then(Json::as_str)
                .unwrap_or_default(),
            object.get("logicalType").and_then(Json::as_str),
        ),
        _ => ("", None),
    };
    let mismatch = || {
        HelperError(format!(
            "Field `{path}` holds Arrow type {data_type}, which its type in the supplied Avro schema ({schema}) cannot take."
        ))
    };
    Ok(match (kind, logical, data_type) {
        ("int", Some("date"), DataType::Date32) => Node::Date,
        (
            "long",
            Some("timestamp-micros" | "local-timestamp-micros"),
            DataType::Timestamp(unit, _),
        ) => Node::Timestamp(*unit),
        (
            "long",
            Some("timestamp-millis" | "local-timestamp-millis"),
            DataType::Timestamp(unit, _),
        ) => Node::TimestampMillis(*unit),
        ("bytes", Some("decimal"), DataType::Decimal128(precision, scale)) => {
            if schema["scale"].as_i64().unwrap_or(0) != i64::from(*scale) {
                return Err(HelperError(format!(
                    "Field `{path}` is a decimal of scale {scale}, and its type in the supplied Avro schema has scale {}.",
                    schema["scale"]
                )));
            }
            if schema["precision"].as_i64().unwrap_or(0) < i64::from(*precision) {
                return Err(HelperError(format!(
                    "Field `{path}` is a decimal of precision {precision}, more than its type in the supplied Avro schema holds ({}).",
                    schema["precision"]
                )));
            }
            Node::Decimal
        }
        ("boolean", _, DataType::Boolean) => Node::Boolean,
        // Wider integers could overflow an Avro int, which readers refuse.
        (
            "int",
            None,
            DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::UInt8 | DataType::UInt16,
        ) => Node::Int,
        ("long", None, t) if t.is_integer() => Node::Long,
        // Only what the type holds exactly: a float has 24 bits of mantissa, a double 53.
        (
            "float",
            _,
            DataType::Float32
            | DataType::Int8
            | DataType::Int16
            | DataType::UInt8
            | DataType::UInt16,
        ) => Node::Number { single: true },
        (
            "double",
            _,
            DataType::Float32
            | DataType::Float64
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32,
        ) => Node::Number { single: false },
        ("string", _, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) => Node::Str,
        ("string", _, _) => Node::Text,
        ("bytes", None, DataType::Binary | DataType::LargeBinary | DataType::BinaryView) => {
            Node::Bytes
        }
        ("record", _, DataType::Struct(_)) => {
            let children = fields::struct_fields(array);
            Node::Record(supplied_fields(schema, path, |name| {
                children
                    .iter()
                    .find(|c| c.name == name)
                    .map(|c| c.array.clone())
            })?)
        }
        ("array", _, DataType::List(_) | DataType::LargeList(_)) => {
            let items = match data_type {
                DataType::List(_) => array.as_list::<i32>().values().clone(),
                _ => array.as_list::<i64>().values().clone(),
            };
            Node::Array(Box::new(supplied_writer(&schema["items"], &items, path)?))
        }
        ("map", _, DataType::Map(..)) => {
            let map = array.as_map();
            if !matches!(
                map.keys().data_type(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            ) {
                return Err(mismatch());
            }
            Node::Map(
                Box::new(Writer::new(map.keys(), false, Node::Str)),
                Box::new(supplied_writer(&schema["values"], map.values(), path)?),
            )
        }
        _ => return Err(mismatch()),
    })
}

/// Where a value is null though its Avro type allows none.
pub(crate) struct NullAt {
    /// Positions of the fields from the record to the null one.
    pub path: Vec<usize>,
    /// The batch row.
    pub row: u32,
    /// Whether the null is an item (or map value) of the field rather than the field.
    pub item: bool,
}

impl Writer {
    fn allows_null(&self) -> bool {
        self.union.is_some_and(|(null, _)| null.is_some()) || matches!(self.node, Node::Null)
    }

    /// The first of `rows` where a field whose type does not allow null is null, in a
    /// record, a record nested in it, or among the items of an array or map field.
    pub(crate) fn null_in_non_null(&self, rows: &[u32]) -> Option<NullAt> {
        let Node::Record(fields) = &self.node else {
            return None;
        };
        fields.iter().enumerate().find_map(|(index, field)| {
            let here = (!field.allows_null() && field.array.null_count() > 0)
                .then(|| rows.iter().find(|&&row| field.array.is_null(row as usize)))
                .flatten()
                .map(|&row| NullAt {
                    path: vec![index],
                    row,
                    item: false,
                });
            // Nested values belong to the rows where the field is not null.
            let present = || {
                rows.iter()
                    .copied()
                    .filter(|&row| !field.array.is_null(row as usize))
            };
            let in_items = || {
                let (items, ranges): (&Writer, Vec<(u32, std::ops::Range<usize>)>) =
                    match &field.node {
                        Node::Array(items) => (
                            items,
                            present()
                                .map(|row| (row, fields::list_range(&field.array, row as usize)))
                                .collect(),
                        ),
                        Node::Map(_, values) => {
                            let offsets = field.array.as_map().value_offsets();
                            let range = |row: u32| {
                                offsets[row as usize] as usize..offsets[row as usize + 1] as usize
                            };
                            (values, present().map(|row| (row, range(row))).collect())
                        }
                        _ => return None,
                    };
                if items.allows_null() || items.array.null_count() == 0 {
                    return None;
                }
                ranges
                    .into_iter()
                    .find(|(_, range)| range.clone().any(|i| items.array.is_null(i)))
                    .map(|(row, _)| NullAt {
                        path: vec![index],
                        row,
                        item: true,
                    })
            };
            here.or_else(in_items).or_else(|| {
                let present: Vec<u32> = present().collect();
                field.null_in_non_null(&present).map(|mut at| {
                    at.path.insert(0, index);
                    at
                })
            })
        })
    }
}

/// The dotted name of the field at `path` (positions) in the record schema `schema`.
pub(crate) fn field_name(schema: &Json, path: &[usize]) -> String {
    let mut names = Vec::new();
    let mut record = schema;
    for &index in path {
        let field = &record["fields"][index];
        names.push(field["name"].as_str().unwrap_or_default().to_string());
        // The next record is the field's type, or the non-null branch of its union.
        record = match &field["type"] {
            Json::Array(branches) => branches
                .iter()
                .find(|b| *b != "null")
                .unwrap_or(&Json::Null),
            other => other,
        };
    }
    names.join(".")
}

//! JSON Schema (draft-07) derived from Arrow types, describing the JSON the helpers
//! write: nulls are left out of objects, so only columns that are never null are
//! required; decimals are numbers, binary base64 text, dates and timestamps text.
//! Objects are closed (`additionalProperties: false`), so a column added to the table
//! is a new optional property, which every compatibility level accepts.

use arrow_schema::{DataType, Field};
use serde_json::{Value as Json, json};

use crate::fields::SourceField;

/// The schema of an object of `fields`, titled `title`.
pub(crate) fn object(title: &str, fields: &[SourceField]) -> Json {
    let mut schema = object_of(
        fields
            .iter()
            .map(|f| (f.name.as_str(), f.array.data_type(), f.nullable)),
    );
    schema["$schema"] = json!("http://json-schema.org/draft-07/schema#");
    schema["title"] = json!(title);
    schema
}

fn object_of<'a>(fields: impl Iterator<Item = (&'a str, &'a DataType, bool)>) -> Json {
    let mut properties = serde_json::Map::new();
    let mut required = Vec::new();
    for (name, data_type, nullable) in fields {
        properties.insert(name.to_string(), typed(data_type, nullable));
        if !nullable {
            required.push(json!(name));
        }
    }
    // Closed (no other properties): a new optional property is then a compatible
    // change for Confluent's BACKWARD rules, where an open object's is not.
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn typed(data_type: &DataType, nullable: bool) -> Json {
    let schema = plain(data_type);
    if nullable && *data_type != DataType::Null {
        json!({"oneOf": [{"type": "null"}, schema]})
    } else {
        schema
    }
}

fn plain(data_type: &DataType) -> Json {
    match data_type {
        DataType::Null => json!({"type": "null"}),
        DataType::Boolean => json!({"type": "boolean"}),
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64 => json!({"type": "integer"}),
        // Spark writes NaN and the infinities as strings.
        DataType::Float32 | DataType::Float64 => json!({"oneOf": [
            {"type": "number"},
            {"enum": ["NaN", "Infinity", "-Infinity"]},
        ]}),
        DataType::Decimal128(..) | DataType::Decimal256(..) => json!({"type": "number"}),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => json!({"type": "string"}),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
            json!({"type": "string", "contentEncoding": "base64"})
        }
        DataType::Date32 | DataType::Date64 => json!({"type": "string", "format": "date"}),
        DataType::Timestamp(_, Some(_)) => json!({"type": "string", "format": "date-time"}),
        DataType::Timestamp(_, None) => json!({"type": "string"}),
        DataType::Struct(fields) => {
            object_of(fields.iter().map(|f: &std::sync::Arc<Field>| {
                (f.name().as_str(), f.data_type(), f.is_nullable())
            }))
        }
        DataType::List(item) | DataType::LargeList(item) => {
            json!({"type": "array", "items": typed(item.data_type(), item.is_nullable())})
        }
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => {
                json!({"type": "object", "additionalProperties": typed(kv[1].data_type(), kv[1].is_nullable())})
            }
            _ => json!({"type": "object"}),
        },
        _ => json!({}),
    }
}

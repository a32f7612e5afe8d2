//! JSON Schema (draft-07) derived from Arrow types, describing the JSON the helpers
//! write: nulls are left out of objects, so only columns that are never null are
//! required; decimals are numbers, binary base64 text, dates and timestamps text.
//! Objects are closed (`additionalProperties: false`), so a column added to the table
//! is a new optional property, which every compatibility level accepts.

use arrow_schema::{DataType, Field};
use serde_json::{Value as Json, json};

use sluice_model::helpers::HelperError;

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

/// Checks that the JSON written for `fields` at `rows` fits a supplied object schema, at
/// its top level: every field is a property (or the object is open), each property's
/// `type` admits the field's, and every required property has a value in every row.
/// Plain values leave nulls out; Debezium's images write them (`nulls_written`), so
/// there a property must admit `null` where the field has one. Deeper checks are left
/// to the schema's readers.
pub(crate) fn check_supplied(
    schema: &Json,
    fields: &[SourceField],
    rows: &[u32],
    nulls_written: bool,
) -> Result<(), HelperError> {
    let properties = schema["properties"].as_object();
    let closed = schema["additionalProperties"] == json!(false);
    // The first of `rows` where `field` is null (a null-typed array is all nulls).
    let first_null = |field: &SourceField| {
        let nulls = field.array.logical_nulls();
        rows.iter()
            .copied()
            .find(|&row| nulls.as_ref().is_some_and(|n| n.is_null(row as usize)))
    };
    for field in fields {
        let name = field.name.as_str();
        let Some(property) = properties.and_then(|p| p.get(name)) else {
            if closed {
                return Err(HelperError(format!(
                    "Field `{name}` is not a property of the supplied JSON Schema, which allows no others (additionalProperties is false); add it to the schema or leave it out of the record."
                )));
            }
            continue;
        };
        let allowed = allowed_types(property);
        if nulls_written
            && !allowed.is_empty()
            && !allowed.iter().any(|t| t == "null")
            && let Some(row) = first_null(field)
        {
            return Err(HelperError(format!(
                "Field `{name}` is null in row {row}, which Debezium's images write as null, and its property in the supplied JSON Schema ({property}) does not admit null; add \"null\" to its type."
            )));
        }
        let written = plain(field.array.data_type());
        let Some(written) = written["type"]
            .as_str()
            .or_else(|| written["oneOf"][0]["type"].as_str())
        else {
            continue;
        };
        // An all-null field is never written.
        if written == "null" {
            continue;
        }
        let fits = allowed.is_empty()
            || allowed
                .iter()
                .any(|t| t == written || (t == "number" && written == "integer"));
        if !fits {
            return Err(HelperError(format!(
                "Field `{name}` is written as a JSON {written}, which its property in the supplied JSON Schema ({property}) does not allow."
            )));
        }
    }
    for required in schema["required"].as_array().into_iter().flatten() {
        let name = required.as_str().unwrap_or_default();
        let Some(field) = fields.iter().find(|f| f.name == name) else {
            return Err(HelperError(format!(
                "The supplied JSON Schema requires property `{name}`, which the record does not have; add the field to the record or make it optional in the schema."
            )));
        };
        if nulls_written {
            continue;
        }
        if let Some(row) = first_null(field) {
            return Err(HelperError(format!(
                "Field `{name}` is null in row {row}, and the supplied JSON Schema requires it (nulls are left out of the JSON); make it optional in the schema."
            )));
        }
    }
    Ok(())
}

/// The JSON types a property admits: its `type` (one or a list), or those of its
/// `oneOf`/`anyOf` branches; empty when it says nothing of types (any value).
fn allowed_types(property: &Json) -> Vec<String> {
    match &property["type"] {
        Json::String(one) => vec![one.clone()],
        Json::Array(many) => many
            .iter()
            .filter_map(Json::as_str)
            .map(str::to_string)
            .collect(),
        _ => {
            let mut types = Vec::new();
            let branches = ["oneOf", "anyOf"]
                .iter()
                .filter_map(|k| property[*k].as_array())
                .flatten();
            for branch in branches {
                let admitted = allowed_types(branch);
                // A branch that says nothing of types admits any value.
                if admitted.is_empty() {
                    return Vec::new();
                }
                types.extend(admitted);
            }
            types
        }
    }
}

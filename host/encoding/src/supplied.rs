//! Schemas users supply instead of the derived ones: an Avro record schema (`.avsc`) or
//! a JSON Schema of an object, read when the pipeline's config is.

use std::path::Path;

use serde_json::Value as Json;

use crate::names::full_name;

/// A value schema the user supplies, registered as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SuppliedSchema {
    /// The schema as the registry gets it (compact JSON).
    pub text: String,
    /// The parsed schema.
    pub json: Json,
    /// The record's full name (a JSON Schema's title); record-name subjects are named
    /// after it. `None` for a JSON Schema without a title.
    pub name: Option<String>,
}

impl SuppliedSchema {
    /// Reads the `.avsc` file at `path`: a JSON record schema.
    pub fn read_avro(path: &Path) -> Result<SuppliedSchema, String> {
        let shown = path.display();
        let json = read_json(path, "Avro schema")?;
        if json["type"] != "record" || !json["fields"].is_array() {
            return Err(format!(
                "the Avro schema {shown} must be a record (\"type\": \"record\" with \"fields\")"
            ));
        }
        let name = match (json["namespace"].as_str(), json["name"].as_str()) {
            (_, None) => return Err(format!("the Avro schema {shown} has no record name")),
            (Some(namespace), Some(name)) if !name.contains('.') => full_name(namespace, name),
            (_, Some(name)) => name.to_string(),
        };
        Ok(SuppliedSchema {
            text: json.to_string(),
            json,
            name: Some(name),
        })
    }

    /// Reads the JSON Schema file at `path`: the schema of an object
    /// (`"type": "object"`).
    pub fn read_json_schema(path: &Path) -> Result<SuppliedSchema, String> {
        let json = read_json(path, "JSON Schema")?;
        if json["type"] != "object" {
            return Err(format!(
                "the JSON Schema {} must describe an object (\"type\": \"object\"): the records' values are objects",
                path.display()
            ));
        }
        Ok(SuppliedSchema {
            text: json.to_string(),
            name: json["title"].as_str().map(str::to_string),
            json,
        })
    }
}

fn read_json(path: &Path, what: &str) -> Result<Json, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("the {what} {shown} cannot be read: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("the {what} {shown} is not JSON: {e}"))
}

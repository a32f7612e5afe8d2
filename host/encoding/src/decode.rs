//! The helpers' framed bytes read back as JSON, for people (`sluice preview`): a key or
//! value decoded with the schema it was written with, values rendered as the `json`
//! encoding renders them (Spark's `to_json`).

use std::collections::HashMap;

use prost_reflect::{DynamicMessage, SerializeOptions};
use serde_json::{Map, Value as Json};
use sluice_model::{Value, write_json_value};

use crate::framing::{FRAME_LEN, SchemaKind, WriterSchema};
use crate::protobuf::ProtobufSchema;

/// Decodes `framed` (Confluent's 5-byte header, then the payload) written with
/// `schema`; Protobuf payloads need the message they were written as.
pub fn decode(
    schema: &WriterSchema,
    framed: &[u8],
    protobuf: Option<&ProtobufSchema>,
) -> Result<Json, String> {
    let payload = framed
        .get(FRAME_LEN..)
        .ok_or_else(|| "the bytes are shorter than the 5-byte header".to_string())?;
    match schema.kind {
        SchemaKind::Json => read_json(payload),
        SchemaKind::Avro => {
            let parsed: Json = serde_json::from_str(&schema.text)
                .map_err(|e| format!("the Avro schema is not JSON: {e}"))?;
            read_avro(&parsed, payload)
        }
        SchemaKind::Protobuf => {
            let message = skip_message_indexes(payload)?;
            match protobuf {
                Some(own) if own.text == schema.text => read_protobuf(own, message),
                // A module's own .proto: compiled from the text it registers.
                _ => read_protobuf(
                    &ProtobufSchema::from_text(&schema.text, Some(&schema.name))?,
                    message,
                ),
            }
        }
    }
}

/// A JSON payload.
pub(crate) fn read_json(payload: &[u8]) -> Result<Json, String> {
    serde_json::from_slice(payload).map_err(|e| format!("the value is not JSON: {e}"))
}

/// An Avro payload read by its parsed schema, every byte used.
pub(crate) fn read_avro(schema: &Json, payload: &[u8]) -> Result<Json, String> {
    let mut reader = AvroReader::new(payload);
    reader.learn(schema, "");
    let value = reader.read(schema, "")?;
    match reader.at == payload.len() {
        true => Ok(value),
        false => Err(format!(
            "{} bytes are left after the Avro value",
            payload.len() - reader.at
        )),
    }
}

/// A Protobuf message (after the message indexes) as JSON with .proto field names.
pub(crate) fn read_protobuf(schema: &ProtobufSchema, message: &[u8]) -> Result<Json, String> {
    let decoded = DynamicMessage::decode(schema.message.clone(), message)
        .map_err(|e| format!("the value is not a {}: {e}", schema.message.full_name()))?;
    decoded
        .serialize_with_options(
            serde_json::value::Serializer,
            &SerializeOptions::new().use_proto_field_name(true),
        )
        .map_err(|e| e.to_string())
}

/// The payload after Confluent's message indexes (a count, then that many indexes, all
/// zig-zag varints; the single byte 0 for the first message).
pub(crate) fn skip_message_indexes(payload: &[u8]) -> Result<&[u8], String> {
    let mut reader = AvroReader::new(payload);
    let count = reader.long()?;
    for _ in 0..count {
        reader.long()?;
    }
    Ok(&payload[reader.at..])
}

/// How deep schemas may nest while reading: a recursive type with hostile bytes would
/// otherwise recurse until the stack runs out.
const MAX_DEPTH: usize = 64;

/// Reads Avro binary by its schema.
struct AvroReader<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Each named type by full name, with the namespace it was defined in.
    names: HashMap<String, (Json, String)>,
    depth: usize,
}

/// A named type's full name and the namespace its own fields are in.
fn full_and_namespace(object: &Map<String, Json>, enclosing: &str) -> (String, String) {
    let name = object
        .get("name")
        .and_then(Json::as_str)
        .unwrap_or_default();
    if let Some((namespace, _)) = name.rsplit_once('.') {
        return (name.to_string(), namespace.to_string());
    }
    let namespace = object
        .get("namespace")
        .and_then(Json::as_str)
        .unwrap_or(enclosing);
    (
        crate::format::full_name(namespace, name),
        namespace.to_string(),
    )
}

impl<'a> AvroReader<'a> {
    fn new(bytes: &'a [u8]) -> AvroReader<'a> {
        AvroReader {
            bytes,
            at: 0,
            names: HashMap::new(),
            depth: 0,
        }
    }

    /// Remembers every named type `schema` defines, also those the bytes may never
    /// pass through (a null `before` defines the record `after` names).
    fn learn(&mut self, schema: &Json, namespace: &str) {
        match schema {
            Json::Array(branches) => {
                for branch in branches {
                    self.learn(branch, namespace);
                }
            }
            Json::Object(object) => match object.get("type").and_then(Json::as_str) {
                Some(kind @ ("record" | "enum" | "fixed")) => {
                    let (full, own) = full_and_namespace(object, namespace);
                    self.names
                        .insert(full, (schema.clone(), namespace.to_string()));
                    if kind == "record" {
                        let fields = object.get("fields").and_then(Json::as_array);
                        for field in fields.into_iter().flatten() {
                            self.learn(&field["type"], &own);
                        }
                    }
                }
                Some("array") => {
                    if let Some(items) = object.get("items") {
                        self.learn(items, namespace);
                    }
                }
                Some("map") => {
                    if let Some(values) = object.get("values") {
                        self.learn(values, namespace);
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len());
        let end = end.ok_or_else(|| format!("the Avro value ends early, at byte {}", self.at))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    /// A zig-zag varint (`int` and `long`).
    fn long(&mut self) -> Result<i64, String> {
        let mut value: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = self.take(1)?[0];
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok((value >> 1) as i64 ^ -((value & 1) as i64));
            }
        }
        Err(format!("a varint runs past 10 bytes at byte {}", self.at))
    }

    fn length(&mut self) -> Result<usize, String> {
        usize::try_from(self.long()?).map_err(|_| format!("a negative length at byte {}", self.at))
    }

    fn string(&mut self) -> Result<String, String> {
        let length = self.length()?;
        let text = std::str::from_utf8(self.take(length)?)
            .map_err(|e| format!("a string is not UTF-8: {e}"))?;
        Ok(text.to_string())
    }

    fn read(&mut self, schema: &Json, namespace: &str) -> Result<Json, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("the schema nests deeper than {MAX_DEPTH} levels"));
        }
        let value = self.read_any(schema, namespace);
        self.depth -= 1;
        value
    }

    fn read_any(&mut self, schema: &Json, namespace: &str) -> Result<Json, String> {
        match schema {
            Json::String(name) => self.read_named(name, namespace),
            Json::Array(branches) => {
                let index = self.long()?;
                let branch = usize::try_from(index)
                    .ok()
                    .and_then(|i| branches.get(i))
                    .ok_or_else(|| format!("union branch {index} is not in the schema"))?;
                self.read(branch, namespace)
            }
            Json::Object(object) => self.read_complex(object, namespace),
            other => Err(format!("{other} is not an Avro schema")),
        }
    }

    fn read_named(&mut self, name: &str, namespace: &str) -> Result<Json, String> {
        Ok(match name {
            "null" => Json::Null,
            "boolean" => Json::Bool(self.take(1)?[0] != 0),
            "int" | "long" => Json::from(self.long()?),
            "float" => {
                let bytes: [u8; 4] = self.take(4)?.try_into().unwrap_or_default();
                rendered(&Value::Float(f64::from(f32::from_le_bytes(bytes))))
            }
            "double" => {
                let bytes: [u8; 8] = self.take(8)?.try_into().unwrap_or_default();
                rendered(&Value::Float(f64::from_le_bytes(bytes)))
            }
            "bytes" => {
                let length = self.length()?;
                rendered(&Value::Bytes(self.take(length)?))
            }
            "string" => Json::String(self.string()?),
            reference => {
                let (defined, defined_in) = self
                    .names
                    .get(&crate::format::full_name(namespace, reference))
                    .or_else(|| self.names.get(reference))
                    .cloned()
                    .ok_or_else(|| format!("the schema does not define the type {reference}"))?;
                self.read(&defined, &defined_in)?
            }
        })
    }

    fn read_complex(
        &mut self,
        object: &Map<String, Json>,
        namespace: &str,
    ) -> Result<Json, String> {
        let kind = object
            .get("type")
            .and_then(Json::as_str)
            .unwrap_or_default();
        let logical = object.get("logicalType").and_then(Json::as_str);
        let value = match (kind, logical) {
            ("int", Some("date")) => Value::Date(self.long()? as i32),
            ("long", Some("timestamp-micros")) => Value::Timestamp(self.long()?),
            ("long", Some("timestamp-millis")) => Value::Timestamp(self.millis()?),
            ("long", Some("local-timestamp-micros")) => Value::TimestampNtz(self.long()?),
            ("long", Some("local-timestamp-millis")) => Value::TimestampNtz(self.millis()?),
            ("bytes", Some("decimal")) => {
                let length = self.length()?;
                let bytes = self.take(length)?;
                if bytes.len() > 16 {
                    return Err("a decimal wider than 16 bytes".to_string());
                }
                // Big-endian two's complement, sign-extended to 128 bits.
                let fill = if bytes.first().is_some_and(|b| b & 0x80 != 0) {
                    0xff
                } else {
                    0
                };
                let mut wide = [fill; 16];
                wide[16 - bytes.len()..].copy_from_slice(bytes);
                let scale = object.get("scale").and_then(Json::as_i64).unwrap_or(0);
                Value::Decimal(i128::from_be_bytes(wide), scale as i8)
            }
            _ => return self.read_structure(object, kind, namespace),
        };
        Ok(rendered(&value))
    }

    fn read_structure(
        &mut self,
        object: &Map<String, Json>,
        kind: &str,
        namespace: &str,
    ) -> Result<Json, String> {
        match kind {
            "record" | "enum" | "fixed" => {
                let name = object
                    .get("name")
                    .and_then(Json::as_str)
                    .unwrap_or_default();
                let (_, own) = full_and_namespace(object, namespace);
                let namespace = own.as_str();
                match kind {
                    "record" => {
                        let mut fields = Map::new();
                        for field in object
                            .get("fields")
                            .and_then(Json::as_array)
                            .into_iter()
                            .flatten()
                        {
                            let field_name = field["name"].as_str().unwrap_or_default();
                            fields.insert(
                                field_name.to_string(),
                                self.read(&field["type"], namespace)?,
                            );
                        }
                        Ok(Json::Object(fields))
                    }
                    "enum" => {
                        let index = self.long()?;
                        usize::try_from(index)
                            .ok()
                            .and_then(|i| object.get("symbols")?.get(i).cloned())
                            .ok_or_else(|| format!("enum symbol {index} is not in {name}"))
                    }
                    _ => {
                        let size = object.get("size").and_then(Json::as_u64).unwrap_or(0);
                        Ok(rendered(&Value::Bytes(self.take(size as usize)?)))
                    }
                }
            }
            "array" => {
                let mut items = Vec::new();
                while let Some(count) = self.block()? {
                    for _ in 0..count {
                        items.push(self.read(part(object, "items")?, namespace)?);
                    }
                }
                Ok(Json::Array(items))
            }
            "map" => {
                let mut entries = Map::new();
                while let Some(count) = self.block()? {
                    for _ in 0..count {
                        let key = self.string()?;
                        entries.insert(key, self.read(part(object, "values")?, namespace)?);
                    }
                }
                Ok(Json::Object(entries))
            }
            primitive => self.read_named(primitive, namespace),
        }
    }

    /// The item count of the next block of an array or map; `None` at the end.
    fn block(&mut self) -> Result<Option<u64>, String> {
        let count = self.long()?;
        if count == 0 {
            return Ok(None);
        }
        if count < 0 {
            // A negative count is followed by the block's size in bytes.
            self.long()?;
        }
        // Items of no bytes (nulls, empty records) could claim any count.
        let left = (self.bytes.len() - self.at) as u64;
        if count.unsigned_abs() > left + 1024 {
            return Err(format!(
                "a block claims {} items with {left} bytes left",
                count.unsigned_abs()
            ));
        }
        Ok(Some(count.unsigned_abs()))
    }

    /// A `timestamp-millis` long as microseconds.
    fn millis(&mut self) -> Result<i64, String> {
        let millis = self.long()?;
        millis
            .checked_mul(1000)
            .ok_or_else(|| format!("the timestamp {millis} ms is out of range"))
    }
}

/// A value as the `json` encoding writes it.
fn rendered(value: &Value<'_>) -> Json {
    let mut text = String::new();
    write_json_value(&mut text, value);
    serde_json::from_str(&text).unwrap_or(Json::String(text))
}

/// The `items` or `values` schema of an array or map.
fn part<'a>(object: &'a Map<String, Json>, key: &str) -> Result<&'a Json, String> {
    object.get(key).ok_or_else(|| {
        format!(
            "an Avro schema of {} has no {key}",
            Json::Object(object.clone())
        )
    })
}

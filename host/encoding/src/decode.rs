//! The helpers' framed bytes read back as JSON, for people (`sluice preview`): a key or
//! value decoded with the schema it was written with, values rendered as the `json`
//! encoding renders them (Spark's `to_json`).

use std::collections::HashMap;

use prost_reflect::{DynamicMessage, SerializeOptions};
use serde_json::{Map, Value as Json};
use sluice_model::{Value, write_json_value};

use crate::framing::{FRAME_LEN, SchemaKind, WriterSchema};
use crate::names::full_name;
use crate::protobuf::ProtobufSchema;

/// Decodes `framed` (Confluent's 5-byte header, then the payload) written with
/// `schema`; Protobuf payloads need the message they were written as (`protobuf`, the
/// compiled `schema`).
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
            AvroSchema::new(parsed).read(payload)
        }
        SchemaKind::Protobuf => {
            let message = skip_message_indexes(payload)?;
            let own = protobuf
                .filter(|p| p.text == schema.text && p.message.full_name() == schema.name)
                .ok_or_else(|| {
                    format!("no .proto message {} to read the value with", schema.name)
                })?;
            read_protobuf(own, message)
        }
    }
}

/// A JSON payload.
fn read_json(payload: &[u8]) -> Result<Json, String> {
    serde_json::from_slice(payload).map_err(|e| format!("the value is not JSON: {e}"))
}

/// Whether `payload` is JSON, without building it.
pub(crate) fn check_json(payload: &[u8]) -> Result<(), String> {
    serde_json::from_slice::<serde::de::IgnoredAny>(payload)
        .map(drop)
        .map_err(|e| format!("the value is not JSON: {e}"))
}

/// Whether `message` (after the message indexes) is a Protobuf message of `schema`.
pub(crate) fn check_protobuf(schema: &ProtobufSchema, message: &[u8]) -> Result<(), String> {
    DynamicMessage::decode(schema.message.clone(), message)
        .map(drop)
        .map_err(|e| format!("the value is not a {}: {e}", schema.message.full_name()))
}

/// An Avro schema with its named types learned, to read or check many payloads.
#[derive(Debug)]
pub(crate) struct AvroSchema {
    schema: Json,
    names: Names,
}

impl AvroSchema {
    pub(crate) fn new(schema: Json) -> AvroSchema {
        let mut names = Names::new();
        learn(&mut names, &schema, "");
        AvroSchema { schema, names }
    }

    /// `payload` as JSON, every byte used.
    fn read(&self, payload: &[u8]) -> Result<Json, String> {
        self.walk(payload, true)
    }

    /// Whether `payload` is a value of the schema, every byte used, without building it.
    pub(crate) fn check(&self, payload: &[u8]) -> Result<(), String> {
        self.walk(payload, false).map(drop)
    }

    fn walk(&self, payload: &[u8], build: bool) -> Result<Json, String> {
        let mut reader = AvroReader::new(payload, &self.names, build);
        let value = reader.read(&self.schema, "")?;
        match reader.at == payload.len() {
            true => Ok(value),
            false => Err(format!(
                "{} bytes are left after the Avro value",
                payload.len() - reader.at
            )),
        }
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
    let names = Names::new();
    let mut reader = AvroReader::new(payload, &names, false);
    let count = reader.long()?;
    for _ in 0..count {
        reader.long()?;
    }
    Ok(&payload[reader.at..])
}

/// How deep schemas may nest while reading: a recursive type with hostile bytes would
/// otherwise recurse until the stack runs out.
const MAX_DEPTH: usize = 64;

/// Each named type by full name, with the namespace it was defined in.
type Names = HashMap<String, (Json, String)>;

/// Work allowed per payload byte, beyond a fixed allowance: items and fields of no
/// bytes (nulls, empty records) could otherwise claim any amount of work.
const WORK_PER_BYTE: u64 = 64;
const WORK_ALLOWANCE: u64 = 65_536;

/// Reads Avro binary by its schema.
struct AvroReader<'a> {
    bytes: &'a [u8],
    at: usize,
    names: &'a Names,
    depth: usize,
    /// Whether values are built (`read`) or only walked (`check`).
    build: bool,
    /// Array and map items the rest of the payload may still hold.
    items_left: u64,
    /// Schema nodes the rest of the payload may still visit.
    work_left: u64,
}

/// Remembers every named type `schema` defines, also those the bytes may never pass
/// through (a null `before` defines the record `after` names).
fn learn(names: &mut Names, schema: &Json, namespace: &str) {
    match schema {
        Json::Array(branches) => {
            for branch in branches {
                learn(names, branch, namespace);
            }
        }
        Json::Object(object) => match object.get("type").and_then(Json::as_str) {
            Some(kind @ ("record" | "enum" | "fixed")) => {
                let (full, own) = full_and_namespace(object, namespace);
                names.insert(full, (schema.clone(), namespace.to_string()));
                if kind == "record" {
                    let fields = object.get("fields").and_then(Json::as_array);
                    for field in fields.into_iter().flatten() {
                        learn(names, &field["type"], &own);
                    }
                }
            }
            Some("array") => {
                if let Some(items) = object.get("items") {
                    learn(names, items, namespace);
                }
            }
            Some("map") => {
                if let Some(values) = object.get("values") {
                    learn(names, values, namespace);
                }
            }
            _ => {}
        },
        _ => {}
    }
}

/// A named type's full name and the namespace its own fields are in.
fn full_and_namespace(object: &Map<String, Json>, enclosing: &str) -> (String, String) {
    let namespace = own_namespace(object, enclosing);
    let name = object
        .get("name")
        .and_then(Json::as_str)
        .unwrap_or_default();
    let full = match name.contains('.') {
        true => name.to_string(),
        false => full_name(namespace, name),
    };
    (full, namespace.to_string())
}

/// The namespace a named type's own fields are in, without allocating (read for every
/// value).
fn own_namespace<'b>(object: &'b Map<String, Json>, enclosing: &'b str) -> &'b str {
    let name = object
        .get("name")
        .and_then(Json::as_str)
        .unwrap_or_default();
    match name.rsplit_once('.') {
        Some((namespace, _)) => namespace,
        None => object
            .get("namespace")
            .and_then(Json::as_str)
            .unwrap_or(enclosing),
    }
}

impl<'a> AvroReader<'a> {
    fn new(bytes: &'a [u8], names: &'a Names, build: bool) -> AvroReader<'a> {
        let len = bytes.len() as u64;
        AvroReader {
            bytes,
            at: 0,
            names,
            depth: 0,
            build,
            items_left: len + 1024,
            work_left: len.saturating_mul(WORK_PER_BYTE) + WORK_ALLOWANCE,
        }
    }

    /// `make()` when values are built, else a placeholder.
    fn value(&self, make: impl FnOnce() -> Json) -> Json {
        match self.build {
            true => make(),
            false => Json::Null,
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

    fn string(&mut self) -> Result<&'a str, String> {
        let length = self.length()?;
        std::str::from_utf8(self.take(length)?).map_err(|e| format!("a string is not UTF-8: {e}"))
    }

    fn read(&mut self, schema: &Json, namespace: &str) -> Result<Json, String> {
        self.work_left = self.work_left.checked_sub(1).ok_or_else(|| {
            format!(
                "the value takes more work to read than its {} bytes allow (items or fields of no bytes)",
                self.bytes.len()
            )
        })?;
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
                self.value(|| rendered(&Value::Float(f64::from(f32::from_le_bytes(bytes)))))
            }
            "double" => {
                let bytes: [u8; 8] = self.take(8)?.try_into().unwrap_or_default();
                self.value(|| rendered(&Value::Float(f64::from_le_bytes(bytes))))
            }
            "bytes" => {
                let length = self.length()?;
                let bytes = self.take(length)?;
                self.value(|| rendered(&Value::Bytes(bytes)))
            }
            "string" => {
                let text = self.string()?;
                self.value(|| Json::String(text.to_string()))
            }
            reference => {
                let names = self.names;
                let (defined, defined_in) = names
                    .get(&full_name(namespace, reference))
                    .or_else(|| names.get(reference))
                    .ok_or_else(|| format!("the schema does not define the type {reference}"))?;
                self.read(defined, defined_in)?
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
        if !self.build && logical.is_some() {
            // Checking needs the bytes' shape only: what the logical type renders
            // (a decimal's width, a timestamp's range) is for people.
            return self.read_structure(object, kind, namespace);
        }
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
                let namespace = own_namespace(object, namespace);
                match kind {
                    "record" => {
                        let mut fields = Map::new();
                        for field in object
                            .get("fields")
                            .and_then(Json::as_array)
                            .into_iter()
                            .flatten()
                        {
                            let value = self.read(&field["type"], namespace)?;
                            if self.build {
                                let field_name = field["name"].as_str().unwrap_or_default();
                                fields.insert(field_name.to_string(), value);
                            }
                        }
                        Ok(Json::Object(fields))
                    }
                    "enum" => {
                        let index = self.long()?;
                        let symbol = usize::try_from(index)
                            .ok()
                            .and_then(|i| object.get("symbols")?.get(i))
                            .ok_or_else(|| format!("enum symbol {index} is not in {name}"))?;
                        Ok(self.value(|| symbol.clone()))
                    }
                    _ => {
                        let size = object.get("size").and_then(Json::as_u64).unwrap_or(0);
                        let bytes = self.take(size as usize)?;
                        Ok(self.value(|| rendered(&Value::Bytes(bytes))))
                    }
                }
            }
            "array" => {
                let mut items = Vec::new();
                while let Some(count) = self.block()? {
                    for _ in 0..count {
                        let item = self.read(part(object, "items")?, namespace)?;
                        if self.build {
                            items.push(item);
                        }
                    }
                }
                Ok(Json::Array(items))
            }
            "map" => {
                let mut entries = Map::new();
                while let Some(count) = self.block()? {
                    for _ in 0..count {
                        let key = self.string()?;
                        let value = self.read(part(object, "values")?, namespace)?;
                        if self.build {
                            entries.insert(key.to_string(), value);
                        }
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
        // Items of no bytes (nulls, empty records) could claim any count: the whole
        // value holds at most a fixed allowance more items than it has bytes.
        let count = count.unsigned_abs();
        self.items_left = self.items_left.checked_sub(count).ok_or_else(|| {
            format!(
                "a block claims {count} items, more than the value's {} bytes can hold",
                self.bytes.len()
            )
        })?;
        Ok(Some(count))
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

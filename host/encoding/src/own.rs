//! Schemas a module encodes its own keys or values with (`emit-framed`, contract
//! 1.1): parsed once, the header each framed payload gets, and the check that a
//! payload decodes with its schema before it is produced.

use std::sync::Arc;

use serde_json::Value as Json;

use crate::decode::{AvroSchema, check_json, check_protobuf};
use crate::framing::{FRAME_LEN, SchemaKind, WriterSchema};
use crate::names::full_name;
use crate::protobuf::ProtobufSchema;

/// A module's schema, ready to frame payloads.
#[derive(Debug)]
pub struct OwnSchema {
    /// The schema as it is registered; framed records name it.
    pub writer: Arc<WriterSchema>,
    /// The placeholder for the magic byte and id, then (Protobuf) the message indexes.
    header: Vec<u8>,
    reader: Reader,
}

#[derive(Debug)]
enum Reader {
    Avro(Box<AvroSchema>),
    Json,
    Protobuf(Box<ProtobufSchema>),
}

impl OwnSchema {
    /// Parses a module's schema of `kind`. `name` is the Protobuf message (the file's
    /// first when absent), or for Avro and JSON Schema the record name when the schema
    /// names none.
    pub fn parse(kind: SchemaKind, text: &str, name: Option<&str>) -> Result<OwnSchema, String> {
        let mut header = vec![0; FRAME_LEN];
        let (reader, own_name) = match kind {
            SchemaKind::Avro => {
                let json: Json = serde_json::from_str(text)
                    .map_err(|e| format!("the Avro schema is not JSON: {e}"))?;
                let own_name = avro_name(&json);
                (Reader::Avro(Box::new(AvroSchema::new(json))), own_name)
            }
            SchemaKind::Json => {
                let json: Json = serde_json::from_str(text)
                    .map_err(|e| format!("the JSON Schema is not JSON: {e}"))?;
                if !json.is_object() && !json.is_boolean() {
                    return Err("the JSON Schema is neither an object nor a boolean".to_string());
                }
                let title = json["title"].as_str().map(str::to_string);
                (Reader::Json, title)
            }
            SchemaKind::Protobuf => {
                let schema = ProtobufSchema::from_text(text, name)?;
                header.extend(schema.message_indexes());
                let full_name = schema.message.full_name().to_string();
                (Reader::Protobuf(Box::new(schema)), Some(full_name))
            }
        };
        let name = own_name
            .or_else(|| name.map(str::to_string))
            .unwrap_or_default();
        Ok(OwnSchema {
            writer: Arc::new(WriterSchema {
                kind,
                text: text.to_string(),
                name,
                references: Vec::new(),
            }),
            header,
            reader,
        })
    }

    /// How many bytes framing adds before a payload.
    pub fn header_len(&self) -> usize {
        self.header.len()
    }

    /// `payload` with the header before it, once it decodes with the schema.
    pub fn frame(&self, payload: &[u8]) -> Result<Vec<u8>, String> {
        match &self.reader {
            Reader::Avro(schema) => schema.check(payload),
            Reader::Json => check_json(payload),
            Reader::Protobuf(schema) => check_protobuf(schema, payload),
        }?;
        let mut framed = Vec::with_capacity(self.header.len() + payload.len());
        framed.extend_from_slice(&self.header);
        framed.extend_from_slice(payload);
        Ok(framed)
    }
}

/// The full name of an Avro named type, or a primitive's type name.
fn avro_name(schema: &Json) -> Option<String> {
    match schema {
        Json::String(primitive) => Some(primitive.clone()),
        Json::Object(object) => {
            let name = object.get("name").and_then(Json::as_str);
            match (object.get("namespace").and_then(Json::as_str), name) {
                (Some(namespace), Some(name)) if !name.contains('.') => {
                    Some(full_name(namespace, name))
                }
                (_, Some(name)) => Some(name.to_string()),
                (_, None) => object
                    .get("type")
                    .and_then(Json::as_str)
                    .map(str::to_string),
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEAL: &str = r#"{"type":"record","name":"Deal","namespace":"crm","fields":[
        {"name":"id","type":"string"},{"name":"amount","type":["null","long"]}]}"#;

    #[test]
    fn an_avro_payload_is_framed_when_it_decodes() {
        let schema = OwnSchema::parse(SchemaKind::Avro, DEAL, None).unwrap();
        assert_eq!(schema.writer.name, "crm.Deal");
        // "ab", then union branch 1 with long 3 (zig-zag 6).
        let framed = schema.frame(&[4, b'a', b'b', 2, 6]).unwrap();
        assert_eq!(framed, [0, 0, 0, 0, 0, 4, b'a', b'b', 2, 6]);
        let err = schema.frame(&[4, b'a', b'b', 2, 6, 9]).unwrap_err();
        assert!(
            err.contains("1 bytes are left after the Avro value"),
            "{err}"
        );
        let err = schema.frame(&[4, b'a']).unwrap_err();
        assert!(!err.is_empty());
    }

    #[test]
    fn a_json_payload_must_be_json_and_the_title_names_the_record() {
        let schema = OwnSchema::parse(
            SchemaKind::Json,
            r#"{"title":"crm.Deal","type":"object"}"#,
            Some("ignored"),
        )
        .unwrap();
        assert_eq!(schema.writer.name, "crm.Deal");
        assert_eq!(schema.frame(b"{}").unwrap(), b"\0\0\0\0\0{}");
        let err = schema.frame(b"{nope").unwrap_err();
        assert!(err.starts_with("the value is not JSON"), "{err}");
        let untitled = OwnSchema::parse(SchemaKind::Json, "{}", Some("crm.Deal")).unwrap();
        assert_eq!(untitled.writer.name, "crm.Deal");
        let err = OwnSchema::parse(SchemaKind::Json, "[1]", None).unwrap_err();
        assert!(err.contains("neither an object nor a boolean"), "{err}");
    }

    #[test]
    fn a_protobuf_payload_gets_its_message_indexes() {
        let proto = r#"syntax = "proto3"; package crm;
            message Other { string x = 1; }
            message Deal { string id = 1; int64 amount = 2; }"#;
        let schema = OwnSchema::parse(SchemaKind::Protobuf, proto, Some("crm.Deal")).unwrap();
        assert_eq!(schema.writer.name, "crm.Deal");
        // Field 1 "ab", field 2 = 3; message indexes [1]: count 1, index 1, zig-zag.
        let framed = schema.frame(&[10, 2, b'a', b'b', 16, 3]).unwrap();
        assert_eq!(framed, [0, 0, 0, 0, 0, 2, 2, 10, 2, b'a', b'b', 16, 3]);
        let err = schema.frame(&[10, 9, b'a']).unwrap_err();
        assert!(err.contains("the value is not a crm.Deal"), "{err}");
        let first = OwnSchema::parse(SchemaKind::Protobuf, proto, None).unwrap();
        assert_eq!(first.writer.name, "crm.Other");
        assert_eq!(first.frame(&[]).unwrap(), [0, 0, 0, 0, 0, 0]);
        let err = OwnSchema::parse(SchemaKind::Protobuf, proto, Some("crm.Nope")).unwrap_err();
        assert!(
            err.contains("the .proto text has no message crm.Nope; it has crm.Other, crm.Deal"),
            "{err}"
        );
        let err = OwnSchema::parse(SchemaKind::Protobuf, "message {", None).unwrap_err();
        assert!(err.starts_with("the .proto text does not parse"), "{err}");
        let err = OwnSchema::parse(
            SchemaKind::Protobuf,
            r#"syntax = "proto3"; import "other.proto"; message A { string x = 1; }"#,
            None,
        )
        .unwrap_err();
        assert!(err.contains("other.proto"), "{err}");
        let deep = format!("{}{}", "message A { ".repeat(10_000), "}".repeat(10_000));
        let err = OwnSchema::parse(SchemaKind::Protobuf, &deep, None).unwrap_err();
        assert!(err.contains("nests 10000 levels deep; at most 64"), "{err}");
        let quoted = r#"syntax = "proto3"; // {{{{ not nesting
            message A { string x = 1 [json_name = "{{{{"]; /* {{{ */ map<string, int32> m = 2; }"#;
        assert!(OwnSchema::parse(SchemaKind::Protobuf, quoted, None).is_ok());
    }

    #[test]
    fn avro_values_of_no_bytes_cannot_claim_unbounded_items_or_work() {
        let nulls =
            OwnSchema::parse(SchemaKind::Avro, r#"{"type":"array","items":"null"}"#, None).unwrap();
        // Blocks of 1,000 null items, again and again: each costs 3 bytes.
        let mut payload = Vec::new();
        for _ in 0..1000 {
            payload.extend([0xd0, 0x0f]);
        }
        payload.push(0);
        let err = nulls.frame(&payload).unwrap_err();
        assert!(
            err.contains("more than the value's 2001 bytes can hold"),
            "{err}"
        );
        assert!(nulls.frame(&[0xd0, 0x0f, 0]).is_ok());

        let wide: Vec<String> = (0..500)
            .map(|i| format!(r#"{{"name":"f{i}","type":"null"}}"#))
            .collect();
        let empty_heavy = format!(
            r#"{{"type":"array","items":{{"type":"record","name":"R","fields":[{}]}}}}"#,
            wide.join(",")
        );
        let schema = OwnSchema::parse(SchemaKind::Avro, &empty_heavy, None).unwrap();
        let err = schema.frame(&[0xd0, 0x0f, 0]).unwrap_err();
        assert!(
            err.contains("takes more work to read than its 3 bytes allow"),
            "{err}"
        );
    }

    #[test]
    fn checking_needs_only_the_shape_of_logical_types() {
        let decimal = r#"{"type":"bytes","logicalType":"decimal","precision":40,"scale":2}"#;
        let schema = OwnSchema::parse(SchemaKind::Avro, decimal, None).unwrap();
        let mut wide = vec![40];
        wide.extend([7; 20]);
        assert!(schema.frame(&wide).is_ok());
    }

    #[test]
    fn avro_primitives_are_named_by_their_type() {
        let schema = OwnSchema::parse(SchemaKind::Avro, r#""string""#, None).unwrap();
        assert_eq!(schema.writer.name, "string");
        assert_eq!(schema.frame(&[2, b'k']).unwrap(), [0, 0, 0, 0, 0, 2, b'k']);
    }
}

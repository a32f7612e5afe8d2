//! A module that encodes its records itself with its own schema and has the host
//! register the schema and frame the bytes with its id (`emit_framed`, contract 1.1).
//!
//! One record per change row: value `{documentId, change, version}` (the deal's id,
//! the row's change type, its commit version), key the deal's id; deletes become
//! tombstones. Parameter `format` picks how the module encodes them:
//! - `avro` (default): the value in Avro binary by [`DEAL_AVSC`], the key as an Avro
//!   `string`, both framed;
//! - `protobuf`: the value as the message `crm.Change` of [`CHANGE_PROTO`], the key
//!   text;
//! - `json-schema`: the value as JSON text described by [`DEAL_JSON_SCHEMA`], the key
//!   text.
//!
//! Parameter `corrupt_row` (a row index): that row's value is cut short, to show what
//! the host does with bytes that do not decode with their schema.

use sluice_transform::{
    Batch, ChangeType, Error, Framing, Output, OwnSchema, Params, Record, Transform,
};

/// The values' Avro schema.
pub const DEAL_AVSC: &str = r#"{"type":"record","name":"Change","namespace":"crm","fields":[
  {"name":"documentId","type":["null","string"],"default":null},
  {"name":"change","type":{"type":"enum","name":"ChangeType","symbols":["insert","update_preimage","update_postimage","delete"]}},
  {"name":"version","type":"long"}]}"#;

/// The values' `.proto` file (also read by the tests' Protobuf consumer): its first
/// message is a decoy, so the message indexes matter.
pub const CHANGE_PROTO: &str = include_str!("../../../tests/data/schemas/own-change.proto");

/// The values' JSON Schema.
pub const DEAL_JSON_SCHEMA: &str = r#"{"$schema":"http://json-schema.org/draft-07/schema#",
  "title":"crm.Change","type":"object","additionalProperties":false,
  "properties":{"documentId":{"type":["string","null"]},
    "change":{"enum":["insert","update_preimage","update_postimage","delete"]},
    "version":{"type":"integer"}},
  "required":["change","version"]}"#;

/// How the module encodes its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Avro,
    Protobuf,
    JsonSchema,
}

/// The transform.
pub struct OwnSchemaTransform {
    format: Format,
    framing: Framing,
    corrupt_row: Option<u32>,
}

impl Transform for OwnSchemaTransform {
    fn init(params: &Params) -> Result<Self, String> {
        let (format, framing) = match params.get_or("format", "avro") {
            "avro" => (
                Format::Avro,
                Framing::new(
                    Some(OwnSchema::avro(r#""string""#)),
                    Some(OwnSchema::avro(DEAL_AVSC)),
                ),
            ),
            "protobuf" => (
                Format::Protobuf,
                Framing::value(OwnSchema::protobuf(CHANGE_PROTO, Some("crm.Change"))),
            ),
            "json-schema" => (
                Format::JsonSchema,
                Framing::value(OwnSchema::json_schema(DEAL_JSON_SCHEMA)),
            ),
            other => {
                return Err(format!(
                    "Parameter format is `{other}`; use avro, protobuf or json-schema."
                ));
            }
        };
        let corrupt_row = match params.get("corrupt_row") {
            Some(row) => Some(
                row.parse()
                    .map_err(|_| format!("Parameter corrupt_row is `{row}`, not a row index."))?,
            ),
            None => None,
        };
        Ok(OwnSchemaTransform {
            format,
            framing,
            corrupt_row,
        })
    }

    fn transform(&mut self, batch: &Batch, out: &mut Output) -> Result<(), Error> {
        for row in batch.rows()? {
            let id = row.str("documentId")?;
            let change = row.change_type();
            let version = row.commit_version();
            let mut key = Vec::new();
            if let Some(id) = id {
                match self.format {
                    Format::Avro => write_avro_string(&mut key, id),
                    _ => key.extend_from_slice(id.as_bytes()),
                }
            }
            let mut record = Record::new();
            if id.is_some() {
                record = record.key(key);
            }
            if change != ChangeType::Delete {
                let mut value = match self.format {
                    Format::Avro => avro_value(id, change, version),
                    Format::Protobuf => protobuf_value(id, change, version),
                    Format::JsonSchema => json_value(id, change, version),
                };
                if self.corrupt_row == Some(row.index()) {
                    value.truncate(value.len() / 2);
                }
                record = record.value(value);
            }
            out.emit_framed(&row, &self.framing, record);
        }
        Ok(())
    }
}

/// Avro's zig-zag varint of a `long`.
fn write_avro_long(out: &mut Vec<u8>, value: i64) {
    let mut n = ((value << 1) ^ (value >> 63)) as u64;
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn write_avro_string(out: &mut Vec<u8>, text: &str) {
    write_avro_long(out, text.len() as i64);
    out.extend_from_slice(text.as_bytes());
}

fn avro_value(id: Option<&str>, change: ChangeType, version: i64) -> Vec<u8> {
    let mut out = Vec::new();
    match id {
        None => write_avro_long(&mut out, 0),
        Some(id) => {
            write_avro_long(&mut out, 1);
            write_avro_string(&mut out, id);
        }
    }
    let symbol = match change {
        ChangeType::Insert => 0,
        ChangeType::UpdatePreimage => 1,
        ChangeType::UpdatePostimage => 2,
        ChangeType::Delete => 3,
    };
    write_avro_long(&mut out, symbol);
    write_avro_long(&mut out, version);
    out
}

/// A Protobuf varint.
fn write_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn protobuf_value(id: Option<&str>, change: ChangeType, version: i64) -> Vec<u8> {
    let mut out = Vec::new();
    // proto3 leaves default values (empty strings, zero) out.
    for (field, text) in [(1, id.unwrap_or_default()), (2, change.as_str())] {
        if !text.is_empty() {
            write_varint(&mut out, field << 3 | 2);
            write_varint(&mut out, text.len() as u64);
            out.extend_from_slice(text.as_bytes());
        }
    }
    if version != 0 {
        write_varint(&mut out, 3 << 3);
        write_varint(&mut out, version as u64);
    }
    out
}

fn json_value(id: Option<&str>, change: ChangeType, version: i64) -> Vec<u8> {
    let id = match id {
        Some(id) => format!("\"{}\"", id.replace('\\', "\\\\").replace('"', "\\\"")),
        None => "null".to_string(),
    };
    format!(
        r#"{{"documentId":{id},"change":"{}","version":{version}}}"#,
        change.as_str()
    )
    .into_bytes()
}

sluice_transform::export!(OwnSchemaTransform);

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_transform::BatchBuilder;

    fn batch() -> Batch {
        BatchBuilder::new()
            .strings("documentId", &[Some("deal-1"), None])
            .change(ChangeType::Insert, 3, 0)
            .change(ChangeType::Delete, 4, 0)
            .build()
    }

    fn records(format: &str) -> Vec<Record> {
        let params = Params::from_pairs(vec![("format".into(), format.into())]);
        let mut transform = OwnSchemaTransform::init(&params).unwrap();
        let mut out = Output::default();
        transform.transform(&batch(), &mut out).unwrap();
        out.records()
    }

    #[test]
    fn avro_values_and_keys_are_encoded_by_hand() {
        let records = records("avro");
        assert_eq!(records[0].key.as_deref(), Some(&b"\x0cdeal-1"[..]));
        // Union branch 1, "deal-1", enum symbol 0, version 3 (zig-zag 6).
        assert_eq!(
            records[0].value.as_deref(),
            Some(&b"\x02\x0cdeal-1\x00\x06"[..])
        );
        assert_eq!(records[1].key, None);
        assert_eq!(records[1].value, None);
    }

    #[test]
    fn protobuf_and_json_values() {
        let protobuf = records("protobuf");
        assert_eq!(
            protobuf[0].value.as_deref(),
            Some(&b"\x0a\x06deal-1\x12\x06insert\x18\x03"[..])
        );
        let json = records("json-schema");
        assert_eq!(
            json[0].value.as_deref(),
            Some(&br#"{"documentId":"deal-1","change":"insert","version":3}"#[..])
        );
        let err =
            OwnSchemaTransform::init(&Params::from_pairs(vec![("format".into(), "xml".into())]))
                .err()
                .unwrap();
        assert!(err.contains("use avro, protobuf or json-schema"), "{err}");
    }
}

//! Confluent's wire format: a zero magic byte, the schema's registry id (4 bytes,
//! big-endian), then the encoded bytes. The helpers write five placeholder bytes and
//! the pipeline writes the id once the registry gave it.

use std::ops::Range;
use std::sync::Arc;

use serde::Deserialize;

/// Bytes before the payload of a framed key or value.
pub const FRAME_LEN: usize = 5;

/// The kind of a schema, as the registry names it (`schemaType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SchemaKind {
    /// Apache Avro.
    Avro,
    /// JSON Schema.
    Json,
    /// Protocol Buffers.
    Protobuf,
}

impl SchemaKind {
    /// The registry's name for it.
    pub fn registry_name(self) -> &'static str {
        match self {
            SchemaKind::Avro => "AVRO",
            SchemaKind::Json => "JSON",
            SchemaKind::Protobuf => "PROTOBUF",
        }
    }
}

/// A schema the helpers wrote records with.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WriterSchema {
    /// Its kind.
    pub kind: SchemaKind,
    /// Its canonical text, the same for the same table schema and spec.
    pub text: String,
    /// The record's full name (a JSON Schema's title, a Protobuf message's full name, an
    /// Avro primitive's type name), for record-name subjects.
    pub name: String,
    /// The schemas it refers to (a `.proto` file's imports), registered first.
    pub references: Vec<SchemaReference>,
}

/// A schema another refers to by name, as Confluent's schema references do: registered
/// under the subject of its name (`DefaultReferenceSubjectNameStrategy`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SchemaReference {
    /// The name the referring schema uses (a `.proto` import path).
    pub name: String,
    /// The schema.
    pub schema: Arc<WriterSchema>,
}

/// Records of one helper call whose keys or values wait for their schema's id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Framed {
    /// The records, as indexes into the batch's output.
    pub records: Range<usize>,
    /// The schema of their keys, when keys are framed (records without a key skipped).
    pub key: Option<Arc<WriterSchema>>,
    /// The schema of their values, when values are framed (tombstones skipped).
    pub value: Option<Arc<WriterSchema>>,
}

/// Writes the magic byte and `id` over the placeholder at the start of `bytes`.
pub fn write_id(bytes: &mut [u8], id: u32) {
    bytes[0] = 0;
    bytes[1..FRAME_LEN].copy_from_slice(&id.to_be_bytes());
}

/// How a schema's subject is named, as Confluent's serializers name it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SubjectStrategy {
    /// `<topic>-key` / `<topic>-value` (`TopicNameStrategy`).
    #[default]
    Topic,
    /// The record's full name (`RecordNameStrategy`).
    Record,
    /// `<topic>-<record full name>` (`TopicRecordNameStrategy`).
    TopicRecord,
}

impl SubjectStrategy {
    /// The subject of `schema` for a key (`is_key`) or value on `topic`.
    pub fn subject(self, topic: &str, is_key: bool, schema: &WriterSchema) -> String {
        match self {
            SubjectStrategy::Topic => {
                format!("{topic}-{}", if is_key { "key" } else { "value" })
            }
            SubjectStrategy::Record => schema.name.clone(),
            SubjectStrategy::TopicRecord => format!("{topic}-{}", schema.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_goes_after_the_magic_byte_big_endian() {
        let mut bytes = vec![9, 9, 9, 9, 9, 42];
        write_id(&mut bytes, 0x0102_0304);
        assert_eq!(bytes, [0, 1, 2, 3, 4, 42]);
    }

    #[test]
    fn subjects_follow_confluents_strategies() {
        let schema = WriterSchema {
            kind: SchemaKind::Avro,
            text: "{}".into(),
            name: "sluice.Deal".into(),
            references: Vec::new(),
        };
        assert_eq!(
            SubjectStrategy::Topic.subject("deals", false, &schema),
            "deals-value"
        );
        assert_eq!(
            SubjectStrategy::Topic.subject("deals", true, &schema),
            "deals-key"
        );
        assert_eq!(
            SubjectStrategy::Record.subject("deals", false, &schema),
            "sluice.Deal"
        );
        assert_eq!(
            SubjectStrategy::TopicRecord.subject("deals", false, &schema),
            "deals-sluice.Deal"
        );
    }
}

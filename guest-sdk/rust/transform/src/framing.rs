//! Schemas a module encodes its own bytes with, for [`crate::Output::emit_framed`]
//! (contract 1.1): the host registers them in the pipeline's schema registry and frames
//! each key or value in Confluent's wire format.

use std::sync::Arc;

/// The kind of a schema a module encodes its own bytes with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchemaKind {
    /// Apache Avro binary.
    Avro,
    /// JSON text, described by a JSON Schema.
    JsonSchema,
    /// One Protobuf message in Protobuf's binary format.
    Protobuf,
}

/// A schema a module encoded keys or values with itself, registered as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnSchema {
    /// Its kind.
    pub kind: SchemaKind,
    /// Its text: Avro's JSON, a JSON Schema, or a `.proto` file.
    pub text: String,
    /// The Protobuf message (the file's first when absent), or for Avro and JSON
    /// Schema the record name record-name subjects use when the schema names none.
    pub name: Option<String>,
}

impl OwnSchema {
    /// An Avro schema (an `.avsc` file's JSON).
    pub fn avro(text: impl Into<String>) -> OwnSchema {
        OwnSchema {
            kind: SchemaKind::Avro,
            text: text.into(),
            name: None,
        }
    }

    /// A JSON Schema; the bytes framed with it are JSON text.
    pub fn json_schema(text: impl Into<String>) -> OwnSchema {
        OwnSchema {
            kind: SchemaKind::JsonSchema,
            text: text.into(),
            name: None,
        }
    }

    /// A `.proto` file; `message` is the full name of the message the bytes are (the
    /// file's first message when `None`).
    pub fn protobuf(text: impl Into<String>, message: Option<&str>) -> OwnSchema {
        OwnSchema {
            kind: SchemaKind::Protobuf,
            text: text.into(),
            name: message.map(str::to_string),
        }
    }

    /// The same schema with `name` for record-name subjects (when it names none itself).
    pub fn named(self, name: impl Into<String>) -> OwnSchema {
        OwnSchema {
            name: Some(name.into()),
            ..self
        }
    }
}

/// What [`crate::Output::emit_framed`] frames: keys, values or both, each with its
/// schema. Cheap to clone; make it once (in `init`) and reuse it for every record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Framing(Arc<Schemas>);

#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Schemas {
    pub(crate) key: Option<OwnSchema>,
    pub(crate) value: Option<OwnSchema>,
}

impl Framing {
    /// Values framed with `schema`; keys left as they are.
    pub fn value(schema: OwnSchema) -> Framing {
        Framing::new(None, Some(schema))
    }

    /// Keys framed with `key`, values with `value`; `None` leaves them as they are.
    pub fn new(key: Option<OwnSchema>, value: Option<OwnSchema>) -> Framing {
        Framing(Arc::new(Schemas { key, value }))
    }

    /// The schema of the keys.
    pub fn key_schema(&self) -> Option<&OwnSchema> {
        self.0.key.as_ref()
    }

    /// The schema of the values.
    pub fn value_schema(&self) -> Option<&OwnSchema> {
        self.0.value.as_ref()
    }

    /// Whether records framed with `self` and `other` can cross the boundary together.
    pub(crate) fn same(&self, other: &Framing) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

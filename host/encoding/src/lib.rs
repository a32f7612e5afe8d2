//! Records the host helpers make in a pipeline's format: Avro or JSON Schema values and
//! keys in Confluent's wire format, optionally in Debezium's change-event envelope.
//!
//! A module describes records with `emit-encoded` as it always has (rows, key, fields or
//! the whole row); the pipeline's `[sink.encoding]` decides how they are written. The
//! schema is derived from the table's Arrow types and the spec, the same text for the
//! same table schema, so a registry gives the same id until the table changes. Framed
//! bytes start with a placeholder; the pipeline asks the registry for the id and writes
//! it ([`write_id`]) before the records leave. Bytes a module encodes itself with its
//! own schema ([`OwnSchema`], contract 1.1) are framed the same way.

mod avro;
mod debezium;
mod decode;
mod fields;
mod format;
mod framing;
mod json_schema;
mod names;
mod own;
mod protobuf;
mod row_writer;
mod rows;
mod supplied;
mod unframed;
mod wire;

use std::sync::Arc;

use arrow_array::RecordBatch;
use sluice_model::helpers::{EncodeSpec, HelperError, RecordSink};

pub use debezium::SNAPSHOT_METADATA;
pub use decode::decode;
pub use format::{Envelope, Format, KeyFormat, ValueFormat, debezium_namespace};
pub use framing::{
    FRAME_LEN, Framed, SchemaKind, SchemaReference, SubjectStrategy, WriterSchema, write_id,
};
pub use names::invalid_avro_name;
pub use own::OwnSchema;
pub use protobuf::ProtobufSchema;
pub use supplied::SuppliedSchema;
pub use unframed::{UnframedPart, first_unframed};

/// What one encode call made: how many rows it encoded and the schemas its framed keys
/// and values wait on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Encoded {
    /// Rows encoded (a Debezium delete with its tombstone counts once).
    pub rows: u32,
    /// The schema of the keys, when they are framed.
    pub key: Option<Arc<WriterSchema>>,
    /// The schema of the values, when they are framed.
    pub value: Option<Arc<WriterSchema>>,
}

/// Makes the records `spec` describes in `format` into `out`.
pub fn encode(
    batch: &RecordBatch,
    spec: &EncodeSpec,
    format: &Format,
    out: &mut impl RecordSink,
) -> Result<Encoded, HelperError> {
    if format.is_plain_json() {
        let rows = sluice_model::helpers::encode(batch, spec, out)?;
        return Ok(Encoded {
            rows,
            ..Encoded::default()
        });
    }
    rows::encode(batch, spec, format, out)
}

#[cfg(test)]
mod tests;

//! Debezium's change-event envelope: `before` and `after` images of the row, `op`
//! (`c` create, `u` update, `d` delete, `r` read in a snapshot), `source` (where the
//! change came from) and `ts_ms` (when Sluice processed it), as Debezium's connectors
//! write it and its consumers (Flink's `debezium-json`/`debezium-avro-confluent`,
//! Kafka Connect sinks) read it.

use std::time::{SystemTime, UNIX_EPOCH};

use arrow_array::RecordBatch;
use serde_json::{Value as Json, json};
use sluice_model::helpers::{COMMIT_TIMESTAMP, COMMIT_VERSION, HelperError};
use sluice_model::{Column, Value, write_json_string};

use crate::avro::{Names, write_bytes, write_long};
use crate::format::{Format, ValueFormat};
use crate::row_writer::RowWriter;

/// Schema metadata the pipeline puts on a batch of an initial snapshot, whose rows
/// become `r` events.
pub const SNAPSHOT_METADATA: &str = "sluice.snapshot";

/// A Debezium operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// `c`: a row was inserted.
    Create,
    /// `u`: a row was updated.
    Update,
    /// `d`: a row was deleted.
    Delete,
    /// `r`: a row was read by an initial snapshot.
    Read,
}

/// One change event: its operation and the rows of its images.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Event {
    /// The operation.
    pub op: Op,
    /// The row of the image before the change.
    pub before: Option<usize>,
    /// The row of the image after the change.
    pub after: Option<usize>,
}

impl Op {
    fn code(self) -> &'static str {
        match self {
            Op::Create => "c",
            Op::Update => "u",
            Op::Delete => "d",
            Op::Read => "r",
        }
    }
}

/// What every event of one batch shares.
pub(crate) struct Envelope<'a> {
    /// Whether the batch is part of an initial snapshot.
    pub snapshot: bool,
    versions: Column<'a>,
    timestamps: Column<'a>,
    pipeline: &'a str,
    table: &'a str,
    processed_ms: i64,
}

impl<'a> Envelope<'a> {
    /// What the events of `batch` share, for a pipeline writing in `format`.
    pub(crate) fn new(
        batch: &'a RecordBatch,
        format: &'a Format,
    ) -> Result<Envelope<'a>, HelperError> {
        let column = |name| Column::find(batch, name).map_err(|e| HelperError(e.to_string()));
        let processed_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        Ok(Envelope {
            snapshot: batch
                .schema_ref()
                .metadata()
                .get(SNAPSHOT_METADATA)
                .is_some_and(|v| v == "true"),
            versions: column(COMMIT_VERSION)?,
            timestamps: column(COMMIT_TIMESTAMP)?,
            pipeline: &format.pipeline,
            table: &format.table,
            processed_ms,
        })
    }

    fn commit(&self, row: usize) -> (i64, i64) {
        let version = match self.versions.value(row) {
            Value::Int(v) => v,
            _ => 0,
        };
        let millis = match self.timestamps.value(row) {
            Value::Timestamp(micros) | Value::TimestampNtz(micros) => micros.div_euclid(1000),
            _ => 0,
        };
        (version, millis)
    }

    /// Writes `event`, which row `row` (its commit) made, its images written by `rows`.
    pub(crate) fn write(
        &self,
        rows: &RowWriter<'_>,
        format: ValueFormat,
        event: Event,
        row: usize,
        out: &mut Vec<u8>,
    ) {
        let Event { op, before, after } = event;
        let (version, commit_ms) = self.commit(row);
        let snapshot = if self.snapshot { "true" } else { "false" };
        match format {
            ValueFormat::Avro => {
                for image in [before, after] {
                    match image {
                        None => write_long(out, 0),
                        Some(image) => {
                            write_long(out, 1);
                            rows.write(image, out);
                        }
                    }
                }
                for text in [env!("CARGO_PKG_VERSION"), "sluice", self.pipeline] {
                    write_bytes(out, text.as_bytes());
                }
                write_long(out, commit_ms);
                for text in [snapshot, "delta", self.table] {
                    write_bytes(out, text.as_bytes());
                }
                write_long(out, version);
                write_bytes(out, op.code().as_bytes());
                write_long(out, 1);
                write_long(out, self.processed_ms);
            }
            ValueFormat::Json | ValueFormat::JsonSchema | ValueFormat::Protobuf => {
                let mut text = String::from("{\"before\":");
                let image = |row: Option<usize>, text: &mut String| match row {
                    None => text.push_str("null"),
                    Some(row) => {
                        let mut bytes = Vec::new();
                        rows.write(row, &mut bytes);
                        text.push_str(&String::from_utf8_lossy(&bytes));
                    }
                };
                image(before, &mut text);
                text.push_str(",\"after\":");
                image(after, &mut text);
                text.push_str(",\"source\":{\"version\":");
                write_json_string(&mut text, env!("CARGO_PKG_VERSION"));
                text.push_str(",\"connector\":\"sluice\",\"name\":");
                write_json_string(&mut text, self.pipeline);
                text.push_str(&format!(
                    ",\"ts_ms\":{commit_ms},\"snapshot\":\"{snapshot}\",\"db\":\"delta\",\"table\":"
                ));
                write_json_string(&mut text, self.table);
                text.push_str(&format!(
                    ",\"commit_version\":{version}}},\"op\":\"{}\",\"ts_ms\":{}}}",
                    op.code(),
                    self.processed_ms
                ));
                out.extend_from_slice(text.as_bytes());
            }
        }
    }
}

/// The envelope's Avro schema around `row`, the schema of a row image.
pub(crate) fn avro_schema(format: &Format, row: Json, names: &mut Names) -> Json {
    // The row's record is defined in `before` and named in `after`, in full: a
    // supplied record has a namespace of its own.
    let row_name = crate::avro::full_name_of(&row);
    let envelope = names.claim("Envelope");
    let source = names.claim("Source");
    let string = |name: &str| json!({"name": name, "type": "string"});
    json!({
        "type": "record",
        "name": envelope,
        "namespace": format.namespace,
        "fields": [
            {"name": "before", "type": ["null", row], "default": null},
            {"name": "after", "type": ["null", row_name], "default": null},
            {"name": "source", "type": {
                "type": "record",
                "name": source,
                "fields": [
                    string("version"),
                    string("connector"),
                    string("name"),
                    {"name": "ts_ms", "type": "long"},
                    string("snapshot"),
                    string("db"),
                    string("table"),
                    {"name": "commit_version", "type": "long"},
                ],
            }},
            string("op"),
            {"name": "ts_ms", "type": ["null", "long"], "default": null},
        ],
    })
}

/// The envelope's JSON Schema around `row`, the schema of a row image.
pub(crate) fn json_schema(format: &Format, mut row: Json) -> Json {
    if let Some(object) = row.as_object_mut() {
        object.remove("$schema");
        object.remove("title");
    }
    let image = json!({"oneOf": [{"type": "null"}, row]});
    let string = json!({"type": "string"});
    let integer = json!({"type": "integer"});
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": format.value_name(),
        "type": "object",
        "properties": {
            "before": image,
            "after": image,
            "source": {
                "type": "object",
                "properties": {
                    "version": string, "connector": string, "name": string,
                    "ts_ms": integer, "snapshot": string, "db": string, "table": string,
                    "commit_version": integer,
                },
                "required": ["version", "connector", "name", "ts_ms", "snapshot", "db", "table", "commit_version"],
            },
            "op": {"type": "string", "enum": ["c", "u", "d", "r"]},
            "ts_ms": integer,
        },
        "required": ["before", "after", "source", "op", "ts_ms"],
    })
}

//! Debezium's change-event envelope, field for field as Debezium's connectors write it
//! (its current `io.debezium.data.Envelope` and common `source` block), so that its
//! consumers (Flink's `debezium-json`/`debezium-avro-confluent`, Kafka Connect sinks
//! with `ExtractNewRecordState`) read it as Debezium's:
//!
//! - the envelope: `before`, `after` (row images), `source`, `transaction` (always
//!   null: see [`Envelope::write`]), `op` (`c` create, `u` update, `d` delete, `r` read
//!   in a snapshot), and `ts_ms`, `ts_us`, `ts_ns` (when Sluice made the event);
//! - `source`: Debezium's common fields `version`, `connector` (`sluice`), `name` (the
//!   pipeline), `ts_ms` (the commit's timestamp), `snapshot`, `db` (`delta`),
//!   `sequence` (null), `ts_us`, `ts_ns`, then Sluice's own, where each Debezium
//!   connector adds its own (Postgres `schema`, `table`, `txId`, `lsn`): `table` (the
//!   table's location) and `commit_version` (the Delta version).
//!
//! The Avro records are named as Debezium's are: `<namespace>.Envelope` beside the row's
//! `<namespace>.Value` (the namespace standing for Debezium's `<prefix>.<db>.<table>`),
//! `io.debezium.connector.sluice.Source` and `event.block`.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use arrow_array::RecordBatch;
use serde_json::{Value as Json, json};
use sluice_model::helpers::{COMMIT_TIMESTAMP, COMMIT_VERSION, HelperError};
use sluice_model::{Column, Value, write_json_string};

use crate::avro::Names;
use crate::format::{Format, ValueFormat};
use crate::names::full_name;
use crate::row_writer::RowWriter;
use crate::wire::{write_bytes, write_long};

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

/// The full name of `source`'s Avro record, after Debezium's
/// `io.debezium.connector.<connector>.Source`.
pub(crate) const SOURCE_RECORD: &str = "io.debezium.connector.sluice.Source";

/// The values Debezium's `source.snapshot` enum allows (`io.debezium.data.Enum`).
const SNAPSHOT_VALUES: &str =
    "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental";

/// One instant in Debezium's three resolutions: `ts_ms`, `ts_us`, `ts_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    millis: i64,
    micros: i64,
    nanos: i64,
}

impl Stamp {
    fn from_micros(micros: i64) -> Stamp {
        Stamp {
            millis: micros.div_euclid(1000),
            micros,
            nanos: micros.saturating_mul(1000),
        }
    }

    fn now() -> Stamp {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        Stamp {
            millis: nanos.div_euclid(1_000_000),
            micros: nanos.div_euclid(1000),
            nanos,
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
    processed: Stamp,
}

impl<'a> Envelope<'a> {
    /// What the events of `batch` share, for a pipeline writing in `format`.
    pub(crate) fn new(
        batch: &'a RecordBatch,
        format: &'a Format,
    ) -> Result<Envelope<'a>, HelperError> {
        let column = |name| Column::find(batch, name).map_err(|e| HelperError(e.to_string()));
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
            processed: Stamp::now(),
        })
    }

    /// The commit version and timestamp of `row`.
    fn commit(&self, row: usize) -> (i64, Stamp) {
        let version = match self.versions.value(row) {
            Value::Int(v) => v,
            _ => 0,
        };
        let micros = match self.timestamps.value(row) {
            Value::Timestamp(micros) | Value::TimestampNtz(micros) => micros,
            _ => 0,
        };
        (version, Stamp::from_micros(micros))
    }

    /// Writes `event`, which row `row` (its commit) made, its images written by `rows`.
    ///
    /// `transaction` is written null, as Debezium does without
    /// `provide.transaction.metadata`: its `total_order` counts the event among all of
    /// the transaction's, which a batch of a commit split over several does not know,
    /// and Debezium's consumers of the block expect the BEGIN and END events of a
    /// transaction topic beside it. The commit is `source.commit_version`.
    pub(crate) fn write(
        &self,
        rows: &RowWriter<'_>,
        format: ValueFormat,
        event: Event,
        row: usize,
        out: &mut Vec<u8>,
    ) {
        let Event { op, before, after } = event;
        let (version, commit) = self.commit(row);
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
                // source
                for text in [env!("CARGO_PKG_VERSION"), "sluice", self.pipeline] {
                    write_bytes(out, text.as_bytes());
                }
                write_long(out, commit.millis);
                // snapshot: the enum's string is the union's first branch.
                write_long(out, 0);
                write_bytes(out, snapshot.as_bytes());
                write_bytes(out, b"delta");
                // sequence: null.
                write_long(out, 0);
                for micros_or_nanos in [commit.micros, commit.nanos] {
                    write_long(out, 1);
                    write_long(out, micros_or_nanos);
                }
                write_bytes(out, self.table.as_bytes());
                write_long(out, version);
                // transaction: null.
                write_long(out, 0);
                write_bytes(out, op.code().as_bytes());
                for time in [
                    self.processed.millis,
                    self.processed.micros,
                    self.processed.nanos,
                ] {
                    write_long(out, 1);
                    write_long(out, time);
                }
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
                let _ = write!(
                    text,
                    ",\"ts_ms\":{},\"snapshot\":\"{snapshot}\",\"db\":\"delta\",\"sequence\":null,\"ts_us\":{},\"ts_ns\":{},\"table\":",
                    commit.millis, commit.micros, commit.nanos
                );
                write_json_string(&mut text, self.table);
                let _ = write!(
                    text,
                    ",\"commit_version\":{version}}},\"transaction\":null,\"op\":\"{}\",\"ts_ms\":{},\"ts_us\":{},\"ts_ns\":{}}}",
                    op.code(),
                    self.processed.millis,
                    self.processed.micros,
                    self.processed.nanos
                );
                out.extend_from_slice(text.as_bytes());
            }
        }
    }
}

/// The envelope's Avro schema around `row`, the schema of a row image, as Confluent's
/// `AvroConverter` writes Debezium's: optional fields are unions with `null` first
/// (default null), but `snapshot`'s, whose default is `"false"`; `connect.*`
/// properties keep Kafka Connect's names and the enum's values for Connect readers.
pub(crate) fn avro_schema(format: &Format, row: Json, names: &mut Names) -> Json {
    // The row's record is defined in `before` and named in `after`, in full: a
    // supplied record has a namespace of its own.
    let row_name = crate::avro::full_name_of(&row);
    let envelope = names.claim("Envelope");
    let string = |name: &str| json!({"name": name, "type": "string"});
    let long = |name: &str| json!({"name": name, "type": "long"});
    let optional =
        |name: &str, kind: Json| json!({"name": name, "type": ["null", kind], "default": null});
    let (source_namespace, source_name) = SOURCE_RECORD
        .rsplit_once('.')
        .unwrap_or(("", SOURCE_RECORD));
    json!({
        "type": "record",
        "name": envelope,
        "namespace": format.namespace,
        "fields": [
            optional("before", row),
            optional("after", json!(row_name)),
            {"name": "source", "type": {
                "type": "record",
                "name": source_name,
                "namespace": source_namespace,
                "fields": [
                    string("version"),
                    string("connector"),
                    string("name"),
                    long("ts_ms"),
                    {"name": "snapshot", "type": [{
                        "type": "string",
                        "connect.version": 1,
                        "connect.parameters": {"allowed": SNAPSHOT_VALUES},
                        "connect.default": "false",
                        "connect.name": "io.debezium.data.Enum",
                    }, "null"], "default": "false"},
                    string("db"),
                    optional("sequence", json!("string")),
                    optional("ts_us", json!("long")),
                    optional("ts_ns", json!("long")),
                    string("table"),
                    long("commit_version"),
                ],
                "connect.version": 1,
                "connect.name": SOURCE_RECORD,
            }},
            optional("transaction", json!({
                "type": "record",
                "name": "block",
                "namespace": "event",
                "fields": [
                    string("id"),
                    long("total_order"),
                    long("data_collection_order"),
                ],
                "connect.version": 1,
                "connect.name": "event.block",
            })),
            string("op"),
            optional("ts_ms", json!("long")),
            optional("ts_us", json!("long")),
            optional("ts_ns", json!("long")),
        ],
        "connect.version": 2,
        "connect.name": full_name(&format.namespace, &envelope),
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
    let optional = |kind: &Json| json!({"oneOf": [{"type": "null"}, kind]});
    let snapshot: Vec<&str> = SNAPSHOT_VALUES.split(',').collect();
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": format.value_name(),
        "type": "object",
        "properties": {
            "before": image,
            "after": image,
            "source": {
                "type": "object",
                "title": SOURCE_RECORD,
                "properties": {
                    "version": string, "connector": string, "name": string,
                    "ts_ms": integer,
                    "snapshot": {"oneOf": [{"type": "null"}, {"type": "string", "enum": snapshot}]},
                    "db": string,
                    "sequence": optional(&string),
                    "ts_us": optional(&integer), "ts_ns": optional(&integer),
                    "table": string, "commit_version": integer,
                },
                "required": ["version", "connector", "name", "ts_ms", "db", "table", "commit_version"],
            },
            "transaction": optional(&json!({
                "type": "object",
                "title": "event.block",
                "properties": {"id": string, "total_order": integer, "data_collection_order": integer},
                "required": ["id", "total_order", "data_collection_order"],
            })),
            "op": {"type": "string", "enum": ["c", "u", "d", "r"]},
            "ts_ms": optional(&integer),
            "ts_us": optional(&integer),
            "ts_ns": optional(&integer),
        },
        "required": ["before", "after", "source", "op"],
    })
}

//! Building the sink's records from what the transform stage made of a batch: the
//! module's records with their origin (and change headers when asked for), and a dead
//! letter per failed row when the pipeline has a dead-letter topic.

use sluice_encoding::{Format, Framed, first_unframed};
use sluice_model::helpers::CHANGE_COLUMNS;
use sluice_model::{Column, JsonObject, Value};
use sluice_sink::{RecordOrigin, SinkRecord};
use sluice_source::ChangeBatch;
use sluice_source::arrow::array::{AsArray, RecordBatch};
use sluice_source::arrow::compute::cast;
use sluice_source::arrow::datatypes::{DataType, Int64Type, TimeUnit};

use sluice_engine::TransformError;

use std::sync::Arc;

use crate::config::{ErrorPolicy, PipelineConfig};
use crate::error::PipelineError;
use crate::schema_ids::SchemaIds;
use crate::stage_output::{FailedRow, StageOutput};

/// How a pipeline turns a stage's output into records for Kafka.
#[derive(Clone)]
pub(crate) struct RecordBuilder {
    pipeline: String,
    table: String,
    dead_letter_topic: Option<String>,
    change_headers: bool,
    policy: ErrorPolicy,
    schema_ids: Option<Arc<SchemaIds>>,
    /// What the helpers write, which the module's own bytes must not slip past.
    format: Format,
}

/// The records of one batch, ready for the sink.
pub(crate) struct BuiltRecords {
    /// The module's records, then the batch's dead letters.
    pub records: Vec<SinkRecord>,
    /// Bytes of their keys and values.
    pub bytes: u64,
    /// Rows the module failed on that the error policy let through.
    pub failed: u64,
}

/// The module that made a batch's records, as named in its dead letters.
pub(crate) struct MadeBy<'a> {
    pub name: &'a str,
    pub digest: &'a str,
}

impl RecordBuilder {
    /// The builder for `config`'s pipeline over `table` (the table as the feed names it),
    /// framing records with ids from `schema_ids`.
    pub(crate) fn new(
        config: &PipelineConfig,
        table: &str,
        schema_ids: Option<Arc<SchemaIds>>,
    ) -> RecordBuilder {
        RecordBuilder {
            pipeline: config.pipeline.name.clone(),
            table: table.to_string(),
            dead_letter_topic: config.transform.dead_letter_topic.clone(),
            change_headers: config.sink.change_headers,
            policy: config.transform.on_error,
            schema_ids,
            format: config.format(),
        }
    }

    /// Refuses a batch whose module wrote a key or value itself that the pipeline's
    /// format writes through the schema registry: produced, it would reach consumers
    /// without a schema id (and the pipeline would look as if it encoded it).
    pub(crate) fn refuse_unframed(
        &self,
        batch: &ChangeBatch,
        output: &StageOutput,
        framed: &[Framed],
    ) -> Result<(), PipelineError> {
        let parts = output
            .records
            .iter()
            .map(|r| (r.key.is_some(), r.value.is_some()));
        let Some((index, part)) = first_unframed(&self.format, parts, framed) else {
            return Ok(());
        };
        let first_row = batch.end.row_offset - batch.batch.num_rows() as u64;
        Err(PipelineError::Unframed {
            pipeline: self.pipeline.clone(),
            table: self.table.clone(),
            version: batch.end.version,
            row_in_version: first_row + u64::from(output.records[index].source_row),
            part: part.name(),
            format: part.asked(&self.format),
        })
    }

    /// `records` with the schema ids written into those the helpers framed (`framed`),
    /// or the error that stops the pipeline at `version` when the registry does not
    /// give them.
    pub(crate) async fn frame(
        &self,
        records: Vec<SinkRecord>,
        framed: Vec<Framed>,
        version: u64,
    ) -> Result<Vec<SinkRecord>, PipelineError> {
        let Some(ids) = &self.schema_ids else {
            // Only a module's own framing gets here: the helpers' needs a registry in
            // the config.
            let frames_anything = framed.iter().any(|f| {
                records[f.records.clone()].iter().any(|r| {
                    (f.key.is_some() && r.key.is_some()) || (f.value.is_some() && r.value.is_some())
                })
            });
            return match frames_anything {
                false => Ok(records),
                true => Err(PipelineError::NoRegistry {
                    pipeline: self.pipeline.clone(),
                    table: self.table.clone(),
                    version,
                }),
            };
        };
        ids.frame(records, framed)
            .await
            .map_err(|source| PipelineError::Registry {
                pipeline: self.pipeline.clone(),
                table: self.table.clone(),
                version,
                source: Box::new(source),
            })
    }

    /// The error that stops the pipeline when its module fails on `row` of `batch`.
    pub(crate) fn transform_error(
        &self,
        batch: &ChangeBatch,
        row: u32,
        source: TransformError,
    ) -> PipelineError {
        transform_error(&self.pipeline, &self.table, batch, row, source)
    }

    /// The records for `output`, the stage's work on `batch`.
    pub(crate) fn build(
        &self,
        batch: &ChangeBatch,
        output: StageOutput,
        made_by: MadeBy<'_>,
    ) -> BuiltRecords {
        let metadata = self
            .change_headers
            .then(|| ChangeMetadata::of(&batch.batch));
        let first_row = batch.end.row_offset - batch.batch.num_rows() as u64;
        let origin = |row: u32| RecordOrigin {
            version: batch.end.version,
            row: first_row + u64::from(row),
        };
        let mut bytes = 0u64;
        let mut records = Vec::with_capacity(output.records.len() + output.failed.len());
        for record in output.records {
            bytes += (record.key.as_ref().map_or(0, Vec::len)
                + record.value.as_ref().map_or(0, Vec::len)) as u64;
            let mut headers = record.headers;
            if let Some(metadata) = &metadata {
                headers.extend(metadata.headers(record.source_row as usize));
            }
            records.push(SinkRecord {
                topic: record.topic,
                partition: record.partition,
                key: record.key,
                value: record.value,
                headers,
                origin: Some(origin(record.source_row)),
            });
        }
        for failure in &output.failed {
            let origin = origin(failure.row);
            tracing::warn!(
                pipeline = self.pipeline,
                table = self.table,
                version = origin.version,
                row = origin.row,
                policy = ?self.policy,
                error = %failure.error,
                "The transform failed on a change row; the error policy lets the pipeline carry on without it."
            );
            if let Some(topic) = &self.dead_letter_topic {
                let value = dead_letter_value(&self.table, origin, &made_by, &batch.batch, failure);
                let key = format!("{}@{}#{}", self.table, origin.version, origin.row);
                bytes += (key.len() + value.len()) as u64;
                records.push(SinkRecord {
                    topic: Some(topic.clone()),
                    partition: None,
                    key: Some(key.into_bytes()),
                    value: Some(value.into_bytes()),
                    headers: Vec::new(),
                    origin: Some(origin),
                });
            }
        }
        BuiltRecords {
            records,
            bytes,
            failed: output.failed.len() as u64,
        }
    }
}

/// The error that stops a pipeline when its module fails on `row` of `batch`.
pub(crate) fn transform_error(
    pipeline: &str,
    table: &str,
    batch: &ChangeBatch,
    row: u32,
    source: TransformError,
) -> PipelineError {
    let first_row = batch.end.row_offset - batch.batch.num_rows() as u64;
    PipelineError::Transform {
        pipeline: pipeline.to_string(),
        table: table.to_string(),
        version: batch.end.version,
        row_in_version: first_row + u64::from(row),
        source,
    }
}

/// The change columns of a batch, for records' headers.
struct ChangeMetadata {
    change_types: Vec<String>,
    versions: Vec<i64>,
    timestamps: Vec<i64>,
}

impl ChangeMetadata {
    fn of(batch: &RecordBatch) -> ChangeMetadata {
        let column =
            |name: &str, to: DataType| batch.column_by_name(name).and_then(|c| cast(c, &to).ok());
        let integers = |name: &str, to: DataType| -> Vec<i64> {
            column(name, to)
                .and_then(|c| cast(&c, &DataType::Int64).ok())
                .map(|c| {
                    c.as_primitive::<Int64Type>()
                        .iter()
                        .map(Option::unwrap_or_default)
                        .collect()
                })
                .unwrap_or_default()
        };
        ChangeMetadata {
            change_types: column("_change_type", DataType::Utf8)
                .map(|c| {
                    c.as_string::<i32>()
                        .iter()
                        .map(|v| v.unwrap_or_default().to_string())
                        .collect()
                })
                .unwrap_or_default(),
            versions: integers("_commit_version", DataType::Int64),
            timestamps: integers(
                "_commit_timestamp",
                DataType::Timestamp(TimeUnit::Microsecond, None),
            ),
        }
    }

    fn headers(&self, row: usize) -> [(String, Vec<u8>); 3] {
        let text = |v: Option<String>| v.unwrap_or_default().into_bytes();
        [
            (
                "sluice.change_type".to_string(),
                text(self.change_types.get(row).cloned()),
            ),
            (
                "sluice.commit_version".to_string(),
                text(self.versions.get(row).map(i64::to_string)),
            ),
            (
                "sluice.commit_timestamp".to_string(),
                text(self.timestamps.get(row).map(i64::to_string)),
            ),
        ]
    }
}

/// A failed row as a dead letter's JSON value: where it came from, what failed, and
/// the row itself.
fn dead_letter_value(
    table: &str,
    origin: RecordOrigin,
    made_by: &MadeBy<'_>,
    batch: &RecordBatch,
    failed: &FailedRow,
) -> String {
    let row = failed.row as usize;
    let mut data = JsonObject::new();
    for (field, array) in batch.schema_ref().fields().iter().zip(batch.columns()) {
        if !CHANGE_COLUMNS.contains(&field.name().as_str()) {
            data.push(field.name(), &Column::new(array.as_ref()).value(row));
        }
    }
    let change = |name: &str| {
        batch
            .column_by_name(name)
            .map_or(Value::Null, |c| Column::new(c.as_ref()).value(row))
    };
    let mut value = JsonObject::new()
        .field("table", Value::Str(table))
        .field("version", Value::Int(origin.version as i64))
        .field("row", Value::Int(origin.row as i64))
        .field("change_type", change("_change_type"))
        .field("commit_timestamp", change("_commit_timestamp"))
        .field("module", Value::Str(made_by.name))
        .field("module_digest", Value::Str(made_by.digest))
        .field("error_kind", Value::Str(failed.kind))
        .field("error", Value::Str(&failed.error))
        .finish();
    // The row goes last, as a nested object.
    value.pop();
    value.push_str(",\"data\":");
    value.push_str(&data.finish());
    value.push('}');
    value
}

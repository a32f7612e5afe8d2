//! The batch resource a version-1 module reads and emits through, and the host side
//! of the contract's imports.

use delta_kernel::arrow::ipc::writer::StreamWriter;
use delta_kernel::arrow::record_batch::RecordBatch;
use sluice_model::helpers::{self as model, HelperError};
use sluice_model::{ChangeType, PackedRecords, Record};
use wasmtime::component::Resource;

use crate::contract::v1::sluice::transform::host;
use crate::contract::v1::sluice::transform::types as wit;
use crate::convert;
use crate::instance::HostState;
use crate::log::LogLevel as Level;

/// One batch during a `transform` call, and what the module made of it.
pub struct BatchState {
    batch: RecordBatch,
    pub(crate) records: Vec<Record>,
    pub(crate) rejected: Vec<(u32, String)>,
    /// The first contract violation in the module's output, reported after the call.
    pub(crate) bad_output: Option<String>,
    output_bytes: usize,
    max_output_bytes: usize,
}

impl BatchState {
    pub(crate) fn new(batch: RecordBatch, max_output_bytes: usize) -> BatchState {
        BatchState {
            batch,
            records: Vec::new(),
            rejected: Vec::new(),
            bad_output: None,
            output_bytes: 0,
            max_output_bytes,
        }
    }

    fn num_rows(&self) -> u32 {
        self.batch.num_rows() as u32
    }

    fn add(&mut self, records: Vec<Record>) {
        if self.bad_output.is_some() {
            return;
        }
        let bytes: usize = records
            .iter()
            .map(|r| {
                r.key.as_ref().map_or(0, Vec::len)
                    + r.value.as_ref().map_or(0, Vec::len)
                    + r.headers
                        .iter()
                        .map(|(k, v)| k.len() + v.len())
                        .sum::<usize>()
            })
            .sum();
        self.output_bytes += bytes;
        if self.output_bytes > self.max_output_bytes {
            self.bad_output = Some(format!(
                "the module emitted more than {} MiB of records for one batch (the [transform] max_output_mib limit)",
                self.max_output_bytes / (1024 * 1024)
            ));
            self.records.clear();
            return;
        }
        self.records.extend(records);
    }

    fn fail(&mut self, message: String) {
        self.bad_output.get_or_insert(message);
    }
}

fn batch<'a>(
    state: &'a mut HostState,
    handle: &Resource<BatchState>,
) -> wasmtime::Result<&'a mut BatchState> {
    Ok(state.table.get_mut(handle)?)
}

fn change_type(change: wit::ChangeType) -> ChangeType {
    match change {
        wit::ChangeType::Insert => ChangeType::Insert,
        wit::ChangeType::UpdatePreimage => ChangeType::UpdatePreimage,
        wit::ChangeType::UpdatePostimage => ChangeType::UpdatePostimage,
        wit::ChangeType::Delete => ChangeType::Delete,
    }
}

fn wit_change_type(change: ChangeType) -> wit::ChangeType {
    match change {
        ChangeType::Insert => wit::ChangeType::Insert,
        ChangeType::UpdatePreimage => wit::ChangeType::UpdatePreimage,
        ChangeType::UpdatePostimage => wit::ChangeType::UpdatePostimage,
        ChangeType::Delete => wit::ChangeType::Delete,
    }
}

fn scalar(value: wit::Scalar) -> model::Scalar {
    match value {
        wit::Scalar::Null => model::Scalar::Null,
        wit::Scalar::Boolean(b) => model::Scalar::Boolean(b),
        wit::Scalar::Integer(i) => model::Scalar::Integer(i),
        wit::Scalar::Float(f) => model::Scalar::Float(f),
        wit::Scalar::Text(s) => model::Scalar::Text(s),
    }
}

fn field_value(value: wit::FieldValue) -> model::FieldValue {
    match value {
        wit::FieldValue::Column(name) => model::FieldValue::Column(name),
        wit::FieldValue::Substring(s) => model::FieldValue::Substring {
            column: s.column,
            pos: s.pos,
            len: s.len,
        },
        wit::FieldValue::Constant(c) => model::FieldValue::Constant(scalar(c)),
        wit::FieldValue::ChangeType => model::FieldValue::ChangeType,
        wit::FieldValue::CommitVersion => model::FieldValue::CommitVersion,
        wit::FieldValue::CommitTimestamp => model::FieldValue::CommitTimestamp,
    }
}

fn encode_spec(spec: wit::EncodeSpec) -> model::EncodeSpec {
    model::EncodeSpec {
        rows: spec.rows,
        key: spec.key.map(field_value),
        value: match spec.value {
            wit::ValueEncoding::Json(fields) => model::ValueEncoding::Json(
                fields
                    .into_iter()
                    .map(|f| (f.name, field_value(f.value)))
                    .collect(),
            ),
            wit::ValueEncoding::JsonRow => model::ValueEncoding::JsonRow,
            wit::ValueEncoding::Tombstone => model::ValueEncoding::Tombstone,
        },
        delete_as_tombstone: spec.delete_as_tombstone,
        topic: spec.topic,
        headers: spec
            .headers
            .into_iter()
            .map(|(name, value)| (name, field_value(value)))
            .collect(),
    }
}

fn comparison(op: wit::Comparison) -> model::Comparison {
    match op {
        wit::Comparison::Equal => model::Comparison::Equal,
        wit::Comparison::NotEqual => model::Comparison::NotEqual,
        wit::Comparison::Less => model::Comparison::Less,
        wit::Comparison::LessOrEqual => model::Comparison::LessOrEqual,
        wit::Comparison::Greater => model::Comparison::Greater,
        wit::Comparison::GreaterOrEqual => model::Comparison::GreaterOrEqual,
        wit::Comparison::IsNull => model::Comparison::IsNull,
        wit::Comparison::IsNotNull => model::Comparison::IsNotNull,
    }
}

/// The batch as one Arrow IPC stream.
pub(crate) fn arrow_ipc(batch: &RecordBatch) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    let mut writer =
        StreamWriter::try_new(&mut bytes, &batch.schema()).map_err(|e| e.to_string())?;
    writer.write(batch).map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())?;
    drop(writer);
    Ok(bytes)
}

fn unpack(packed: wit::PackedRecords, num_rows: u32) -> Result<Vec<Record>, String> {
    PackedRecords {
        data: packed.data,
        source_rows: packed.source_rows,
        key_lengths: packed.key_lengths,
        value_lengths: packed.value_lengths,
        topics: packed.topics,
        topic_indexes: packed.topic_indexes,
        partitions: packed.partitions,
        header_names: packed.header_names,
        header_counts: packed.header_counts,
        header_name_indexes: packed.header_name_indexes,
        header_value_lengths: packed.header_value_lengths,
    }
    .unpack(num_rows)
    .map_err(|e| format!("malformed packed records: {e}"))
}

fn helper_message(e: HelperError) -> String {
    e.0
}

impl host::HostBatch for HostState {
    fn num_rows(&mut self, handle: Resource<BatchState>) -> wasmtime::Result<u32> {
        Ok(batch(self, &handle)?.num_rows())
    }

    fn arrow_ipc(&mut self, handle: Resource<BatchState>) -> wasmtime::Result<Vec<u8>> {
        let state = batch(self, &handle)?;
        arrow_ipc(&state.batch)
            .map_err(|e| wasmtime::Error::msg(format!("cannot encode the batch as Arrow IPC: {e}")))
    }

    fn columns(
        &mut self,
        handle: Resource<BatchState>,
        names: Vec<String>,
    ) -> wasmtime::Result<Result<Vec<wit::Column>, String>> {
        Ok(convert::columns(&batch(self, &handle)?.batch, &names))
    }

    fn change_types(
        &mut self,
        handle: Resource<BatchState>,
    ) -> wasmtime::Result<Vec<wit::ChangeType>> {
        let changes = model::change_types(&batch(self, &handle)?.batch)
            .map_err(|e| wasmtime::Error::msg(e.0))?;
        Ok(changes.into_iter().map(wit_change_type).collect())
    }

    fn commit_versions(&mut self, handle: Resource<BatchState>) -> wasmtime::Result<Vec<i64>> {
        Ok(convert::commit_versions(&batch(self, &handle)?.batch))
    }

    fn commit_timestamps(&mut self, handle: Resource<BatchState>) -> wasmtime::Result<Vec<i64>> {
        Ok(convert::commit_timestamps(&batch(self, &handle)?.batch))
    }

    fn select_change_types(
        &mut self,
        handle: Resource<BatchState>,
        types: Vec<wit::ChangeType>,
        within: Option<Vec<u32>>,
    ) -> wasmtime::Result<Vec<u32>> {
        let state = batch(self, &handle)?;
        let types: Vec<_> = types.into_iter().map(change_type).collect();
        match model::select_change_types(&state.batch, &types, within.as_deref()) {
            Ok(rows) => Ok(rows),
            Err(e) => {
                // The signature has no error: an out-of-range row is the module's bug.
                state.fail(format!("select-change-types: {}", e.0));
                Ok(Vec::new())
            }
        }
    }

    fn select_where(
        &mut self,
        handle: Resource<BatchState>,
        predicate: wit::Predicate,
        within: Option<Vec<u32>>,
    ) -> wasmtime::Result<Result<Vec<u32>, String>> {
        let state = batch(self, &handle)?;
        let predicate = model::Predicate {
            column: predicate.column,
            op: comparison(predicate.op),
            value: scalar(predicate.value),
        };
        Ok(
            model::select_where(&state.batch, &predicate, within.as_deref())
                .map_err(helper_message),
        )
    }

    fn emit_encoded(
        &mut self,
        handle: Resource<BatchState>,
        spec: wit::EncodeSpec,
    ) -> wasmtime::Result<Result<u32, String>> {
        let state = batch(self, &handle)?;
        let mut records = Vec::new();
        Ok(
            model::encode(&state.batch, &encode_spec(spec), &mut records).map_or_else(
                |e| Err(e.0),
                |count| {
                    state.add(records);
                    Ok(count)
                },
            ),
        )
    }

    fn emit_packed(
        &mut self,
        handle: Resource<BatchState>,
        records: wit::PackedRecords,
    ) -> wasmtime::Result<()> {
        let state = batch(self, &handle)?;
        match unpack(records, state.num_rows()) {
            Ok(records) => state.add(records),
            Err(message) => state.fail(message),
        }
        Ok(())
    }

    fn emit(
        &mut self,
        handle: Resource<BatchState>,
        records: Vec<wit::OutputRecord>,
    ) -> wasmtime::Result<()> {
        let state = batch(self, &handle)?;
        let num_rows = state.num_rows();
        if let Some(bad) = records.iter().find(|r| r.source_row >= num_rows) {
            state.fail(format!(
                "a record names source row {} but the batch has {num_rows} rows",
                bad.source_row
            ));
            return Ok(());
        }
        state.add(
            records
                .into_iter()
                .map(|r| Record {
                    source_row: r.source_row,
                    topic: r.topic,
                    partition: r.partition,
                    key: r.key,
                    value: r.value,
                    headers: r.headers.into_iter().map(|h| (h.key, h.value)).collect(),
                })
                .collect(),
        );
        Ok(())
    }

    fn reject(
        &mut self,
        handle: Resource<BatchState>,
        row: u32,
        message: String,
    ) -> wasmtime::Result<()> {
        let state = batch(self, &handle)?;
        if row >= state.num_rows() {
            state.fail(format!(
                "the module rejected row {row} but the batch has {} rows",
                state.num_rows()
            ));
        } else {
            state.rejected.push((row, message));
        }
        Ok(())
    }

    fn drop(&mut self, handle: Resource<BatchState>) -> wasmtime::Result<()> {
        // The host owns batches and removes them after the call; a module only ever
        // holds a borrow, so there is nothing to do when it lets go.
        let _ = handle;
        Ok(())
    }
}

impl host::Host for HostState {
    fn log(&mut self, level: wit::LogLevel, message: String) -> wasmtime::Result<()> {
        let level = match level {
            wit::LogLevel::Trace => Level::Trace,
            wit::LogLevel::Debug => Level::Debug,
            wit::LogLevel::Info => Level::Info,
            wit::LogLevel::Warn => Level::Warn,
            wit::LogLevel::Error => Level::Error,
        };
        self.log.log(level, &message);
        Ok(())
    }
}

impl wit::Host for HostState {}

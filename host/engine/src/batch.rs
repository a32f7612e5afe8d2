//! The host side of the contract's imports: the methods of the batch resource a
//! version-1 module reads and emits through, and the log.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::Arc;

use delta_kernel::arrow::ipc::writer::StreamWriter;
use delta_kernel::arrow::record_batch::RecordBatch;
use sluice_encoding::{Framed, OwnSchema, SchemaKind};
use sluice_model::helpers::{self as model, HelperError, RecordSink};
use sluice_model::{ChangeType, PackedRecords, Record};
use wasmtime::component::Resource;

use crate::budget::{
    CallDeadline, HostLimitExceeded, MAX_ENCODED_FIELDS, MAX_ENCODED_HEADERS, MAX_MESSAGE_BYTES,
    OutputBudget, check_count, check_result, held_record_bytes, record_bytes, rejection_bytes,
    truncated,
};
use crate::contract::v1::sluice::transform::host;
use crate::contract::v1::sluice::transform::types as wit;
use crate::convert;
use crate::log::LogLevel as Level;
use crate::sizes;
use crate::state::{BatchState, HostState};

/// Records `emit-encoded` makes, charged to the batch's output budget and checked
/// against the deadline one by one, so a costly spec stops as soon as it crosses.
struct ChargedRecords<'a> {
    records: &'a mut Vec<Record>,
    output: &'a mut OutputBudget,
    deadline: CallDeadline,
    stopped: Option<HostLimitExceeded>,
}

impl RecordSink for ChargedRecords<'_> {
    fn push_record(&mut self, record: Record) -> ControlFlow<()> {
        let charged = self
            .deadline
            .check(EMIT_ENCODED)
            .and_then(|()| self.output.charge(EMIT_ENCODED, record_bytes(&record)));
        match charged {
            Ok(()) => {
                self.records.push(record);
                ControlFlow::Continue(())
            }
            Err(limit) => {
                self.stopped = Some(limit);
                ControlFlow::Break(())
            }
        }
    }
}

const COLUMNS: &str = "columns";
const ARROW_IPC: &str = "arrow-ipc";
const EMIT_ENCODED: &str = "emit-encoded";
const EMIT_PACKED: &str = "emit-packed";
const EMIT: &str = "emit";
const EMIT_FRAMED: &str = "emit-framed";
const REJECT: &str = "reject";

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

fn schema_kind(kind: wit::SchemaKind) -> SchemaKind {
    match kind {
        wit::SchemaKind::Avro => SchemaKind::Avro,
        wit::SchemaKind::JsonSchema => SchemaKind::Json,
        wit::SchemaKind::Protobuf => SchemaKind::Protobuf,
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

/// What the host will hold for packed records once unpacked: every record's frame, the
/// data (keys, values and header values are copied out of it), and a copy of a topic or
/// header name for each record or header naming it. Computed from the lists, before
/// anything is copied.
fn unpacked_bytes(packed: &wit::PackedRecords) -> usize {
    let name_len = |names: &[String], index: usize| names.get(index).map_or(0, String::len);
    let topics: usize = packed
        .topic_indexes
        .iter()
        .map(|&t| {
            (t as usize)
                .checked_sub(1)
                .map_or(0, |t| name_len(&packed.topics, t))
        })
        .sum();
    let header_names: usize = packed
        .header_name_indexes
        .iter()
        .map(|&i| name_len(&packed.header_names, i as usize))
        .sum();
    packed.source_rows.len() * std::mem::size_of::<Record>()
        + packed.data.len()
        + topics
        + packed.header_name_indexes.len() * std::mem::size_of::<(String, Vec<u8>)>()
        + header_names
}

/// What the host will hold for a record `emit` was given.
fn output_record_bytes(record: &wit::OutputRecord) -> usize {
    held_record_bytes(
        record.topic.as_ref(),
        record.key.as_ref(),
        record.value.as_ref(),
        record.headers.iter().map(|h| (h.key.len(), h.value.len())),
    )
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
        self.deadline.check(ARROW_IPC)?;
        let cap = self.limiter.memory_limit();
        let state = batch(self, &handle)?;
        let bytes = state
            .batch
            .columns()
            .iter()
            .map(|c| sizes::slice_bytes(c))
            .sum();
        check_result(ARROW_IPC, bytes, cap)?;
        arrow_ipc(&state.batch)
            .map_err(|e| wasmtime::Error::msg(format!("cannot encode the batch as Arrow IPC: {e}")))
    }

    fn columns(
        &mut self,
        handle: Resource<BatchState>,
        names: Vec<String>,
    ) -> wasmtime::Result<Result<Vec<wit::Column>, String>> {
        self.deadline.check(COLUMNS)?;
        let cap = self.limiter.memory_limit();
        let state = batch(self, &handle)?;
        let leaves = convert::data_columns(&state.batch);
        let known: HashSet<&str> = leaves.iter().map(|leaf| leaf.name.as_str()).collect();
        // Unknown names are refused before any work; known names beyond the batch's
        // columns can only repeat one, each time converting it again.
        if names.iter().all(|name| known.contains(name.as_str())) {
            check_count(COLUMNS, "column names", names.len(), leaves.len(), || {
                format!("the batch has {} data columns", leaves.len())
            })?;
        }
        check_result(COLUMNS, sizes::columns_result_bytes(&leaves, &names), cap)?;
        Ok(convert::columns(&leaves, &names))
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
        const CALL: &str = "select-change-types";
        self.deadline.check(CALL)?;
        let state = batch(self, &handle)?;
        if let Some(rows) = &within {
            state.check_rows(CALL, rows.len())?;
        }
        // At most the four change types, however long the list: the selection checks
        // each row against every entry.
        let mut distinct: Vec<ChangeType> = Vec::with_capacity(4);
        for change in types.into_iter().map(change_type) {
            if !distinct.contains(&change) {
                distinct.push(change);
            }
        }
        let types = distinct;
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
        const CALL: &str = "select-where";
        self.deadline.check(CALL)?;
        let state = batch(self, &handle)?;
        if let Some(rows) = &within {
            state.check_rows(CALL, rows.len())?;
        }
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
        let deadline = self.deadline;
        deadline.check(EMIT_ENCODED)?;
        let format = self.format.clone();
        let state = batch(self, &handle)?;
        state.check_rows(EMIT_ENCODED, spec.rows.len())?;
        if let wit::ValueEncoding::Json(fields) = &spec.value {
            check_count(
                EMIT_ENCODED,
                "JSON fields",
                fields.len(),
                MAX_ENCODED_FIELDS,
                || "the contract's limit per call".to_string(),
            )?;
        }
        check_count(
            EMIT_ENCODED,
            "headers",
            spec.headers.len(),
            MAX_ENCODED_HEADERS,
            || "the contract's limit per call".to_string(),
        )?;
        if state.bad_output.is_some() {
            return Ok(Ok(0));
        }
        // Records are charged once made; one that could pass the whole cap is refused
        // before the host builds it.
        let largest = sizes::largest_encoded_record_bytes(&state.batch, &spec);
        state.output.check_record(EMIT_ENCODED, largest)?;
        // Records go straight to the batch's output: encode refuses a bad spec before it
        // makes any, and a crossed limit traps the call.
        let mut sink = ChargedRecords {
            records: &mut state.records,
            output: &mut state.output,
            deadline,
            stopped: None,
        };
        let first = sink.records.len();
        let encoded = sluice_encoding::encode(&state.batch, &encode_spec(spec), &format, &mut sink);
        if let Some(limit) = sink.stopped {
            return Err(limit.into());
        }
        let encoded = match encoded {
            Ok(encoded) => encoded,
            Err(e) => return Ok(Err(helper_message(e))),
        };
        if encoded.key.is_some() || encoded.value.is_some() {
            state.framed.push(Framed {
                records: first..state.records.len(),
                key: encoded.key,
                value: encoded.value,
            });
        }
        Ok(Ok(encoded.rows))
    }

    fn emit_packed(
        &mut self,
        handle: Resource<BatchState>,
        records: wit::PackedRecords,
    ) -> wasmtime::Result<()> {
        self.deadline.check(EMIT_PACKED)?;
        let state = batch(self, &handle)?;
        if state.bad_output.is_some() {
            return Ok(());
        }
        state.output.charge(EMIT_PACKED, unpacked_bytes(&records))?;
        match unpack(records, state.num_rows()) {
            Ok(records) => state.records.extend(records),
            Err(message) => state.fail(message),
        }
        Ok(())
    }

    fn emit_framed(
        &mut self,
        handle: Resource<BatchState>,
        records: wit::PackedRecords,
        framing: wit::Framing,
    ) -> wasmtime::Result<()> {
        self.deadline.check(EMIT_FRAMED)?;
        let deadline = self.deadline;
        if batch(self, &handle)?.bad_output.is_some() {
            return Ok(());
        }
        let mut parse = |schema: Option<wit::OwnSchema>| {
            schema
                .map(|s| self.own_schemas.get(schema_kind(s.kind), s.text, s.name))
                .transpose()
        };
        let schemas = parse(framing.key).and_then(|key| Ok((key, parse(framing.value)?)));
        let state = batch(self, &handle)?;
        let (key, value) = match schemas {
            Ok(schemas) => schemas,
            Err(message) => {
                state.fail(format!("{EMIT_FRAMED}: {message}"));
                return Ok(());
            }
        };
        state.output.charge(EMIT_FRAMED, unpacked_bytes(&records))?;
        let mut records = match unpack(records, state.num_rows()) {
            Ok(records) => records,
            Err(message) => {
                state.fail(message);
                return Ok(());
            }
        };
        let header_len = |schema: &Option<Arc<OwnSchema>>, bytes: &Option<Vec<u8>>| {
            schema
                .as_ref()
                .filter(|_| bytes.is_some())
                .map_or(0, |s| s.header_len())
        };
        let headers = records
            .iter()
            .map(|r| header_len(&key, &r.key) + header_len(&value, &r.value))
            .sum();
        state.output.charge(EMIT_FRAMED, headers)?;
        for (index, record) in records.iter_mut().enumerate() {
            if index % 64 == 0 {
                deadline.check(EMIT_FRAMED)?;
            }
            for (what, schema, bytes) in [
                ("key", &key, &mut record.key),
                ("value", &value, &mut record.value),
            ] {
                let (Some(schema), Some(bytes)) = (schema, bytes.as_mut()) else {
                    continue;
                };
                match schema.frame(bytes) {
                    Ok(framed) => *bytes = framed,
                    Err(e) => {
                        state.fail(format!(
                            "record {index} of an {EMIT_FRAMED} call (row {}): its {what} does not decode with its {} schema: {e}",
                            record.source_row,
                            schema.writer.kind.registry_name()
                        ));
                        return Ok(());
                    }
                }
            }
        }
        let first = state.records.len();
        state.records.extend(records);
        let key = key.map(|s| s.writer.clone());
        let value = value.map(|s| s.writer.clone());
        let same = |a: &Option<Arc<_>>, b: &Option<Arc<_>>| match (a, b) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        // A call that continues the last one's run with the same schemas extends its
        // range, so the pipeline looks ids up once per run, not once per call.
        match state.framed.last_mut() {
            Some(last)
                if last.records.end == first
                    && same(&last.key, &key)
                    && same(&last.value, &value) =>
            {
                last.records.end = state.records.len();
            }
            _ if first < state.records.len() => state.framed.push(Framed {
                records: first..state.records.len(),
                key,
                value,
            }),
            _ => {}
        }
        Ok(())
    }

    fn emit(
        &mut self,
        handle: Resource<BatchState>,
        records: Vec<wit::OutputRecord>,
    ) -> wasmtime::Result<()> {
        self.deadline.check(EMIT)?;
        let state = batch(self, &handle)?;
        let num_rows = state.num_rows();
        if let Some(bad) = records.iter().find(|r| r.source_row >= num_rows) {
            state.fail(format!(
                "a record names source row {} but the batch has {num_rows} rows",
                bad.source_row
            ));
            return Ok(());
        }
        if state.bad_output.is_some() {
            return Ok(());
        }
        // Charged before they are converted: the contents are moved, not copied, but
        // every record gets a new frame.
        state
            .output
            .charge(EMIT, records.iter().map(output_record_bytes).sum())?;
        state.records.extend(records.into_iter().map(|r| Record {
            source_row: r.source_row,
            topic: r.topic,
            partition: r.partition,
            key: r.key,
            value: r.value,
            headers: r.headers.into_iter().map(|h| (h.key, h.value)).collect(),
        }));
        Ok(())
    }

    fn reject(
        &mut self,
        handle: Resource<BatchState>,
        row: u32,
        message: String,
    ) -> wasmtime::Result<()> {
        let state = batch(self, &handle)?;
        let num_rows = state.batch.num_rows();
        if row as usize >= num_rows {
            state.fail(format!(
                "the module rejected row {row} but the batch has {num_rows} rows"
            ));
            return Ok(());
        }
        if state.rejected_rows.is_empty() {
            state.rejected_rows = vec![false; num_rows];
        }
        // One rejection per row, the first reason kept, so the rejections a module can
        // make the host hold are bounded by the batch.
        if std::mem::replace(&mut state.rejected_rows[row as usize], true) {
            return Ok(());
        }
        let message = truncated(message, MAX_MESSAGE_BYTES);
        state
            .output
            .charge(REJECT, rejection_bytes(message.len()))?;
        state.rejected.push((row, message));
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

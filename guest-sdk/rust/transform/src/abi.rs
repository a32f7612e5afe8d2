//! The contract's bindings as the SDK calls them: the host's batch handle, the log
//! call, and the SDK's types in the contract's form. Every call into the host is
//! here, and this module imports no other module of the SDK that imports it back, as
//! Redpanda's SDK keeps its ABI in one module.

use std::mem::ManuallyDrop;

use arrow_array::RecordBatch;
use sluice_model::helpers::{Comparison, EncodeSpec, FieldValue, Predicate, Scalar, ValueEncoding};
use sluice_model::{ChangeType, PackedRecords};
use sluice_transform_sys::sluice::transform::host;
use sluice_transform_sys::sluice::transform::lookup;
use sluice_transform_sys::sluice::transform::state;
use sluice_transform_sys::sluice::transform::types as wit;

use crate::decode::{from_ipc, from_typed, from_typed_columns};
use crate::error::Error;
use crate::framing::{Framing, OwnSchema, SchemaKind};

/// How the module reads its batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Input {
    /// Arrow IPC bytes, decoded in the guest.
    Arrow,
    /// The contract's typed columns, assembled into Arrow arrays in the guest.
    Typed,
}

/// The host's batch during one `transform` call.
pub(crate) struct Handle {
    // Borrowed from the call: it must never be dropped here, or the host would see the
    // borrowed resource released twice.
    batch: ManuallyDrop<host::Batch>,
    input: Input,
}

impl Handle {
    /// The batch the host passed to this `transform` call, read as `input` says.
    ///
    /// # Safety
    ///
    /// The handle must not outlive the call that passed `batch`.
    pub(crate) unsafe fn borrow(batch: &host::Batch, input: Input) -> Handle {
        // SAFETY: the caller keeps the handle within the call the borrow is valid for,
        // and `Handle` never drops it.
        let batch = ManuallyDrop::new(unsafe { host::Batch::from_handle(batch.handle()) });
        Handle { batch, input }
    }

    pub(crate) fn num_rows(&self) -> usize {
        self.batch.num_rows() as usize
    }

    /// The whole batch as Arrow, change columns included.
    pub(crate) fn read(&self) -> Result<RecordBatch, Error> {
        match self.input {
            Input::Arrow => from_ipc(self.batch.arrow_ipc()),
            Input::Typed => {
                let columns = self.batch.columns(&[]).map_err(Error::Batch)?;
                from_typed(
                    columns,
                    &self.change_types(),
                    self.batch.commit_versions(),
                    self.batch.commit_timestamps(),
                )
            }
        }
    }

    /// Each row's change type, as the host knows it (no strings parsed in the module).
    pub(crate) fn change_types(&self) -> Vec<ChangeType> {
        self.batch
            .change_types()
            .into_iter()
            .map(from_wit_change)
            .collect()
    }

    pub(crate) fn select_change_types(
        &self,
        types: &[ChangeType],
        within: Option<&[u32]>,
    ) -> Vec<u32> {
        let types: Vec<_> = types.iter().map(|&t| change_type(t)).collect();
        self.batch.select_change_types(&types, within)
    }

    pub(crate) fn select_where(
        &self,
        predicate: &Predicate,
        within: Option<&[u32]>,
    ) -> Result<Vec<u32>, Error> {
        let predicate = wit::Predicate {
            column: predicate.column.clone(),
            op: comparison(predicate.op),
            value: scalar(&predicate.value),
        };
        self.batch
            .select_where(&predicate, within)
            .map_err(Error::Batch)
    }

    pub(crate) fn emit_encoded(&self, spec: &EncodeSpec) -> Result<u32, Error> {
        self.batch
            .emit_encoded(&encode_spec(spec))
            .map_err(Error::Batch)
    }

    /// Hands a run of records to the host: framed by it when the run has a framing.
    pub(crate) fn emit_run(&self, packed: PackedRecords, framing: Option<Framing>) {
        if packed.is_empty() {
            return;
        }
        let packed = wit::PackedRecords {
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
        };
        match framing {
            None => self.batch.emit_packed(&packed),
            Some(framing) => self.batch.emit_framed(
                &packed,
                &wit::Framing {
                    key: framing.key_schema().map(own_schema),
                    value: framing.value_schema().map(own_schema),
                },
            ),
        }
    }

    pub(crate) fn reject(&self, row: u32, message: &str) {
        self.batch.reject(row, message);
    }

    /// Adds a lookup's columns to the host's batch; returns how many rows found one.
    pub(crate) fn join(
        &self,
        table: &str,
        key: &[String],
        columns: &[String],
        prefix: Option<&str>,
    ) -> Result<u32, Error> {
        let spec = lookup::JoinSpec {
            table: table.to_string(),
            key: key.to_vec(),
            columns: columns.to_vec(),
            prefix: prefix.map(str::to_string),
        };
        lookup::join(&self.batch, &spec).map_err(Error::Batch)
    }

    /// Another handle on the same batch, read afresh.
    pub(crate) fn again(&self) -> Handle {
        // SAFETY: the new handle lives within the same call as this one.
        unsafe { Handle::borrow(&self.batch, self.input) }
    }
}

/// The rows of lookup `table` with `keys`: per key whether one was found, and the
/// lookup's columns as Arrow (nulls where none was).
pub(crate) fn lookup_get(
    table: &str,
    keys: &[Vec<Scalar>],
) -> Result<(Vec<bool>, RecordBatch), Error> {
    let keys: Vec<Vec<wit::Scalar>> = keys
        .iter()
        .map(|key| key.iter().map(scalar).collect())
        .collect();
    let found = lookup::get(table, &keys).map_err(Error::Batch)?;
    let rows = from_typed_columns(found.columns)?;
    Ok((found.found, rows))
}

/// Sends a log message to the host.
pub(crate) fn log(level: wit::LogLevel, message: &str) {
    host::log(level, message);
}

fn own_schema(schema: &OwnSchema) -> wit::OwnSchema {
    wit::OwnSchema {
        kind: match schema.kind {
            SchemaKind::Avro => wit::SchemaKind::Avro,
            SchemaKind::JsonSchema => wit::SchemaKind::JsonSchema,
            SchemaKind::Protobuf => wit::SchemaKind::Protobuf,
        },
        text: schema.text.clone(),
        name: schema.name.clone(),
    }
}

fn change_type(change: ChangeType) -> wit::ChangeType {
    match change {
        ChangeType::Insert => wit::ChangeType::Insert,
        ChangeType::UpdatePreimage => wit::ChangeType::UpdatePreimage,
        ChangeType::UpdatePostimage => wit::ChangeType::UpdatePostimage,
        ChangeType::Delete => wit::ChangeType::Delete,
    }
}

fn from_wit_change(change: wit::ChangeType) -> ChangeType {
    match change {
        wit::ChangeType::Insert => ChangeType::Insert,
        wit::ChangeType::UpdatePreimage => ChangeType::UpdatePreimage,
        wit::ChangeType::UpdatePostimage => ChangeType::UpdatePostimage,
        wit::ChangeType::Delete => ChangeType::Delete,
    }
}

fn comparison(op: Comparison) -> wit::Comparison {
    match op {
        Comparison::Equal => wit::Comparison::Equal,
        Comparison::NotEqual => wit::Comparison::NotEqual,
        Comparison::Less => wit::Comparison::Less,
        Comparison::LessOrEqual => wit::Comparison::LessOrEqual,
        Comparison::Greater => wit::Comparison::Greater,
        Comparison::GreaterOrEqual => wit::Comparison::GreaterOrEqual,
        Comparison::IsNull => wit::Comparison::IsNull,
        Comparison::IsNotNull => wit::Comparison::IsNotNull,
    }
}

fn scalar(value: &Scalar) -> wit::Scalar {
    match value {
        Scalar::Null => wit::Scalar::Null,
        Scalar::Boolean(b) => wit::Scalar::Boolean(*b),
        Scalar::Integer(i) => wit::Scalar::Integer(*i),
        Scalar::Float(f) => wit::Scalar::Float(*f),
        Scalar::Text(s) => wit::Scalar::Text(s.clone()),
    }
}

fn field_value(value: &FieldValue) -> wit::FieldValue {
    match value {
        FieldValue::Column(name) => wit::FieldValue::Column(name.clone()),
        FieldValue::Substring { column, pos, len } => wit::FieldValue::Substring(wit::Substring {
            column: column.clone(),
            pos: *pos,
            len: *len,
        }),
        FieldValue::Constant(value) => wit::FieldValue::Constant(scalar(value)),
        FieldValue::ChangeType => wit::FieldValue::ChangeType,
        FieldValue::CommitVersion => wit::FieldValue::CommitVersion,
        FieldValue::CommitTimestamp => wit::FieldValue::CommitTimestamp,
    }
}

fn encode_spec(spec: &EncodeSpec) -> wit::EncodeSpec {
    wit::EncodeSpec {
        rows: spec.rows.clone(),
        key: spec.key.as_ref().map(field_value),
        value: match &spec.value {
            ValueEncoding::Json(fields) => wit::ValueEncoding::Json(
                fields
                    .iter()
                    .map(|(name, value)| wit::JsonField {
                        name: name.clone(),
                        value: field_value(value),
                    })
                    .collect(),
            ),
            ValueEncoding::JsonRow => wit::ValueEncoding::JsonRow,
            ValueEncoding::Tombstone => wit::ValueEncoding::Tombstone,
        },
        delete_as_tombstone: spec.delete_as_tombstone,
        topic: spec.topic.clone(),
        headers: spec
            .headers
            .iter()
            .map(|(name, value)| (name.clone(), field_value(value)))
            .collect(),
    }
}

/// The value under `key` in the pipeline's state.
pub(crate) fn state_get(key: &[u8]) -> Option<Vec<u8>> {
    state::get(key)
}

/// The values under `keys`, in one host call.
pub(crate) fn state_get_many(keys: &[Vec<u8>]) -> Vec<Option<Vec<u8>>> {
    state::get_many(keys)
}

/// Sets the value under `key`.
pub(crate) fn state_put(key: &[u8], value: &[u8]) {
    state::put(key, value);
}

/// Removes `key`.
pub(crate) fn state_delete(key: &[u8]) {
    state::delete(key);
}

/// Up to `limit` entries under `prefix` after `start_after`.
pub(crate) fn state_scan(
    prefix: &[u8],
    start_after: Option<&[u8]>,
    limit: u32,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    state::scan(prefix, start_after, limit)
        .into_iter()
        .map(|entry| (entry.key, entry.value))
        .collect()
}

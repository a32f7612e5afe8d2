//! Glue between the generated bindings and the SDK: what `export!` expands to calls
//! these. Not part of the public API.

use std::mem::ManuallyDrop;

use arrow_array::RecordBatch;
pub use sluice_transform_sys as sys;

use crate::batch::Batch;
use crate::log::Level;
use crate::output::{Error, Output};
use crate::{Params, Transform};
use sys::sluice::transform::host;
use sys::sluice::transform::types as wit;

/// The reserved parameter that picks how batches are read.
pub const INPUT_PARAM: &str = "sluice.input";

/// How the module reads its batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
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
    pub(crate) fn num_rows(&self) -> usize {
        self.batch.num_rows() as usize
    }

    /// The whole batch as Arrow, change columns included.
    pub(crate) fn read(&self) -> Result<RecordBatch, Error> {
        match self.input {
            Input::Arrow => crate::batch::from_ipc(self.batch.arrow_ipc()),
            Input::Typed => {
                let columns = self.batch.columns(&[]).map_err(Error::Batch)?;
                crate::batch::from_typed(
                    columns,
                    self.batch.change_types(),
                    self.batch.commit_versions(),
                    self.batch.commit_timestamps(),
                )
            }
        }
    }

    /// Each row's change type, as the host knows it (no strings parsed in the module).
    pub(crate) fn change_types(&self) -> Vec<crate::ChangeType> {
        self.batch
            .change_types()
            .into_iter()
            .map(from_wit_change)
            .collect()
    }

    pub(crate) fn select_change_types(
        &self,
        types: &[crate::ChangeType],
        within: Option<&[u32]>,
    ) -> Vec<u32> {
        let types: Vec<_> = types.iter().map(|&t| change_type(t)).collect();
        self.batch.select_change_types(&types, within)
    }

    pub(crate) fn select_where(
        &self,
        predicate: &crate::Predicate,
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

    pub(crate) fn emit_encoded(&self, spec: &crate::EncodeSpec) -> Result<u32, Error> {
        self.batch
            .emit_encoded(&encode_spec(spec))
            .map_err(Error::Batch)
    }

    /// Hands a run of records to the host: framed by it when the run has a framing.
    pub(crate) fn emit_run(&self, (packed, framing): crate::output::Run) {
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

    fn reject(&self, row: u32, message: &str) {
        self.batch.reject(row, message);
    }
}

/// Builds the transform from the host's parameters, less the reserved one that picks
/// the input path.
pub fn init<T: Transform>(params: Vec<(String, String)>) -> Result<(T, Input), String> {
    let mut input = Input::Arrow;
    let mut rest = Vec::with_capacity(params.len());
    for (name, value) in params {
        if name != INPUT_PARAM {
            rest.push((name, value));
            continue;
        }
        input = match value.as_str() {
            "arrow" => Input::Arrow,
            "typed" => Input::Typed,
            other => {
                return Err(format!(
                    "Parameter {INPUT_PARAM} is `{other}`; use `arrow` (the default) or `typed`."
                ));
            }
        };
    }
    Ok((T::init(&Params::from_pairs(rest))?, input))
}

/// Runs one batch through the transform and hands its output to the host.
pub fn transform<T: Transform>(
    state: Option<&mut (T, Input)>,
    batch: &host::Batch,
) -> Result<(), wit::TransformError> {
    let Some((transform, input)) = state else {
        return Err(wit::TransformError::Batch(
            "The host called transform before init.".to_string(),
        ));
    };
    // SAFETY: the handle is a borrow valid for this call; `Handle` never drops it.
    let handle = Handle {
        batch: ManuallyDrop::new(unsafe { host::Batch::from_handle(batch.handle()) }),
        input: *input,
    };
    let batch = Batch::from_guest(handle);
    let mut out = Output::for_guest();
    let result = transform.transform(&batch, &mut out);
    let handle = batch.guest().expect("a guest batch has a handle");
    let (runs, rejected) = out.into_parts();
    for run in runs {
        handle.emit_run(run);
    }
    for (row, message) in &rejected {
        handle.reject(*row, message);
    }
    result.map_err(|e| match e {
        Error::Row { row, message } => wit::TransformError::Row(wit::RowError { row, message }),
        Error::Batch(message) => wit::TransformError::Batch(message),
    })
}

/// Sends a log message to the host; natively, to stderr.
pub(crate) fn log(level: Level, message: &str) {
    if cfg!(target_arch = "wasm32") {
        let level = match level {
            Level::Trace => wit::LogLevel::Trace,
            Level::Debug => wit::LogLevel::Debug,
            Level::Info => wit::LogLevel::Info,
            Level::Warn => wit::LogLevel::Warn,
            Level::Error => wit::LogLevel::Error,
        };
        host::log(level, message);
    } else {
        eprintln!("[{level:?}] {message}");
    }
}

fn own_schema(schema: &crate::OwnSchema) -> wit::OwnSchema {
    wit::OwnSchema {
        kind: match schema.kind {
            crate::SchemaKind::Avro => wit::SchemaKind::Avro,
            crate::SchemaKind::JsonSchema => wit::SchemaKind::JsonSchema,
            crate::SchemaKind::Protobuf => wit::SchemaKind::Protobuf,
        },
        text: schema.text.clone(),
        name: schema.name.clone(),
    }
}

fn change_type(change: crate::ChangeType) -> wit::ChangeType {
    match change {
        crate::ChangeType::Insert => wit::ChangeType::Insert,
        crate::ChangeType::UpdatePreimage => wit::ChangeType::UpdatePreimage,
        crate::ChangeType::UpdatePostimage => wit::ChangeType::UpdatePostimage,
        crate::ChangeType::Delete => wit::ChangeType::Delete,
    }
}

pub(crate) fn from_wit_change(change: wit::ChangeType) -> crate::ChangeType {
    match change {
        wit::ChangeType::Insert => crate::ChangeType::Insert,
        wit::ChangeType::UpdatePreimage => crate::ChangeType::UpdatePreimage,
        wit::ChangeType::UpdatePostimage => crate::ChangeType::UpdatePostimage,
        wit::ChangeType::Delete => crate::ChangeType::Delete,
    }
}

fn comparison(op: crate::Comparison) -> wit::Comparison {
    use crate::Comparison as C;
    match op {
        C::Equal => wit::Comparison::Equal,
        C::NotEqual => wit::Comparison::NotEqual,
        C::Less => wit::Comparison::Less,
        C::LessOrEqual => wit::Comparison::LessOrEqual,
        C::Greater => wit::Comparison::Greater,
        C::GreaterOrEqual => wit::Comparison::GreaterOrEqual,
        C::IsNull => wit::Comparison::IsNull,
        C::IsNotNull => wit::Comparison::IsNotNull,
    }
}

fn scalar(value: &crate::Scalar) -> wit::Scalar {
    match value {
        crate::Scalar::Null => wit::Scalar::Null,
        crate::Scalar::Boolean(b) => wit::Scalar::Boolean(*b),
        crate::Scalar::Integer(i) => wit::Scalar::Integer(*i),
        crate::Scalar::Float(f) => wit::Scalar::Float(*f),
        crate::Scalar::Text(s) => wit::Scalar::Text(s.clone()),
    }
}

fn field_value(value: &crate::FieldValue) -> wit::FieldValue {
    use crate::FieldValue as F;
    match value {
        F::Column(name) => wit::FieldValue::Column(name.clone()),
        F::Substring { column, pos, len } => wit::FieldValue::Substring(wit::Substring {
            column: column.clone(),
            pos: *pos,
            len: *len,
        }),
        F::Constant(value) => wit::FieldValue::Constant(scalar(value)),
        F::ChangeType => wit::FieldValue::ChangeType,
        F::CommitVersion => wit::FieldValue::CommitVersion,
        F::CommitTimestamp => wit::FieldValue::CommitTimestamp,
    }
}

fn encode_spec(spec: &crate::EncodeSpec) -> wit::EncodeSpec {
    wit::EncodeSpec {
        rows: spec.rows.clone(),
        key: spec.key.as_ref().map(field_value),
        value: match &spec.value {
            crate::ValueEncoding::Json(fields) => wit::ValueEncoding::Json(
                fields
                    .iter()
                    .map(|(name, value)| wit::JsonField {
                        name: name.clone(),
                        value: field_value(value),
                    })
                    .collect(),
            ),
            crate::ValueEncoding::JsonRow => wit::ValueEncoding::JsonRow,
            crate::ValueEncoding::Tombstone => wit::ValueEncoding::Tombstone,
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

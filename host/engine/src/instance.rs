//! One running transform instance and the per-batch call.

use std::time::Duration;

use delta_kernel::arrow::record_batch::RecordBatch;
use wasmtime::component::ResourceTable;
use wasmtime::{Store, StoreLimits, StoreLimitsBuilder};

use crate::contract::v0_1;
use crate::convert;
use crate::error::{EngineError, TransformError, TrapKind};
use crate::module::EngineConfig;

use v0_1::sluice::transform::types as wit;

/// What a store holds for its instance: only its limits; the sandbox grants nothing.
pub(crate) struct HostState {
    limits: StoreLimits,
    _table: ResourceTable,
}

/// A record a transform returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputRecord {
    /// Index, within the batch, of the row it was made from.
    pub source_row: u32,
    /// Topic to produce to; the pipeline's topic when absent.
    pub topic: Option<String>,
    /// Record key.
    pub key: Option<Vec<u8>>,
    /// Record value; absent is a tombstone.
    pub value: Option<Vec<u8>>,
    /// Record headers.
    pub headers: Vec<(String, Vec<u8>)>,
}

/// An initialised instance of a transform module.
pub struct TransformInstance {
    store: Store<HostState>,
    bindings: v0_1::Transform,
    module: String,
    deadline_ticks: u64,
}

impl TransformInstance {
    pub(crate) fn start(
        engine: &wasmtime::Engine,
        config: &EngineConfig,
        pre: &v0_1::TransformPre<HostState>,
        module: &str,
        params: &[(String, String)],
    ) -> Result<TransformInstance, EngineError> {
        let limits = StoreLimitsBuilder::new()
            .memory_size(config.memory_limit_bytes)
            .trap_on_grow_failure(true)
            .build();
        let mut store = Store::new(
            engine,
            HostState {
                limits,
                _table: ResourceTable::new(),
            },
        );
        store.limiter(|state| &mut state.limits);
        let deadline_ticks = deadline_ticks(config.batch_deadline);
        store.set_epoch_deadline(deadline_ticks);
        let bindings = pre
            .instantiate(&mut store)
            .map_err(|e| EngineError::Instantiate {
                module: module.to_string(),
                reason: format!("{e:#}"),
            })?;
        store.set_epoch_deadline(deadline_ticks);
        bindings
            .sluice_transform_transformer()
            .call_init(&mut store, params)
            .map_err(|e| EngineError::InitTrap {
                module: module.to_string(),
                kind: trap_kind(&e),
                message: format!("{e:#}"),
            })?
            .map_err(|message| EngineError::Init {
                module: module.to_string(),
                message,
            })?;
        Ok(TransformInstance {
            store,
            bindings,
            module: module.to_string(),
            deadline_ticks,
        })
    }

    /// Transforms one batch of change rows (data columns plus `_change_type`,
    /// `_commit_version`, `_commit_timestamp`) into the records to produce.
    ///
    /// After a [`TransformError::Trap`] the instance must be dropped.
    pub fn transform(&mut self, batch: &RecordBatch) -> Result<Vec<OutputRecord>, TransformError> {
        let input = convert::change_batch(batch).map_err(|message| TransformError::Input {
            module: self.module.clone(),
            message,
        })?;
        self.store.set_epoch_deadline(self.deadline_ticks);
        let result = self
            .bindings
            .sluice_transform_transformer()
            .call_transform(&mut self.store, &input)
            .map_err(|e| TransformError::Trap {
                module: self.module.clone(),
                kind: trap_kind(&e),
                message: format!("{e:#}"),
            })?;
        let records = result.map_err(|e| match e {
            wit::TransformError::Row(r) => TransformError::Row {
                module: self.module.clone(),
                row: r.row,
                message: r.message,
            },
            wit::TransformError::Batch(message) => TransformError::Batch {
                module: self.module.clone(),
                message,
            },
        })?;
        records
            .into_iter()
            .map(|r| {
                if r.source_row >= input.num_rows {
                    return Err(TransformError::BadOutput {
                        module: self.module.clone(),
                        message: format!(
                            "a record names source row {} but the batch has {} rows",
                            r.source_row, input.num_rows
                        ),
                    });
                }
                Ok(OutputRecord {
                    source_row: r.source_row,
                    topic: r.topic,
                    key: r.key,
                    value: r.value,
                    headers: r.headers.into_iter().map(|h| (h.key, h.value)).collect(),
                })
            })
            .collect()
    }
}

fn deadline_ticks(deadline: Duration) -> u64 {
    (deadline.as_millis() / 10).max(1) as u64
}

fn trap_kind(error: &wasmtime::Error) -> TrapKind {
    match error.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::Interrupt) => TrapKind::Deadline,
        Some(wasmtime::Trap::UnreachableCodeReached) => TrapKind::Panic,
        Some(_) => TrapKind::Other,
        None if format!("{error:#}").contains("memory growth failure") => TrapKind::Memory,
        None => TrapKind::Other,
    }
}

//! One running transform instance and the per-batch call.

use std::sync::Arc;

use delta_kernel::arrow::record_batch::RecordBatch;
use sluice_encoding::{Format, Framed};
use sluice_model::Record;
use wasmtime::Store;
use wasmtime::component::{Resource, ResourceTableError};

use crate::budget::{HostLimitExceeded, MAX_MESSAGE_BYTES, OutputBudget, record_bytes, truncated};
use crate::contract::{v0_1, v1};
use crate::convert;
use crate::error::{EngineError, TransformError, TrapKind};
use crate::keyed::{KeyedSession, StateAccess, StateChanges, StateError};
use crate::limits::{InstanceLimits, MAX_HANDLES, MemoryCapExceeded, TableCapExceeded};
use crate::log::LogTap;
use crate::lookups::{BatchContext, LookupAccess, LookupFailed};
use crate::state::{BatchState, HostState, Keyed};
use crate::wasi::StderrTail;

/// A record a transform made.
pub type OutputRecord = Record;

/// A row the module rejected, with its reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RejectedRow {
    /// The row's index within the batch.
    pub row: u32,
    /// The module's reason.
    pub message: String,
}

/// What a module made of one batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchOutput {
    /// The records, in the order the module emitted them.
    pub records: Vec<OutputRecord>,
    /// Records whose keys or values the helpers framed for a schema registry: each
    /// waits for its schema's id ([`sluice_encoding::write_id`]) before it is produced.
    pub framed: Vec<Framed>,
    /// The rows it rejected, in the order it rejected them.
    pub rejected: Vec<RejectedRow>,
    /// What it changed in its keyed state, to commit with the records.
    pub state: StateChanges,
    /// How much of its keyed state it read and wrote.
    pub state_access: StateAccess,
    /// How many keys it looked up in lookup tables.
    pub lookup_access: LookupAccess,
}

/// A checked component, linked and ready to instantiate.
pub(crate) enum ModulePre {
    V1(v1::TransformPre<HostState>),
    V0_1(v0_1::TransformPre<HostState>),
}

enum Bindings {
    V1(v1::Transform),
    V0_1(v0_1::Transform),
}

/// An initialised instance of a transform module.
pub struct TransformInstance {
    store: Store<HostState>,
    bindings: Bindings,
    module: String,
    limits: InstanceLimits,
}

impl TransformInstance {
    pub(crate) fn start(
        engine: &wasmtime::Engine,
        config: &InstanceLimits,
        log_tap: Option<LogTap>,
        pre: &ModulePre,
        module: &str,
        params: &[(String, String)],
        format: Arc<Format>,
    ) -> Result<TransformInstance, EngineError> {
        let mut store = Store::new(engine, HostState::new(config, module, log_tap, format));
        store.limiter(|state| &mut state.limiter);
        store.set_max_component_handles(MAX_HANDLES);
        // What one host call may copy out of the module (host-side sizes): no more than
        // the module's memory cap.
        store.set_hostcall_fuel(config.memory_limit_bytes);
        let instantiate_error = |e: wasmtime::Error| EngineError::Instantiate {
            module: module.to_string(),
            reason: format!("{e:#}"),
        };
        arm(&mut store, config).map_err(instantiate_error)?;
        let bindings = match pre {
            ModulePre::V1(pre) => {
                Bindings::V1(pre.instantiate(&mut store).map_err(instantiate_error)?)
            }
            ModulePre::V0_1(pre) => {
                Bindings::V0_1(pre.instantiate(&mut store).map_err(instantiate_error)?)
            }
        };
        arm(&mut store, config).map_err(instantiate_error)?;
        let init = match &bindings {
            Bindings::V1(b) => b
                .sluice_transform_transformer()
                .call_init(&mut store, params),
            Bindings::V0_1(b) => b
                .sluice_transform_transformer()
                .call_init(&mut store, params),
        };
        let init = within_deadline(&store, "init", init);
        init.map_err(|e| EngineError::InitTrap {
            module: module.to_string(),
            kind: trap_kind(&e),
            message: with_stderr(format!("{e:#}"), &store.data().stderr),
        })?
        .map_err(|message| EngineError::Init {
            module: module.to_string(),
            message: truncated(message, MAX_MESSAGE_BYTES),
        })?;
        store.data_mut().keyed = Keyed::NotKept;
        Ok(TransformInstance {
            store,
            bindings,
            module: module.to_string(),
            limits: config.clone(),
        })
    }

    /// Transforms one batch of change rows (data columns plus `_change_type`,
    /// `_commit_version`, `_commit_timestamp`) into records and rejected rows.
    ///
    /// After a [`TransformError::Trap`] the instance must be dropped. A module that
    /// uses state or lookups traps: see [`TransformInstance::transform_in`].
    pub fn transform(&mut self, batch: &RecordBatch) -> Result<BatchOutput, TransformError> {
        self.transform_in(batch, &BatchContext::default())
    }

    /// Transforms one batch as [`TransformInstance::transform`] does, with the keyed
    /// state and lookup tables of `context`; what the module changed in its state comes
    /// back in [`BatchOutput::state`].
    pub fn transform_in(
        &mut self,
        batch: &RecordBatch,
        context: &BatchContext,
    ) -> Result<BatchOutput, TransformError> {
        let scope = context.state.as_ref();
        let batch = convert::normalize(batch).map_err(|message| self.input_error(message))?;
        let num_rows = batch.num_rows() as u32;
        arm(&mut self.store, &self.limits).map_err(|e| self.trap(&e))?;
        let output = match &self.bindings {
            Bindings::V1(bindings) => {
                let state = BatchState::new(batch, self.limits.max_output_bytes);
                // A table the module filled with resources it never dropped is its own
                // doing: a trap, so the instance is replaced.
                let handle = self
                    .store
                    .data_mut()
                    .table
                    .push(state)
                    .map_err(|e| self.trap(&wasmtime::Error::new(e)))?;
                let borrowed = Resource::<BatchState>::new_borrow(handle.rep());
                self.store.data_mut().keyed = match scope {
                    Some(scope) => Keyed::Batch(KeyedSession::new(scope.clone())),
                    None => Keyed::NotKept,
                };
                let host = self.store.data_mut();
                host.in_batch = true;
                host.lookups = context.lookups.clone();
                host.lookup_access = LookupAccess::default();
                let called = bindings
                    .sluice_transform_transformer()
                    .call_transform(&mut self.store, borrowed);
                let called = within_deadline(&self.store, "transform", called);
                let state = self.store.data_mut().table.delete(handle);
                let host = self.store.data_mut();
                let keyed = std::mem::replace(&mut host.keyed, Keyed::NotKept);
                host.in_batch = false;
                host.lookups = None;
                let lookup_access = std::mem::take(&mut host.lookup_access);
                let result = called.map_err(|e| self.trap(&e))?;
                let state = state.map_err(|e| self.input_error(e.to_string()))?;
                if let Some(message) = state.bad_output {
                    return Err(self.bad_output(message));
                }
                result.map_err(|e| self.reported(e))?;
                let (changes, access) = match keyed {
                    Keyed::Batch(session) => session.finish(),
                    Keyed::Init | Keyed::NotKept => Default::default(),
                };
                BatchOutput {
                    records: state.records,
                    framed: state.framed,
                    state: changes,
                    state_access: access,
                    lookup_access,
                    rejected: state
                        .rejected
                        .into_iter()
                        .map(|(row, message)| RejectedRow { row, message })
                        .collect(),
                }
            }
            Bindings::V0_1(bindings) => {
                let input = convert::change_batch_v0_1(&batch)
                    .map_err(|message| self.input_error(message))?;
                let called = bindings
                    .sluice_transform_transformer()
                    .call_transform(&mut self.store, &input);
                let records = within_deadline(&self.store, "transform", called)
                    .map_err(|e| self.trap(&e))?
                    .map_err(|e| self.reported_v0_1(e))?;
                let records: Vec<Record> = records
                    .into_iter()
                    .map(|r| Record {
                        source_row: r.source_row,
                        topic: r.topic,
                        partition: None,
                        key: r.key,
                        value: r.value,
                        headers: r.headers.into_iter().map(|h| (h.key, h.value)).collect(),
                    })
                    .collect();
                OutputBudget::new(self.limits.max_output_bytes)
                    .charge("transform", records.iter().map(record_bytes).sum())
                    .map_err(|e| self.trap(&wasmtime::Error::new(e)))?;
                BatchOutput {
                    records,
                    framed: Vec::new(),
                    rejected: Vec::new(),
                    state: StateChanges::default(),
                    state_access: StateAccess::default(),
                    lookup_access: LookupAccess::default(),
                }
            }
        };
        if let Some(bad) = output.records.iter().find(|r| r.source_row >= num_rows) {
            return Err(self.bad_output(format!(
                "a record names source row {} but the batch has {num_rows} rows",
                bad.source_row
            )));
        }
        Ok(output)
    }

    /// Whether the instance's memory grew past the recycling threshold, so the caller
    /// should replace it with a fresh one between batches.
    pub fn wants_recycling(&self) -> bool {
        self.store.data().limiter.memory_peak > self.limits.recycle_memory_bytes
    }

    /// The largest linear memory the instance reached, in bytes.
    pub fn memory_peak(&self) -> usize {
        self.store.data().limiter.memory_peak
    }

    fn input_error(&self, message: String) -> TransformError {
        TransformError::Input {
            module: self.module.clone(),
            message,
        }
    }

    fn bad_output(&self, message: String) -> TransformError {
        TransformError::BadOutput {
            module: self.module.clone(),
            message,
        }
    }

    fn trap(&self, error: &wasmtime::Error) -> TransformError {
        if let Some(failed) = error.downcast_ref::<LookupFailed>() {
            return TransformError::Lookup {
                module: self.module.clone(),
                message: failed.to_string(),
            };
        }
        if let Some(state) = error.downcast_ref::<StateError>()
            && !state.is_limit()
        {
            return TransformError::State {
                module: self.module.clone(),
                message: state.to_string(),
            };
        }
        TransformError::Trap {
            module: self.module.clone(),
            kind: trap_kind(error),
            message: with_stderr(format!("{error:#}"), &self.store.data().stderr),
        }
    }

    fn reported(&self, error: v1::sluice::transform::types::TransformError) -> TransformError {
        use v1::sluice::transform::types::TransformError as E;
        match error {
            E::Row(r) => TransformError::Row {
                module: self.module.clone(),
                row: r.row,
                message: truncated(r.message, MAX_MESSAGE_BYTES),
            },
            E::Batch(message) => TransformError::Batch {
                module: self.module.clone(),
                message: truncated(message, MAX_MESSAGE_BYTES),
            },
        }
    }

    fn reported_v0_1(
        &self,
        error: v0_1::sluice::transform::types::TransformError,
    ) -> TransformError {
        use v0_1::sluice::transform::types::TransformError as E;
        match error {
            E::Row(r) => TransformError::Row {
                module: self.module.clone(),
                row: r.row,
                message: truncated(r.message, MAX_MESSAGE_BYTES),
            },
            E::Batch(message) => TransformError::Batch {
                module: self.module.clone(),
                message: truncated(message, MAX_MESSAGE_BYTES),
            },
        }
    }
}

/// A trap's message, with the end of what the module wrote to stderr (an
/// interpreter's traceback) when there is any.
fn with_stderr(message: String, stderr: &StderrTail) -> String {
    match stderr.text() {
        Some(tail) => format!("{message}\nThe module wrote to stderr:\n{tail}"),
        None => message,
    }
}

/// A call that returned after its deadline failed as one that was interrupted: the
/// epoch interrupt fires only in the module's own code and lags the clock, so a module
/// that spent its time waiting in WASI would otherwise get past it.
fn within_deadline<R>(
    store: &Store<HostState>,
    call: &'static str,
    result: wasmtime::Result<R>,
) -> wasmtime::Result<R> {
    let value = result?;
    store.data().deadline.check_returned(call)?;
    Ok(value)
}

/// Sets the deadline (and fuel, when budgeted) for the next call: the epoch deadline
/// for the module's code, the instant for the host's work on its behalf.
fn arm(store: &mut Store<HostState>, config: &InstanceLimits) -> wasmtime::Result<()> {
    store.set_epoch_deadline(config.deadline_ticks());
    store.data_mut().arm_deadline(config.batch_deadline);
    if let Some(fuel) = config.fuel_per_batch {
        store.set_fuel(fuel)?;
    }
    Ok(())
}

/// How wasmtime says a module crossed one of the limits set on its store: a host call's
/// arguments larger than the hostcall fuel, more component handles than allowed, more
/// random bytes than WASI gives in one call.
const WASMTIME_LIMITS: &[&[&str]] = &[
    &["fuel allocated for hostcalls has been exhausted"],
    &["store handle limit exceeded"],
    &["requested len", "exceeds limit"],
];

fn trap_kind(error: &wasmtime::Error) -> TrapKind {
    if error.downcast_ref::<MemoryCapExceeded>().is_some()
        || error.downcast_ref::<TableCapExceeded>().is_some()
    {
        return TrapKind::Memory;
    }
    if let Some(state) = error.downcast_ref::<StateError>() {
        return match state.is_limit() {
            true => TrapKind::StateLimit,
            false => TrapKind::Other,
        };
    }
    if let Some(limit) = error.downcast_ref::<HostLimitExceeded>() {
        return match limit.is_deadline() {
            true => TrapKind::Deadline,
            false => TrapKind::HostLimit,
        };
    }
    if let Some(ResourceTableError::Full) = error.downcast_ref::<ResourceTableError>() {
        return TrapKind::HostLimit;
    }
    // wasmtime's own limits on what a module makes it hold; their error types are
    // private, their messages are not. Only the root cause is read: the context above
    // it names the module's functions, which the module chooses.
    let message = error.root_cause().to_string();
    if WASMTIME_LIMITS
        .iter()
        .any(|parts| parts.iter().all(|part| message.contains(part)))
    {
        return TrapKind::HostLimit;
    }
    match error.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::Interrupt) => TrapKind::Deadline,
        Some(wasmtime::Trap::OutOfFuel) => TrapKind::Fuel,
        Some(wasmtime::Trap::UnreachableCodeReached) => TrapKind::Panic,
        _ => TrapKind::Other,
    }
}

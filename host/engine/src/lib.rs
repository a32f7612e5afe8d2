//! Runs Sluice transform components in wasmtime.
//!
//! This crate narrows wasmtime to what Sluice needs: the component model, a memory cap,
//! a per-batch deadline and an optional fuel budget for every instance, a pooling
//! allocator sized from those limits, modules compiled in a worker process within a
//! memory and time budget (and refused before compiling when their shape is past the
//! host's limits), compiled modules cached by content digest, and a
//! linker that grants the contract's own `host`, `state` and `lookup` interfaces plus a WASI that reaches
//! nothing, so a module has no files, network, environment or real time. Modules are checked against the
//! `sluice:transform` contract when they are loaded, and called once per batch.

mod batch;
mod budget;
mod compile;
#[cfg(test)]
mod compile_fuzz;
mod compile_queue;
mod contract;
mod convert;
mod error;
#[cfg(test)]
mod fuzz;
mod instance;
mod keyed;
mod keyed_calls;
mod language;
mod limits;
mod log;
mod lookup_calls;
mod lookups;
mod module;
mod own_schemas;
mod shape;
mod sizes;
mod state;
mod wasi;

pub use compile::{
    CompileBudget, CompileWorker, WorkerRequest, isolate_compiles, module_digest,
    run_compile_worker,
};
pub use error::{CompileLimit, EngineError, TransformError, TrapKind};
pub use instance::{BatchOutput, OutputRecord, RejectedRow, TransformInstance};
pub use keyed::{
    Layered, MAX_KEY_BYTES, StateAccess, StateChanges, StateEntry, StateError, StateLimits,
    StateScope, StateSource, StateUsage,
};
pub use language::source_language;
pub use limits::InstanceLimits;
pub use log::{LogLevel, LogTap};
pub use lookups::{
    BatchContext, FoundRows, KeyKind, LookupAccess, LookupFailed, LookupShape, LookupView, key_kind,
};
pub use module::{Contract, EngineConfig, TransformEngine, TransformModule};
pub use shape::{ModuleShape, ShapeExcess};
pub use sluice_encoding::{Format, Framed};

/// The contract versions this host can run, newest first.
pub const SUPPORTED_CONTRACTS: &[&str] = &[
    contract::V1_3_EXPORT,
    contract::V1_2_EXPORT,
    contract::V1_1_EXPORT,
    contract::V1_0_EXPORT,
    contract::V0_1_EXPORT,
];

//! Runs Sluice transform components in wasmtime.
//!
//! This crate narrows wasmtime to what Sluice needs: the component model, a memory cap
//! and a per-batch deadline for every instance, and a linker that grants nothing, so a
//! module has no files, network, environment or clocks. Modules are checked against
//! the `sluice:transform` contract when they are loaded, and called once per batch.

mod contract;
mod convert;
mod error;
mod instance;
mod module;

pub use error::{EngineError, TransformError, TrapKind};
pub use instance::{OutputRecord, TransformInstance};
pub use module::{EngineConfig, TransformEngine, TransformModule};

/// The contract versions this host can run, newest first.
pub const SUPPORTED_CONTRACTS: &[&str] = &[contract::V0_1_EXPORT];

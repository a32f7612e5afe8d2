//! What the transform stage runs: a module that starts instances, and an instance that
//! transforms batches. Wasm components through the engine in production; code compiled
//! into the host for the loop's unit tests and the benchmark's `native` baseline, so
//! both go through the same pipeline as a component does.

use std::sync::Arc;

use sluice_engine::{
    BatchContext, BatchOutput, EngineError, Format, TransformError, TransformInstance,
    TransformModule,
};
use sluice_source::arrow::array::RecordBatch;

/// A loaded transform: a name, a digest recorded with every committed position, and
/// fresh instances on demand.
pub trait Module: Send + Sync {
    /// The module's name, in logs and errors.
    fn name(&self) -> &str;
    /// SHA-256 of the module's bytes (or another stable identity of its code).
    fn digest(&self) -> &str;
    /// The contract it implements, for the start-up log.
    fn contract(&self) -> &str;
    /// Starts an instance and initialises it with `params`; the host helpers write its
    /// records in `format`.
    fn instantiate(
        &self,
        params: &[(String, String)],
        format: Arc<Format>,
    ) -> Result<Box<dyn Instance>, EngineError>;
}

/// A running instance of a module.
pub trait Instance: Send {
    /// Transforms one batch of change rows.
    fn transform(&mut self, batch: &RecordBatch) -> Result<BatchOutput, TransformError>;
    /// Transforms one batch with the pipeline's keyed state and lookup tables; an
    /// instance that uses neither transforms it as [`Instance::transform`] does.
    fn transform_in(
        &mut self,
        batch: &RecordBatch,
        _context: &BatchContext,
    ) -> Result<BatchOutput, TransformError> {
        self.transform(batch)
    }
    /// Whether the instance should be replaced by a fresh one (its memory grew past
    /// the recycling threshold).
    fn wants_recycling(&self) -> bool {
        false
    }
    /// The largest linear memory the instance reached, in bytes (0 when unknown).
    fn memory_peak(&self) -> usize {
        0
    }
}

impl Module for TransformModule {
    fn name(&self) -> &str {
        TransformModule::name(self)
    }

    fn digest(&self) -> &str {
        TransformModule::digest(self)
    }

    fn contract(&self) -> &str {
        TransformModule::contract(self).version()
    }

    fn instantiate(
        &self,
        params: &[(String, String)],
        format: Arc<Format>,
    ) -> Result<Box<dyn Instance>, EngineError> {
        Ok(Box::new(TransformModule::instantiate(
            self, params, format,
        )?))
    }
}

impl Instance for TransformInstance {
    fn transform(&mut self, batch: &RecordBatch) -> Result<BatchOutput, TransformError> {
        TransformInstance::transform(self, batch)
    }

    fn transform_in(
        &mut self,
        batch: &RecordBatch,
        context: &BatchContext,
    ) -> Result<BatchOutput, TransformError> {
        TransformInstance::transform_in(self, batch, context)
    }

    fn wants_recycling(&self) -> bool {
        TransformInstance::wants_recycling(self)
    }

    fn memory_peak(&self) -> usize {
        TransformInstance::memory_peak(self)
    }
}

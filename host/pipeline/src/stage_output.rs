//! What the transform stage made of a batch: the records, and the rows it failed on.
//! A leaf, so the metrics that count it and the stage that makes it need not import
//! each other.

use sluice_engine::{Framed, OutputRecord, StateAccess, StateChanges};

/// A row (or every row of a batch) the module failed on, with why.
#[derive(Clone, Debug)]
pub(crate) struct FailedRow {
    /// Index of the row within the batch.
    pub row: u32,
    /// `row` (the module rejected or failed the row), `batch` or `trap`.
    pub kind: &'static str,
    /// The error, in a sentence.
    pub error: String,
}

/// What the stage made of a batch.
pub(crate) struct StageOutput {
    /// Good records, source rows relative to the batch.
    pub records: Vec<OutputRecord>,
    /// Records whose keys or values wait for a schema id.
    pub framed: Vec<Framed>,
    /// Rows the module failed on (empty under the `fail` policy, which stops instead).
    pub failed: Vec<FailedRow>,
    /// What the module changed in its state (nothing when the batch failed).
    pub state: StateChanges,
    /// How much of its state the module read and wrote (nothing counted when the
    /// batch failed).
    pub state_access: StateAccess,
}

//! What every read yields (the change feed's, the snapshot's, and their joins), in a
//! module of its own so the readers and the joining share it without importing each
//! other.

use delta_kernel::arrow::array::RecordBatch;
use sluice_position::Position;

/// A batch of change rows and the position right after its last row.
#[derive(Debug)]
pub struct ChangeBatch {
    /// Data columns plus `_change_type`, `_commit_version` and `_commit_timestamp`.
    pub batch: RecordBatch,
    /// Where reading continues after this batch.
    pub end: Position,
}

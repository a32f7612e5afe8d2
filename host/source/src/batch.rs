//! What every read yields (the change feed's, the snapshot's, and their joins), in a
//! module of its own so the readers and the joining share it without importing each
//! other.

use delta_kernel::arrow::array::{AsArray, RecordBatch};
use delta_kernel::arrow::datatypes::{Int64Type, TimestampMicrosecondType};
use sluice_position::Position;

/// A batch of change rows and the position right after its last row.
#[derive(Debug)]
pub struct ChangeBatch {
    /// Data columns plus `_change_type`, `_commit_version` and `_commit_timestamp`.
    pub batch: RecordBatch,
    /// Where reading continues after this batch.
    pub end: Position,
}

impl ChangeBatch {
    /// The version the batch's rows belong to and its commit time in microseconds,
    /// from the first row (a batch never spans two versions); `None` for an empty one.
    pub fn commit(&self) -> Option<(u64, i64)> {
        let version = self
            .batch
            .column_by_name("_commit_version")?
            .as_primitive_opt::<Int64Type>()?;
        let committed = self
            .batch
            .column_by_name("_commit_timestamp")?
            .as_primitive_opt::<TimestampMicrosecondType>()?;
        (!version.is_empty()).then(|| (version.value(0) as u64, committed.value(0)))
    }
}

//! Reads a Delta table's change data feed.
//!
//! Built on `delta_kernel`'s `TableChanges`, which returns rows in commit order with
//! deletion vectors applied. The reader yields Arrow batches of bounded size, each
//! with the position right after its last row, so a pipeline can resume mid-version.

mod batch;
mod changes;
mod coalesce;
mod error;
mod feed;
mod schema_change;
mod snapshot;
mod storage;
mod store_kind;
mod vended;

pub use batch::ChangeBatch;
pub use error::SourceError;
pub use feed::{ChangeFeed, SourceOptions, StorageAccess, VersionInfo};
pub use schema_change::Preceded;
pub use sluice_position::Position;
pub use storage::StorageMetrics;
pub use store_kind::StoreKind;

/// The Arrow crate the reader's batches are made of.
pub use delta_kernel::arrow;

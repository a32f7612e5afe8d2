//! Why a lookup table could not be kept or read.

use std::path::PathBuf;
use std::time::Duration;

use sluice_source::SourceError;

/// Why a lookup table could not be kept or read.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// Two rows of the table have one key.
    #[error(
        "lookup table {table} has more than one row with key {key} (version {version}); a lookup's key must name one row: choose key columns that are unique"
    )]
    NotUnique {
        /// The table.
        table: String,
        /// The key, as text.
        key: String,
        /// The version that made it not unique.
        version: u64,
    },
    /// The store on disk could not be used.
    #[error("the lookup store at {path} could not be used: {detail}")]
    Store {
        /// The store's file.
        path: PathBuf,
        /// What failed.
        detail: String,
    },
    /// Rows could not be encoded or decoded.
    #[error("lookup table {table}: {detail}")]
    Rows {
        /// The table.
        table: String,
        /// What failed.
        detail: String,
    },
    /// The table could not be read (its storage, its log, a schema change).
    #[error("lookup table {table} could not be read: {source}")]
    Unreadable {
        /// The table.
        table: String,
        /// Why.
        source: Box<SourceError>,
    },
    /// A key or kept column is not in the table.
    #[error(
        "lookup table {table} has no column `{column}`; its columns are {columns}: fix the lookup's key or columns"
    )]
    NoColumn {
        /// The table.
        table: String,
        /// The missing column.
        column: String,
        /// The table's columns.
        columns: String,
    },
    /// The table was not read up to a batch's commit time within the lookup's
    /// `max_wait`.
    #[error(
        "lookup table {table} was not read up to the batch's commit time within max_wait ({waited:?}): {detail}; the pipeline tries the batch again"
    )]
    Behind {
        /// The table.
        table: String,
        /// How long the batch waited.
        waited: Duration,
        /// What kept it behind.
        detail: String,
    },
    /// The table's store outgrew the lookup's `max_mib`.
    #[error(
        "lookup table {table}'s store holds {bytes} bytes, more than its max_mib ({max_mib} MiB) allows: raise max_mib, or keep fewer columns"
    )]
    TooLarge {
        /// The table.
        table: String,
        /// Bytes the store holds.
        bytes: u64,
        /// The limit.
        max_mib: u64,
    },
}

impl LookupError {
    /// Whether trying again later may succeed: the table's storage was away, or the
    /// table was not read up to a batch's commit in time.
    pub fn is_transient(&self) -> bool {
        match self {
            LookupError::Unreadable { source, .. } => source.is_transient(),
            LookupError::Behind { .. } => true,
            _ => false,
        }
    }
}

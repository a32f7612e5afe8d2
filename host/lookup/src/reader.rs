//! Where a lookup table's rows come from: its Delta table's snapshot and change feed,
//! behind a narrow trait so that following is unit-tested over tables in memory.

use sluice_source::{ChangeBatch, ChangeFeed, Position, Preceded, SourceError, VersionInfo};

/// Change batches in commit order; a batch never spans two versions.
pub type ChangeBatches = Box<dyn Iterator<Item = Result<ChangeBatch, SourceError>> + Send>;

/// Reads one Delta table for its lookup store.
pub trait TableReader: Send + Sync {
    /// The table as configured, for messages.
    fn table(&self) -> &str;
    /// The table's newest version.
    fn latest_version(&self) -> Result<u64, SourceError>;
    /// A version's columns and commit time.
    fn version_info(&self, version: u64) -> Result<VersionInfo, SourceError>;
    /// The last version committed at or before `timestamp_ms`; `None` when the table's
    /// first version came after it.
    fn version_at_or_before(&self, timestamp_ms: i64) -> Result<Option<u64>, SourceError>;
    /// The table as of `version`, every row an insert.
    fn snapshot(&self, version: u64) -> Result<ChangeBatches, SourceError>;
    /// The changes of versions `from` through `to`.
    fn changes(&self, from: u64, to: u64) -> Result<ChangeBatches, SourceError>;
}

impl TableReader for ChangeFeed {
    fn table(&self) -> &str {
        ChangeFeed::table(self)
    }

    fn latest_version(&self) -> Result<u64, SourceError> {
        ChangeFeed::latest_version(self)
    }

    fn version_info(&self, version: u64) -> Result<VersionInfo, SourceError> {
        ChangeFeed::version_info(self, version)
    }

    fn version_at_or_before(&self, timestamp_ms: i64) -> Result<Option<u64>, SourceError> {
        match ChangeFeed::version_at_or_before(self, timestamp_ms) {
            Ok(version) => Ok(Some(version)),
            Err(SourceError::NoVersionBefore { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    fn snapshot(&self, version: u64) -> Result<ChangeBatches, SourceError> {
        Ok(Box::new(
            self.read_snapshot(Position::snapshot_at(version))?,
        ))
    }

    fn changes(&self, from: u64, to: u64) -> Result<ChangeBatches, SourceError> {
        Ok(Box::new(self.read(
            Position::at_version(from),
            to,
            Preceded::ByEarlierRows,
        )?))
    }
}

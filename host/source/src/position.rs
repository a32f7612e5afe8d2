//! Where a reader is in a table's change feed.

/// The next change row to read: `row_offset` rows of `version` are already done.
///
/// Rows within a version come in a fixed order (the order of its commit's actions, or
/// for a snapshot the order of its files by path), so an offset inside a version
/// identifies the same rows on every read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// The Delta version of the next row.
    pub version: u64,
    /// Rows of that version already delivered.
    pub row_offset: u64,
    /// Whether the rows are the table's snapshot as of `version` (every row an insert)
    /// rather than the changes `version` made. After a snapshot come the changes of the
    /// next version.
    pub snapshot: bool,
}

impl Position {
    /// The start of `version`'s changes.
    pub fn at_version(version: u64) -> Position {
        Position {
            version,
            row_offset: 0,
            snapshot: false,
        }
    }

    /// The start of the table's snapshot as of `version`.
    pub fn snapshot_at(version: u64) -> Position {
        Position {
            version,
            row_offset: 0,
            snapshot: true,
        }
    }
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.snapshot, self.row_offset) {
            (false, 0) => write!(f, "version {}", self.version),
            (false, rows) => write!(f, "version {} after row {rows}", self.version),
            (true, 0) => write!(f, "snapshot of version {}", self.version),
            (true, rows) => write!(f, "snapshot of version {} after row {rows}", self.version),
        }
    }
}

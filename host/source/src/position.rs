//! Where a reader is in a table's change feed.

/// The next change row to read: `row_offset` rows of `version` are already done.
///
/// Rows within a version come in a fixed order (the order of its commit's actions),
/// so an offset inside a version identifies the same rows on every read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// The Delta version of the next row.
    pub version: u64,
    /// Rows of that version already delivered.
    pub row_offset: u64,
}

impl Position {
    /// The start of `version`.
    pub fn at_version(version: u64) -> Position {
        Position {
            version,
            row_offset: 0,
        }
    }
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.row_offset == 0 {
            write!(f, "version {}", self.version)
        } else {
            write!(f, "version {} after row {}", self.version, self.row_offset)
        }
    }
}

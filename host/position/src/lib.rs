//! Where a pipeline is in a table's change feed: one type the source reads from, the
//! sink stores, the metrics count and the API shows.

use serde::{Deserialize, Serialize};

/// The next change row to read: `row_offset` rows of `version` are already done.
///
/// Rows within a version come in a fixed order (the order of its commit's actions, or
/// for a snapshot the order of its files by path), so an offset inside a version
/// identifies the same rows on every read.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Position {
    /// The Delta version of the next row.
    pub version: u64,
    /// Rows of that version already delivered.
    pub row_offset: u64,
    /// Whether the rows are the table's snapshot as of `version` (every row an insert)
    /// rather than the changes `version` made. After a snapshot come the changes of the
    /// next version.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_snapshot_flag_is_written_only_when_set() {
        let changes = serde_json::to_string(&Position::at_version(3)).unwrap();
        assert_eq!(changes, r#"{"version":3,"row_offset":0}"#);
        let snapshot = Position {
            row_offset: 7,
            ..Position::snapshot_at(3)
        };
        let text = serde_json::to_string(&snapshot).unwrap();
        assert_eq!(text, r#"{"version":3,"row_offset":7,"snapshot":true}"#);
        assert_eq!(serde_json::from_str::<Position>(&text).unwrap(), snapshot);
        assert_eq!(
            serde_json::from_str::<Position>(&changes).unwrap(),
            Position::at_version(3)
        );
    }

    #[test]
    fn positions_order_by_version_then_rows() {
        assert!(Position::at_version(2) < Position::at_version(3));
        let later = Position {
            row_offset: 5,
            ..Position::at_version(2)
        };
        assert!(Position::at_version(2) < later);
    }
}

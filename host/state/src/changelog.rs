//! The compacted topic a pipeline's state changes are committed to, with its records
//! and position: the truth the local store is restored from.

use crate::error::StoreError;

/// One change read back from the changelog: a key and its value, `None` when removed.
pub type ChangelogEntry = (Vec<u8>, Option<Vec<u8>>);

/// Reads a pipeline's changelog.
pub trait Changelog: Send + Sync {
    /// The first offset still in the topic and the offset after the last committed
    /// change.
    fn bounds(&self) -> Result<(u64, u64), StoreError>;
    /// Reads the committed changes from offset `from` to `end`, handing them to
    /// `apply` in order, some at a time.
    fn read(
        &self,
        from: u64,
        end: u64,
        apply: &mut dyn FnMut(Vec<ChangelogEntry>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;
}

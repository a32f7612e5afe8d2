//! The node's local copy of a pipeline's state: a narrow trait, so the layering and
//! restoring around it are tested against [`crate::MemoryStore`] as well as redb.

use sluice_engine::{StateChanges, StateEntry, StateUsage};

use crate::error::StoreError;

/// How far into the changelog a store is known to reflect, and since when.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Checkpoint {
    /// The changelog offset the store reflects every committed change before.
    pub offset: u64,
    /// When the checkpoint was written, in milliseconds since 1970.
    pub written_ms: u64,
}

/// A pipeline's committed state on this node.
pub trait StateStore: Send + Sync {
    /// The value under `key`.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    /// Up to `limit` entries whose keys start with `prefix`, in key order, after `after`.
    fn scan(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<StateEntry>, StoreError>;
    /// Keys and bytes held.
    fn usage(&self) -> StateUsage;
    /// Applies committed changes. A crash may lose the last ones applied (they are
    /// applied again from the changelog after the checkpoint), never part of one.
    fn apply(&self, changes: &StateChanges) -> Result<(), StoreError>;
    /// The checkpoint last written.
    fn checkpoint(&self) -> Result<Option<Checkpoint>, StoreError>;
    /// Writes a checkpoint durably, with everything applied before it.
    fn set_checkpoint(&self, checkpoint: Checkpoint) -> Result<(), StoreError>;
    /// Removes every entry and the checkpoint.
    fn clear(&self) -> Result<(), StoreError>;
    /// The entries as they are now, to read while changes go on.
    fn snapshot(&self) -> Result<Box<dyn StoreSnapshot>, StoreError>;
}

/// A store's entries at one moment, unchanged by what is applied after it was taken.
pub trait StoreSnapshot: Send {
    /// Up to `limit` entries after `after`, in key order.
    fn entries(&self, after: Option<&[u8]>, limit: usize) -> Result<Vec<StateEntry>, StoreError>;
}

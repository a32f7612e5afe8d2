//! Where a lookup table's rows are kept: every version of each key's row from the
//! snapshot's version on, behind a narrow trait with a store on disk and one in memory.

use crate::error::LookupError;
use crate::version::VersionChanges;

/// How far a store has followed its table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Followed {
    /// What the store was built for (the lookup's key and columns with their types,
    /// and the row format's release): a store built for another shape is rebuilt.
    pub shape: String,
    /// The version whose snapshot the store was built from: it answers for this
    /// version and later ones only.
    pub base: u64,
    /// The last version applied whole; `None` while the snapshot is still being read.
    pub through: Option<u64>,
}

/// A multi-version store of one lookup table's rows by key.
pub trait VersionedStore: Send + Sync {
    /// Each key's row as of `version` (`None`: no row then).
    fn get(&self, keys: &[&[u8]], version: u64) -> Result<Vec<Option<Vec<u8>>>, LookupError>;
    /// Forgets every row and starts again, for `shape`, from the snapshot of `base`,
    /// committed at `committed_micros`.
    fn restart(&self, shape: &str, base: u64, committed_micros: i64) -> Result<(), LookupError>;
    /// Applies `changes` at `version` in one write; `whole` says the version is
    /// complete (a snapshot is applied in parts at its version, the last one whole).
    /// A version's commit time is recorded when it changed rows (`committed_micros`):
    /// one without changes reads as the version before it.
    fn apply(
        &self,
        version: u64,
        committed_micros: Option<i64>,
        changes: &VersionChanges,
        whole: bool,
    ) -> Result<(), LookupError>;
    /// The newest version with changes (or the base) committed at or before `micros`;
    /// `None` when the base was committed after it.
    fn version_as_of(&self, micros: i64) -> Result<Option<u64>, LookupError>;
    /// How far the store has followed its table; `None` for a new store.
    fn followed(&self) -> Result<Option<Followed>, LookupError>;
    /// Bytes of keys and rows kept, every version counted.
    fn bytes(&self) -> u64;
}

//! Lookup tables: the rows of a Delta table by key, as of any version the node has
//! followed.
//!
//! A store keeps every version of a key's row from the version its snapshot was read
//! at on (a multi-version store), so batches of pipelines at different positions, a
//! retried batch and a replay each read the table as of their own version and get the
//! same rows every time. Changes are applied one table version at a time, with the
//! key's uniqueness checked.

mod codec;
mod error;
mod memory;
mod reader;
mod redb_store;
mod store;
mod table;
mod version;

pub use codec::{KeyCodec, RowCodec, key_text};
pub use error::LookupError;
pub use memory::MemoryVersions;
pub use reader::{ChangeBatches, TableReader};
pub use redb_store::RedbVersions;
pub use store::{Followed, VersionedStore};
pub use table::{Consistency, LATEST_STALENESS, LookupSpec, LookupTable};
pub use version::{RowChange, VersionChanges};

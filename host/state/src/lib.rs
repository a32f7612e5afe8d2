//! A pipeline's keyed state on a node.
//!
//! The truth is the pipeline's changelog topic: a batch's state changes are produced to
//! it in the Kafka transaction that carries the batch's records and position. This
//! crate keeps the node's copy: a local store ([`RedbStore`]) with the changelog
//! offset it reflects, the changes of batches transformed but not yet committed layered
//! over it ([`PipelineState`], which the module reads through), and restoring the store
//! from the changelog on start, after a crash or after a move to another node.

mod changelog;
mod entry_json;
mod error;
mod live;
mod memory;
mod pipeline_state;
mod redb_store;
mod store;

pub use changelog::{Changelog, ChangelogEntry};
pub use entry_json::{bytes_from_text_or_hex, entry_from_json, entry_to_json, named_bytes};
pub use error::StoreError;
pub use live::{LiveState, Loan};
pub use memory::{MemoryChangelog, MemoryStore};
pub use pipeline_state::{FrozenState, MAX_CHECKPOINT_AGE, PipelineState, Restored};
pub use redb_store::RedbStore;
pub use store::{Checkpoint, StateStore, StoreSnapshot};

//! Several `sluice serve` nodes as one cluster, on Kafka's own machinery (the way Kafka
//! Connect's distributed mode works):
//!
//! - **Slots** ([`slot_of`], [`Membership`]): a topic with one partition per slot, never
//!   written to. Every node subscribes to it in the cluster's consumer group, so the
//!   group protocol (cooperative-sticky: only moved slots change hands) decides which
//!   node holds which slot. A pipeline lives in the slot its tenant and name hash to;
//!   the node holding the slot runs it.
//! - **Shared state** ([`StateLog`]): a compacted topic of keyed records (pipeline
//!   definitions, module lists, module bytes in [`blob`] chunks) that every node reads
//!   from the beginning and writes through. A node with an empty disk catches up from it.
//! - **Status** (a second [`StateLog`], [`SharedTopic::Status`]): each node reports the
//!   pipelines it runs (where they are, how fast, their last error), so any node can
//!   answer for any pipeline.
//! - **IO** ([`ClusterIo`]): the service reaches the shared logs ([`SharedLogs`]) and the
//!   group ([`Group`]) only through narrow traits, over Kafka in production and, under
//!   feature `memory`, in memory (`MemoryLogs`, `MemoryGroup`) for unit tests.
//!
//! Correctness never rests on a clean rebalance: a pipeline's new owner initialises its
//! transactions under the pipeline's transactional id, which fences a slow old owner.

pub mod blob;
mod config;
mod error;
mod kafka;
mod log;
mod membership;
#[cfg(any(test, feature = "memory"))]
mod memory;
mod shared;
mod slot;
mod topic;

pub use config::ClusterConfig;
pub use error::ClusterError;
pub use log::{StateLog, StateRecord};
pub use membership::{Membership, SlotChange};
#[cfg(any(test, feature = "memory"))]
pub use memory::{MemoryGroup, MemoryLogs};
pub use shared::{ClusterIo, Group, Member, Opened, Pending, SharedLog, SharedLogs};
pub use slot::slot_of;
pub use topic::SharedTopic;

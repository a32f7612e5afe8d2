//! The cluster's IO behind narrow traits, as delta-kernel puts its IO behind an
//! `Engine`: the service reads and writes the shared logs and takes part in the group
//! only through these, so the same service code runs over Kafka ([`ClusterIo::kafka`])
//! and, in unit tests, over memory (feature `memory`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::error::ClusterError;
use crate::log::StateRecord;
use crate::membership::SlotChange;
use crate::topic::SharedTopic;

/// What a call into the cluster's IO returns: trait objects cannot have `async fn`s.
pub type Pending<'a, T> = Pin<Box<dyn Future<Output = Result<T, ClusterError>> + Send + 'a>>;

/// A shared log as it was opened: the log, and the receiver of every record kept in it
/// (those written before the opening first), in log order.
pub type Opened = (Box<dyn SharedLog>, mpsc::UnboundedReceiver<StateRecord>);

/// One of the cluster's shared logs, open on this node: what any node writes comes back,
/// in one order, through the receiver of every node that opened it.
pub trait SharedLog: Send + Sync {
    /// The offset the records written before the opening end at: a node has caught up
    /// once it has applied the record before it.
    fn replay_end(&self) -> i64;

    /// The offset the records written so far end at (the next record's offset).
    fn end_offset(&self) -> Pending<'_, i64>;

    /// Writes a record (`None` removes the key) and returns its offset once the log
    /// keeps it.
    fn write<'a>(&'a self, key: &'a str, value: Option<&'a [u8]>) -> Pending<'a, i64>;
}

/// Where the cluster's shared logs are kept.
pub trait SharedLogs: Send + Sync {
    /// Opens the log of `shared` for `node`, replaying it from the beginning.
    fn open<'a>(&'a self, node: &'a str, shared: SharedTopic) -> Pending<'a, Opened>;
}

/// A node's membership of the cluster's group.
pub trait Member: Send {
    /// Leaves the group, so its slots go to the other nodes; blocks until they have
    /// been handed over (the node's pipelines have stopped by then).
    fn leave(self: Box<Self>);
}

/// The group that assigns the slots to the nodes.
pub trait Group: Send + Sync {
    /// Joins the group as `node`; the slots it gets and loses go to `changes` until the
    /// membership is left.
    fn join<'a>(
        &'a self,
        node: &'a str,
        changes: mpsc::UnboundedSender<SlotChange>,
    ) -> Pending<'a, Box<dyn Member>>;
}

/// All a node needs to take part in a cluster: where the shared logs are, and the group.
#[derive(Clone)]
pub struct ClusterIo {
    /// The shared logs (the state and the status).
    pub logs: Arc<dyn SharedLogs>,
    /// The group assigning slots.
    pub group: Arc<dyn Group>,
}

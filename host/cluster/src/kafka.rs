//! The cluster's IO over Kafka: the shared logs are compacted topics ([`StateLog`]) and
//! the group is Kafka's consumer group over the slots topic ([`Membership`]).

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::config::ClusterConfig;
use crate::log::StateLog;
use crate::membership::{Membership, SlotChange};
use crate::shared::{ClusterIo, Group, Member, Opened, Pending, SharedLog, SharedLogs};
use crate::topic::SharedTopic;

/// The Kafka cluster `[cluster]` names.
struct Kafka {
    config: ClusterConfig,
}

impl ClusterIo {
    /// The cluster's IO through the Kafka cluster `config` names.
    pub fn kafka(config: &ClusterConfig) -> ClusterIo {
        let kafka = Arc::new(Kafka {
            config: config.clone(),
        });
        ClusterIo {
            logs: kafka.clone(),
            group: kafka,
        }
    }
}

impl SharedLogs for Kafka {
    fn open<'a>(&'a self, node: &'a str, shared: SharedTopic) -> Pending<'a, Opened> {
        Box::pin(async move {
            let (log, records) = StateLog::open(&self.config, node, shared).await?;
            Ok((Box::new(log) as Box<dyn SharedLog>, records))
        })
    }
}

impl SharedLog for StateLog {
    fn replay_end(&self) -> i64 {
        StateLog::replay_end(self)
    }

    fn end_offset(&self) -> Pending<'_, i64> {
        Box::pin(StateLog::end_offset(self))
    }

    fn write<'a>(&'a self, key: &'a str, value: Option<&'a [u8]>) -> Pending<'a, i64> {
        Box::pin(StateLog::write(self, key, value))
    }
}

impl Group for Kafka {
    fn join<'a>(
        &'a self,
        node: &'a str,
        changes: mpsc::UnboundedSender<SlotChange>,
    ) -> Pending<'a, Box<dyn Member>> {
        Box::pin(async move {
            let membership = Membership::join(&self.config, node, changes).await?;
            Ok(Box::new(membership) as Box<dyn Member>)
        })
    }
}

impl Member for Membership {
    fn leave(self: Box<Self>) {
        // Dropping it leaves the group and waits for the revocation.
        drop(self);
    }
}

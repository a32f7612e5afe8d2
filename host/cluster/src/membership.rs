//! Which slots this node holds: the cluster's consumer group over the slots topic
//! decides, with the cooperative-sticky assignor, so a rebalance moves only the slots
//! that must move.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;
use tokio::sync::mpsc;

use crate::config::ClusterConfig;
use crate::error::ClusterError;
use crate::log::{Partitions, create_topic};

/// Longest a revocation waits for the node to stop the revoked slots' pipelines: they
/// commit their open transaction first.
const REVOKE_WAIT: Duration = Duration::from_secs(60);

/// A change to the slots this node holds.
#[derive(Debug)]
pub enum SlotChange {
    /// These slots are now this node's: start their pipelines.
    Assigned(Vec<u32>),
    /// These slots leave this node: stop their pipelines (committing, unless `lost`),
    /// then drop `done`. The slots go to another node only after that, or after a
    /// minute.
    Revoked {
        /// The slots.
        slots: Vec<u32>,
        /// The node was already out of the group (it was silent past the session
        /// timeout): another node may run the pipelines already, and has fenced them.
        lost: bool,
        /// Dropped (or sent to) when the pipelines have stopped.
        done: std::sync::mpsc::SyncSender<()>,
    },
}

/// This node's membership of the cluster's group; leaves the group when dropped, which
/// hands its slots to the other nodes at once.
pub struct Membership {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// Reports rebalances as slot changes.
struct Slots {
    changes: mpsc::UnboundedSender<SlotChange>,
}

impl ClientContext for Slots {
    fn error(&self, error: KafkaError, reason: &str) {
        tracing::warn!(%error, reason, "The cluster's group client reported an error; it retries by itself.");
    }
}

impl ConsumerContext for Slots {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(partitions) = rebalance else {
            return;
        };
        let slots = slot_numbers(partitions);
        if slots.is_empty() {
            return;
        }
        let (done, stopped) = std::sync::mpsc::sync_channel(1);
        let lost = consumer.assignment_lost();
        if self
            .changes
            .send(SlotChange::Revoked { slots, lost, done })
            .is_err()
        {
            return;
        }
        // Holding the rebalance here keeps the slots from their next node until this
        // node's pipelines have committed and stopped.
        let _ = stopped.recv_timeout(REVOKE_WAIT);
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(partitions) = rebalance {
            let slots = slot_numbers(partitions);
            if !slots.is_empty() {
                let _ = self.changes.send(SlotChange::Assigned(slots));
            }
        }
    }
}

fn slot_numbers(partitions: &rdkafka::TopicPartitionList) -> Vec<u32> {
    partitions
        .elements()
        .iter()
        .filter_map(|p| u32::try_from(p.partition()).ok())
        .collect()
}

impl Membership {
    /// Joins the cluster's group as `node` (creating the slots topic with one partition
    /// per slot when missing) and reports slot changes to `changes` until dropped.
    pub async fn join(
        config: &ClusterConfig,
        node: &str,
        changes: mpsc::UnboundedSender<SlotChange>,
    ) -> Result<Membership, ClusterError> {
        let group = config.group();
        let fail = |detail: String| ClusterError::Membership {
            group: group.clone(),
            bootstrap: config.bootstrap(),
            detail,
        };
        let topic = config.slots_topic();
        create_topic(config, &topic, Partitions::Slots(config.slots), &[])
            .await
            .map_err(|detail| ClusterError::Topic {
                what: "slots",
                topic: topic.clone(),
                bootstrap: config.bootstrap(),
                detail,
            })?;
        let session = config.session_timeout.as_millis().max(1);
        let mut client = ClientConfig::new();
        for (name, value) in &config.kafka {
            client.set(name, value);
        }
        let consumer: BaseConsumer<Slots> = client
            .set("group.id", &group)
            .set("client.id", format!("sluice-cluster-{node}"))
            .set("partition.assignment.strategy", "cooperative-sticky")
            .set("session.timeout.ms", session.to_string())
            .set("heartbeat.interval.ms", (session / 3).max(1).to_string())
            .set("enable.auto.commit", "false")
            .create_with_context(Slots { changes })
            .map_err(|e| fail(e.to_string()))?;
        consumer
            .subscribe(&[&topic])
            .map_err(|e| fail(e.to_string()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("cluster-member".into())
                .spawn(move || take_part(&consumer, &stop))
                .map_err(|e| fail(e.to_string()))?
        };
        Ok(Membership {
            stop,
            thread: Some(thread),
        })
    }
}

/// Polls the group consumer (which runs the rebalance callbacks) until told to stop,
/// then leaves the group.
fn take_part(consumer: &BaseConsumer<Slots>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        // The slots topic holds no records: polling only heartbeats and rebalances.
        if let Some(Err(error)) = consumer.poll(Duration::from_millis(100)) {
            tracing::warn!(%error, "The cluster's group consumer reported an error.");
        }
    }
    consumer.unsubscribe();
    // The revocation that leaving causes runs in the callbacks of these polls.
    let deadline = Instant::now() + REVOKE_WAIT;
    while Instant::now() < deadline
        && consumer
            .assignment()
            .is_ok_and(|assigned| assigned.count() > 0)
    {
        let _ = consumer.poll(Duration::from_millis(100));
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

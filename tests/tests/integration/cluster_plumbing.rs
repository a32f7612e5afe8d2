//! The cluster's Kafka plumbing against a real broker: the shared state topic replays
//! in order to a node that opens it later (module bytes whole, across chunks), and the
//! slots move between nodes as they join and leave the group.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_cluster::blob::{self, Assembler, ChunkKey};
use sluice_cluster::{ClusterConfig, Membership, SharedTopic, SlotChange, StateLog, StateRecord};
use sluice_tests::{kafka_bootstrap, unique_topic};
use tokio::sync::mpsc;

fn cluster(slots: u32) -> ClusterConfig {
    ClusterConfig {
        name: unique_topic("plumbing").replace('.', "-"),
        node: None,
        advertised_url: None,
        slots,
        session_timeout: Duration::from_secs(6),
        replication_factor: None,
        kafka: BTreeMap::from([("bootstrap.servers".to_string(), kafka_bootstrap())]),
    }
}

async fn next_records(
    received: &mut mpsc::UnboundedReceiver<StateRecord>,
    count: usize,
) -> Vec<StateRecord> {
    let mut records = Vec::new();
    while records.len() < count {
        let record = tokio::time::timeout(Duration::from_secs(30), received.recv())
            .await
            .expect("the state topic delivers within 30 s")
            .expect("the reader runs");
        records.push(record);
    }
    records
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_replays_in_order_with_modules_whole() {
    let config = cluster(4);
    let (first, mut first_records) = StateLog::open(&config, "one", SharedTopic::State)
        .await
        .unwrap();
    assert_eq!(first.replay_end(), 0, "a new cluster has no state");
    let module: Vec<u8> = (0..blob::CHUNK_BYTES * 2 + 77)
        .map(|i| (i * 7 % 256) as u8)
        .collect();
    let digest = blob::digest(&module);
    let chunks = blob::chunks(&digest, &module);
    for (key, bytes) in &chunks {
        first.write(&key.key(), Some(bytes)).await.unwrap();
    }
    first.write("pipeline/acme/a", Some(b"one")).await.unwrap();
    first.write("pipeline/acme/b", Some(b"two")).await.unwrap();
    let last = first.write("pipeline/acme/a", None).await.unwrap();
    let written = next_records(&mut first_records, chunks.len() + 3).await;
    assert_eq!(
        written.last().unwrap().offset,
        last,
        "the writer reads its own writes"
    );

    // A node that starts later gets the same records in the same order.
    let (second, mut second_records) = StateLog::open(&config, "two", SharedTopic::State)
        .await
        .unwrap();
    assert_eq!(second.replay_end(), last + 1);
    let replayed = next_records(&mut second_records, written.len()).await;
    assert_eq!(replayed, written);
    let mut assembler = Assembler::default();
    let whole: Vec<Vec<u8>> = replayed
        .iter()
        .filter_map(|r| {
            let key = ChunkKey::parse(&r.key)?;
            assembler.add(&key, r.value.clone().unwrap_or_default())
        })
        .map(Result::unwrap)
        .collect();
    assert_eq!(whole, vec![module.clone()]);
    let tail: Vec<(&str, Option<&[u8]>)> = replayed[chunks.len()..]
        .iter()
        .map(|r| (r.key.as_str(), r.value.as_deref()))
        .collect();
    assert_eq!(
        tail,
        vec![
            ("pipeline/acme/a", Some(&b"one"[..])),
            ("pipeline/acme/b", Some(&b"two"[..])),
            ("pipeline/acme/a", None),
        ]
    );
}

/// The slots a node holds, kept up to date from its changes by a task of its own;
/// revocations are acknowledged at once.
struct Node {
    held: Arc<Mutex<BTreeSet<u32>>>,
    membership: Membership,
}

impl Node {
    async fn join(config: &ClusterConfig, name: &str) -> Node {
        let (sender, mut changes) = mpsc::unbounded_channel();
        let membership = Membership::join(config, name, sender).await.unwrap();
        let held = Arc::new(Mutex::new(BTreeSet::new()));
        let kept = held.clone();
        tokio::spawn(async move {
            while let Some(change) = changes.recv().await {
                let mut held = kept.lock().unwrap();
                match change {
                    SlotChange::Assigned(slots) => held.extend(slots),
                    SlotChange::Revoked { slots, lost, done } => {
                        assert!(!lost, "a live node does not lose its slots");
                        for slot in slots {
                            held.remove(&slot);
                        }
                        drop(done);
                    }
                }
            }
        });
        Node { held, membership }
    }

    fn held(&self) -> BTreeSet<u32> {
        self.held.lock().unwrap().clone()
    }

    /// Leaves the group (a blocking hand-over of its slots).
    async fn leave(self) {
        tokio::task::spawn_blocking(move || drop(self.membership))
            .await
            .unwrap();
    }
}

/// Waits up to a minute for `done` to hold.
async fn until(what: &str, done: impl Fn() -> bool) {
    for _ in 0..600 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what} within 60 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_are_shared_between_nodes_and_handed_over_when_one_leaves() {
    let config = cluster(8);
    let all: BTreeSet<u32> = (0..8).collect();
    let one = Node::join(&config, "one").await;
    until("the only node holds every slot", || one.held() == all).await;

    let two = Node::join(&config, "two").await;
    // Each settles to a share; together they hold every slot once.
    until("the slots are shared", || {
        let (a, b) = (one.held(), two.held());
        a.len() >= 3 && b.len() >= 3 && a.is_disjoint(&b) && a.len() + b.len() == 8
    })
    .await;
    let union: BTreeSet<u32> = one.held().union(&two.held()).copied().collect();
    assert_eq!(union, all);

    two.leave().await;
    until("the remaining node holds every slot again", || {
        one.held() == all
    })
    .await;
    one.leave().await;
}

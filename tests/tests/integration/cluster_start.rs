//! Three `sluice serve` nodes of a new cluster started at the same moment (together, in
//! reversed order, and one shortly after another) all join it: a node that finds a
//! cluster topic another node has just created waits for the brokers to show its
//! partitions instead of exiting. The nodes use the three-broker Kafka cluster, where a
//! new topic reaches the other brokers' metadata a moment after its creation (a single
//! broker rarely shows the gap). `SLUICE_TEST_CLUSTER_STARTS` sets how many clusters are
//! started (default 3, one of each way).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use sluice_tests::service::{Serve, TenantSpec, cluster_lines};
use sluice_tests::unique_topic;

use crate::cluster::{CLUSTER, cluster_bootstrap};

const NODES: usize = 3;
const SLOTS: u32 = 6;

/// How the nodes of one cluster are started.
#[derive(Clone, Copy, Debug)]
enum Order {
    /// All at once, first to last.
    Together,
    /// All at once, last to first.
    Reversed,
    /// Each a little after the one before, while that one is creating the topics.
    Staggered,
}

/// The slots `node` holds.
fn slots(node: &Serve) -> BTreeSet<u64> {
    node.cluster_view()["slots"]
        .as_array()
        .expect("the node lists its slots")
        .iter()
        .filter_map(|slot| slot.as_u64())
        .collect()
}

/// What one cluster's start took.
struct Started {
    /// From the first launch until every node held a share of the slots.
    took: Duration,
    /// How many nodes found a topic another node had just created and waited for it.
    waited: usize,
}

/// Starts a new cluster's nodes the `order` way and waits until each holds a share of
/// the slots.
fn start_cluster(order: Order) -> Started {
    let bootstrap = cluster_bootstrap();
    let name = unique_topic("start");
    let server = cluster_lines(&name, SLOTS, &bootstrap);
    let kafka = format!("\"bootstrap.servers\" = \"{bootstrap}\"");
    let tenants = [TenantSpec {
        name: "acme",
        limits: "",
        kafka: &kafka,
    }];
    // Configured first, so the launches follow each other as closely as processes can.
    let mut nodes: Vec<Serve> = (0..NODES)
        .map(|_| Serve::configure(&tenants, &server, ""))
        .collect();
    let started = Instant::now();
    match order {
        Order::Together => nodes.iter_mut().for_each(Serve::launch),
        Order::Reversed => nodes.iter_mut().rev().for_each(Serve::launch),
        Order::Staggered => {
            for node in &mut nodes {
                node.launch();
                std::thread::sleep(Duration::from_millis(150));
            }
        }
    }
    // A node that gave up on the cluster's topics exits, and waiting for it says so.
    nodes.iter_mut().for_each(Serve::wait_ready);
    let all: BTreeSet<u64> = (0..u64::from(SLOTS)).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let held: Vec<BTreeSet<u64>> = nodes.iter().map(slots).collect();
        let shared_out = held.iter().all(|slots| !slots.is_empty())
            && held.iter().map(BTreeSet::len).sum::<usize>() == all.len()
            && held.iter().flatten().copied().collect::<BTreeSet<u64>>() == all;
        if shared_out {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{order:?}: the nodes hold {held:?} of {SLOTS} slots after a minute; logs:\n{}",
            nodes
                .iter()
                .map(Serve::log)
                .collect::<Vec<_>>()
                .join("\n----\n")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let took = started.elapsed();
    let waited = nodes
        .iter()
        .filter(|node| node.log().contains("that another node has just created"))
        .count();
    Started { took, waited }
}

#[test]
fn nodes_of_a_new_cluster_started_together_all_join() {
    let starts: usize = std::env::var("SLUICE_TEST_CLUSTER_STARTS")
        .ok()
        .map(|count| {
            count
                .parse()
                .expect("SLUICE_TEST_CLUSTER_STARTS is a count")
        })
        .unwrap_or(3);
    // The fault tests take the brokers down.
    let _cluster = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let orders = [Order::Together, Order::Reversed, Order::Staggered];
    for start in 0..starts {
        let order = orders[start % orders.len()];
        let Started { took, waited } = start_cluster(order);
        eprintln!(
            "start {}/{starts} ({order:?}): {NODES} nodes joined and share the slots in {:.1} s; {waited} waited for a topic another had just created",
            start + 1,
            took.as_secs_f64()
        );
    }
}

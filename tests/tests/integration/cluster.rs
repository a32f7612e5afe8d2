//! Faults of a three-node Kafka cluster (replication factor 3, min.insync.replicas 2, no
//! automatic topic creation) while a pipeline streams exactly once: the partition leader
//! is killed mid-run; every node is down for a while mid-run; the topic does not exist.
//! Each ends with exactly the records of a clean run, in the same order, or a clear
//! error.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::producer::{BaseProducer, Producer};
use sluice_tests::{
    Consumed, Extra, PipelineFiles, consume_all, consume_all_from, create_topic, deals_table,
    kafka_bootstrap, repo_root, run_expecting_failure, run_to_latest, spawn_sluice_logged,
    stop_sluice, transform_component, unique_topic,
};

/// The tests take nodes down, so they run one at a time, and other tests on the
/// cluster (`cluster_start`) hold this while they run.
pub(crate) static CLUSTER: Mutex<()> = Mutex::new(());

/// The three-node cluster's bootstrap servers.
pub(crate) fn cluster_bootstrap() -> String {
    std::env::var("SLUICE_TEST_KAFKA_CLUSTER").expect(
        "SLUICE_TEST_KAFKA_CLUSTER is not set: run the suite with scripts/test.sh, which starts the cluster (scripts/kafka.sh cluster-start)",
    )
}

fn kafka_script(args: &[&str]) {
    let status = Command::new("bash")
        .arg(repo_root().join("scripts/kafka.sh"))
        .args(args)
        .status()
        .expect("bash runs");
    assert!(status.success(), "scripts/kafka.sh {args:?} failed");
}

/// A table of 60k deals over five versions with updates, deletes and a merge.
fn table(dir: &Path) -> PathBuf {
    let table = dir.join("deals");
    deals_table(&table, &["create", "--rows", "40000"]);
    deals_table(&table, &["append", "--start", "40000", "--rows", "20000"]);
    for step in ["update", "delete", "merge"] {
        deals_table(&table, &[step]);
    }
    table
}

const SMALL_COMMITS: Extra<'static> = Extra {
    source: "batch_rows = 500",
    transform: "",
    params: "",
    sink: "commit_rows = 1000\ncommit_interval = \"200ms\"",
    kafka: "",
    state: None,
};

/// What a clean run on the single test broker delivers, in order.
fn clean_run(table: &Path, module: &Path) -> Vec<String> {
    let topic = unique_topic("cluster-reference");
    let files = PipelineFiles::new(table, module, &topic, &kafka_bootstrap(), SMALL_COMMITS);
    run_to_latest(&files.config);
    consume_all(&topic).iter().map(Consumed::line).collect()
}

/// The node that leads partition 0 of `topic`.
fn leader_of(topic: &str) -> i32 {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", cluster_bootstrap())
        .create()
        .unwrap();
    let metadata = producer
        .client()
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    metadata.topics()[0].partitions()[0].leader()
}

/// Streams the table into the cluster and calls `fault` once the pipeline has committed
/// part of it; returns what a read_committed consumer sees once the pipeline caught up.
fn stream_through(table: &Path, module: &Path, fault: impl FnOnce(&str)) -> Vec<String> {
    let topic = unique_topic("cluster");
    create_topic(&cluster_bootstrap(), &topic, 3);
    let files = PipelineFiles::new(table, module, &topic, &cluster_bootstrap(), SMALL_COMMITS);
    let log = files.dir.path().join("sluice.log");
    let mut sluice = spawn_sluice_logged(&files.config, &log);
    let deadline = Instant::now() + Duration::from_secs(120);
    while files.position().is_none_or(|p| p < (0, 5000)) {
        assert!(
            sluice.try_wait().unwrap().is_none(),
            "sluice exited: {}",
            std::fs::read_to_string(&log).unwrap()
        );
        assert!(Instant::now() < deadline, "sluice made no progress");
        std::thread::sleep(Duration::from_millis(100));
    }
    let before = files.position();
    fault(&topic);
    let after = files.position();
    eprintln!("position when the fault began: {before:?}; when it ended: {after:?}");
    // The fault begins mid-stream; with a leader failover the pipeline may finish
    // while the old leader is still down, which is no failure.
    assert!(
        before < Some((5, 0)),
        "the fault should land mid-stream; position {before:?}"
    );
    // A stop before the end shows sluice's log, which says why.
    let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        files.wait_for_position(&mut sluice, 5, Duration::from_secs(300))
    }));
    if let Err(panic) = waited {
        eprintln!("sluice's log:\n{}", std::fs::read_to_string(&log).unwrap());
        std::panic::resume_unwind(panic);
    }
    assert!(
        stop_sluice(&mut sluice).success(),
        "{}",
        std::fs::read_to_string(&log).unwrap()
    );
    consume_all_from(&cluster_bootstrap(), &topic)
        .iter()
        .map(Consumed::line)
        .collect()
}

#[test]
fn killing_the_partition_leader_mid_run_keeps_exactly_once() {
    let _cluster = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let work = tempfile::tempdir().unwrap();
    let table = table(work.path());
    let module = transform_component("gold-deals");
    let expected = clean_run(&table, &module);
    let delivered = stream_through(&table, &module, |topic| {
        let leader = leader_of(topic).to_string();
        kafka_script(&["node-kill", &leader]);
        std::thread::sleep(Duration::from_secs(5));
        kafka_script(&["node-start", &leader]);
    });
    assert_eq!(delivered.len(), expected.len());
    assert!(delivered == expected, "the records differ from a clean run");
}

#[test]
fn every_node_down_mid_run_loses_and_repeats_nothing() {
    let _cluster = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let work = tempfile::tempdir().unwrap();
    let table = table(work.path());
    let module = transform_component("gold-deals");
    let expected = clean_run(&table, &module);
    let delivered = stream_through(&table, &module, |_| {
        kafka_script(&["node-kill", "1", "2", "3"]);
        std::thread::sleep(Duration::from_secs(10));
        kafka_script(&["node-start", "1", "2", "3"]);
    });
    assert_eq!(delivered.len(), expected.len());
    assert!(delivered == expected, "the records differ from a clean run");
}

#[test]
fn a_missing_topic_without_automatic_creation_is_named() {
    let _cluster = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "3"]);
    let topic = unique_topic("never-created");
    let files = PipelineFiles::new(
        &table,
        &transform_component("passthrough"),
        &topic,
        &cluster_bootstrap(),
        Extra::default(),
    );
    let stderr = run_expecting_failure(&files.config);
    for text in [
        &format!("Kafka topic `{topic}` does not exist"),
        "Create it, or enable automatic topic creation",
    ] {
        assert!(stderr.contains(text), "stderr lacks {text:?}: {stderr}");
    }
}

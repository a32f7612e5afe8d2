//! Follow mode: while a writer commits, the pipeline delivers every new version once, in
//! order, soon after its commit (the latency is printed; the bound asserted is loose).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use serde_json::Value;
use sluice_tests::{
    Extra, PipelineFiles, deals_table, kafka_bootstrap, spawn_sluice, stop_sluice,
    transform_component, unique_topic,
};

const VERSIONS: u64 = 8;
const POLL: Duration = Duration::from_millis(100);

#[test]
fn a_concurrent_writers_commits_arrive_once_in_order_soon_after_each_commit() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "2"]);
    let topic = unique_topic("follow");
    let files = PipelineFiles::new(
        &table,
        &transform_component("passthrough"),
        &topic,
        &kafka_bootstrap(),
        Extra {
            sink: "commit_interval = \"50ms\"",
            ..Extra::default()
        },
    );
    let mut sluice = spawn_sluice(&files.config);
    files.wait_for_position(&mut sluice, 1, Duration::from_secs(60));

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka_bootstrap())
        .set("group.id", unique_topic("follower"))
        .set("isolation.level", "read_committed")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[&topic]).unwrap();
    let reader = std::thread::spawn(move || {
        let mut arrivals: Vec<(u64, Instant)> = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        while arrivals.iter().filter(|(v, _)| *v >= 1).count() < VERSIONS as usize
            && Instant::now() < deadline
        {
            if let Some(Ok(message)) = consumer.poll(Duration::from_millis(20)) {
                let row: Value = serde_json::from_slice(message.payload().unwrap()).unwrap();
                arrivals.push((row["_commit_version"].as_u64().unwrap(), Instant::now()));
            }
        }
        arrivals
    });

    let mut committed = BTreeMap::new();
    for version in 1..=VERSIONS {
        let start = (100 + version).to_string();
        deals_table(&table, &["append", "--start", &start, "--rows", "1"]);
        committed.insert(version, Instant::now());
        std::thread::sleep(POLL * 3);
    }
    let arrivals = reader.join().unwrap();
    assert!(stop_sluice(&mut sluice).success());

    let versions: Vec<u64> = arrivals.iter().map(|(v, _)| *v).collect();
    let mut expected = vec![0, 0];
    expected.extend(1..=VERSIONS);
    assert_eq!(versions, expected, "every version once, in commit order");
    let latencies: Vec<Duration> = arrivals
        .iter()
        .filter(|(v, _)| *v >= 1)
        .map(|(v, at)| at.saturating_duration_since(committed[v]))
        .collect();
    eprintln!("commit-to-consumer latency per version (poll interval {POLL:?}): {latencies:?}");
    // Two poll intervals plus a transaction commit; generous for a loaded 2-core machine.
    let bound = 2 * POLL + Duration::from_secs(3);
    assert!(
        latencies.iter().all(|l| *l < bound),
        "a version took longer than {bound:?}: {latencies:?}"
    );
}

//! Restoring a pipeline's keyed state from its changelog alone (an empty disk, as after
//! a move to another node), and where the time goes.
//!
//! It writes a changelog shaped like the account example's to a new topic on the local
//! broker: KEYS keys (`deal/<hash>`, a group name as value) in transactions of 10,000
//! changes, then a tenth of them again with new values and a fiftieth removed. Then, in
//! RUNS interleaved rounds (each starting with a different one), it times:
//! - `read`: reading the topic as a restore does (read_committed), applying nothing;
//! - `apply`: applying the same changes, held in memory, to an empty store;
//! - `restore`: the whole restore into an empty store (`PipelineState::restore`).
//!
//! Prints a Markdown report: medians with min and max, changes per second, the
//! ratios of `read` and `apply` to `restore` from the same rounds, the store's size on
//! disk. Needs the local broker (`scripts/kafka.sh start`, `SLUICE_TEST_KAFKA`).
//!
//! Usage: `cargo run --release -p sluice-bench --bin restore -- [KEYS] [RUNS]`
//! (default 1000000 5).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use sluice_engine::StateChanges;
use sluice_pipeline::KafkaChangelog;
use sluice_sink::ChangelogReader;
use sluice_state::{Changelog, ChangelogEntry, PipelineState, RedbStore, StateStore};

/// Changes per transaction, as a pipeline commits them.
const TRANSACTION: usize = 10_000;

/// A key spread over the key space, as document ids are.
fn key(i: usize) -> Vec<u8> {
    let spread = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    format!("deal/{spread:016x}").into_bytes()
}

/// The changes written: every key, then a tenth rewritten and a fiftieth removed.
fn changes(keys: usize) -> Vec<ChangelogEntry> {
    let mut all: Vec<ChangelogEntry> = (0..keys)
        .map(|i| (key(i), Some(format!("account-{}", i % 5000).into_bytes())))
        .collect();
    all.extend(
        (0..keys)
            .step_by(10)
            .map(|i| (key(i), Some(b"moved".to_vec()))),
    );
    all.extend((0..keys).step_by(50).map(|i| (key(i), None)));
    all
}

fn write_changelog(bootstrap: &str, topic: &str, changes: &[ChangelogEntry]) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    let runtime = tokio::runtime::Runtime::new()?;
    let created = runtime.block_on(admin.create_topics(
        &[NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
        &AdminOptions::new(),
    ))?;
    for result in created {
        result.map_err(|(topic, e)| anyhow::anyhow!("creating {topic} failed: {e}"))?;
    }
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("transactional.id", topic)
        .set("linger.ms", "5")
        .set("compression.type", "lz4")
        .create()?;
    producer.init_transactions(Duration::from_secs(30))?;
    for transaction in changes.chunks(TRANSACTION) {
        producer.begin_transaction()?;
        for (key, value) in transaction {
            let mut record = BaseRecord::<[u8], [u8]>::to(topic).key(key.as_slice());
            if let Some(value) = value {
                record = record.payload(value.as_slice());
            }
            let mut record = record;
            while let Err((e, back)) = producer.send(record) {
                anyhow::ensure!(
                    matches!(
                        e.rdkafka_error_code(),
                        Some(rdkafka::types::RDKafkaErrorCode::QueueFull)
                    ),
                    "producing failed: {e}"
                );
                producer.poll(Duration::from_millis(10));
                record = back;
            }
        }
        producer.commit_transaction(Duration::from_secs(60))?;
    }
    Ok(())
}

fn reader(bootstrap: &str, topic: &str) -> anyhow::Result<ChangelogReader> {
    let properties = BTreeMap::from([("bootstrap.servers".to_string(), bootstrap.to_string())]);
    Ok(ChangelogReader::new(
        &properties,
        topic,
        Duration::from_secs(30),
    )?)
}

/// Reads the whole topic, applying nothing; the chunks read.
fn read(bootstrap: &str, topic: &str) -> anyhow::Result<Vec<Vec<ChangelogEntry>>> {
    let topic = KafkaChangelog(reader(bootstrap, topic)?);
    let (start, end) = topic.bounds()?;
    let mut chunks = Vec::new();
    topic.read(start, end, &mut |chunk| {
        chunks.push(chunk);
        Ok(())
    })?;
    Ok(chunks)
}

fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.metadata().ok())
        .map(|metadata| metadata.len())
        .sum()
}

fn median(samples: &[f64]) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let keys: usize = args.next().map_or(Ok(1_000_000), |a| a.parse())?;
    let runs: usize = args.next().map_or(Ok(5), |a| a.parse())?;
    let bootstrap = std::env::var("SLUICE_TEST_KAFKA")
        .context("set SLUICE_TEST_KAFKA to the local broker (scripts/kafka.sh start)")?;
    let topic = format!("bench-restore-{}", std::process::id());
    let written = changes(keys);
    let started = Instant::now();
    write_changelog(&bootstrap, &topic, &written)?;
    eprintln!(
        "Wrote {} changes to {topic} in {:.1} s.",
        written.len(),
        started.elapsed().as_secs_f64()
    );
    let chunks = read(&bootstrap, &topic)?;
    let read_changes: usize = chunks.iter().map(Vec::len).sum();
    anyhow::ensure!(
        read_changes == written.len(),
        "read {read_changes} changes of the {} written",
        written.len()
    );

    let mut samples: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut store_bytes = 0;
    let mut restored_keys = 0;
    let names = ["read", "apply", "restore"];
    for round in 0..runs {
        for step in 0..names.len() {
            let name = names[(round + step) % names.len()];
            let dir = tempfile::tempdir()?;
            let started = Instant::now();
            match name {
                "read" => {
                    read(&bootstrap, &topic)?;
                }
                "apply" => {
                    let store = RedbStore::open(dir.path())?;
                    for chunk in &chunks {
                        let batch: StateChanges = chunk.iter().cloned().collect();
                        store.apply(&batch)?;
                    }
                }
                _ => {
                    let store = Arc::new(RedbStore::open(dir.path())?);
                    let state = PipelineState::new(store.clone());
                    state.restore(&KafkaChangelog(reader(&bootstrap, &topic)?), &mut |_, _| {})?;
                    restored_keys = store.usage().keys;
                    store_bytes = dir_bytes(dir.path());
                }
            }
            let seconds = started.elapsed().as_secs_f64();
            eprintln!("round {round}: {name} {seconds:.2} s");
            samples.entry(name).or_default().push(seconds);
        }
    }

    println!(
        "Restore of {restored_keys} keys from {} changes ({keys} keys written, a tenth rewritten, a fiftieth removed), {runs} interleaved rounds:\n",
        written.len()
    );
    println!("| step | seconds (min-max) | samples (s) | changes/s | vs restore |");
    println!("| --- | --- | --- | ---: | ---: |");
    let restore = median(&samples["restore"]);
    for name in names {
        let taken = &samples[name];
        let mid = median(taken);
        let min = taken.iter().copied().fold(f64::INFINITY, f64::min);
        let max = taken.iter().copied().fold(0.0, f64::max);
        let listed: Vec<String> = taken.iter().map(|s| format!("{s:.2}")).collect();
        println!(
            "| {name} | {mid:.2} ({min:.2}-{max:.2}) | {} | {:.0} | {:.2}x |",
            listed.join(" "),
            written.len() as f64 / mid,
            mid / restore
        );
    }
    println!(
        "\nThe restored store takes {:.0} MiB on disk.",
        store_bytes as f64 / (1024.0 * 1024.0)
    );
    Ok(())
}

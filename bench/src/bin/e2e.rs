//! The Rust contestants and tools of the end-to-end benchmark (`bench/e2e.sh`):
//!
//! - `native TABLE TOPIC BOOTSTRAP [INSTANCES]`: Sluice's pipeline (the same source, loop and sink as
//!   `sluice run`, exactly-once with its default commits) with the gold-deals code
//!   compiled into the host instead of run as a Wasm module: the Wasm overhead's baseline;
//! - `wasm TABLE TOPIC BOOTSTRAP MODULE CACHE_DIR [shadow [CANDIDATE PARAMS]]`: the same
//!   pipeline running the component MODULE (compiled code cached in CACHE_DIR); with
//!   `shadow`, MODULE (or the component CANDIDATE, with the pipeline's parameters given
//!   as TOML lines in PARAMS) also runs in the pipeline's shadow, its records compared
//!   and not produced: the cost of a shadow deploy on the live pipeline is the gap;
//! - `raw TABLE TOPIC BOOTSTRAP`: gold-deals' records computed first, then produced with
//!   rdkafka alone (the sink's producer settings, transactions of 100,000 records); the
//!   timing printed covers producing only: the limit of the broker and client;
//! - `payloads TABLE FILE`: gold-deals' records written to FILE one per line, each the
//!   key's bytes then the value's, for Kafka's own producer benchmark
//!   (`ProducerPerformance`), which sends records of those sizes;
//! - `digest TOPIC BOOTSTRAP`: a topic's committed records as a count and a SHA-256 of
//!   their sorted `key<TAB>value` lines (order-free, so contestants that partition
//!   differently compare);
//! - `count TOPIC BOOTSTRAP`: a topic's committed records counted, in constant memory
//!   (for a commit too large to sort in memory);
//! - `latency TOPIC BOOTSTRAP COUNT`: waits for COUNT new records and prints, for each,
//!   the milliseconds from its Delta commit (header `sluice.commit_timestamp`) to when a
//!   read_committed consumer saw it.
//!
//! - `topic TOPIC BOOTSTRAP`: creates a one-partition topic.
//!
//! Each prints one JSON line on stdout.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};
use sha2::{Digest as _, Sha256};
use sluice_engine::{
    BatchOutput, EngineConfig, EngineError, Format, RejectedRow, TransformEngine, TransformError,
};
use sluice_pipeline::{
    Instance, Module, PipelineConfig, RunControls, RunMode, Shadow, ShadowLimits, ShadowSlot,
    StartFrom, instance_limits,
};
use sluice_source::arrow::array::RecordBatch;
use sluice_source::{ChangeFeed, Position, Preceded, SourceOptions};
use sluice_transform::{Batch, Output, Params, Record, Transform};

/// Records per transaction of the raw producer, as `sluice run`'s default commit_rows.
const COMMIT_EVERY: u64 = 100_000;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| {
        args.get(i)
            .map(String::as_str)
            .context("missing argument; see the file's doc comment")
    };
    match arg(0)? {
        "native" => {
            // The pipeline's log, with its per-stage timings, as `sluice run` writes it.
            tracing_subscriber::fmt()
                .with_env_filter("warn,sluice_pipeline=info")
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .init();
            let instances = args.get(4).map_or(Ok(1), |n| n.parse())?;
            native(arg(1)?, arg(2)?, arg(3)?, instances).await
        }
        "wasm" => {
            let shadow = args.get(6).filter(|a| *a == "shadow").map(|_| Candidate {
                module: args.get(7).map(Path::new),
                params: args.get(8).map_or("", String::as_str),
            });
            let (module, cache) = (Path::new(arg(4)?), Path::new(arg(5)?));
            wasm(arg(1)?, arg(2)?, arg(3)?, module, cache, shadow).await
        }
        "raw" => raw(arg(1)?, arg(2)?, arg(3)?),
        "payloads" => payloads(arg(1)?, Path::new(arg(2)?)),
        "digest" => digest(arg(1)?, arg(2)?),
        "count" => count(arg(1)?, arg(2)?),
        "latency" => latency(arg(1)?, arg(2)?, arg(3)?.parse()?),
        "topic" => topic(arg(1)?, arg(2)?).await,
        other => {
            bail!("unknown command {other}: native, wasm, raw, payloads, digest, latency or topic")
        }
    }
}

/// Runs gold-deals natively over every batch of the table's change feed.
fn gold_records(
    table: &str,
    mut each: impl FnMut(&sluice_source::ChangeBatch, Vec<Record>) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    let feed = ChangeFeed::open(table, SourceOptions::default())?;
    let latest = feed.latest_version()?;
    let mut transform =
        gold_deals::GoldDeals::init(&Params::default()).map_err(anyhow::Error::msg)?;
    let mut rows = 0;
    for batch in feed.read(Position::at_version(0), latest, Preceded::Nothing)? {
        let batch = batch?;
        let mut out = Output::default();
        transform
            .transform(&Batch::from_arrow(batch.batch.clone()), &mut out)
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        rows += batch.batch.num_rows() as u64;
        each(&batch, out.records())?;
    }
    Ok(rows)
}

/// The config of a benchmark pipeline named `name` from `table` to `topic`, with the
/// module's parameters as TOML lines in `params`.
fn bench_config(
    name: &str,
    table: &str,
    topic: &str,
    bootstrap: &str,
    module: &str,
    instances: usize,
    params: &str,
) -> anyhow::Result<PipelineConfig> {
    PipelineConfig::parse(
        &format!(
            r#"
            [pipeline]
            name = "{name}"
            [source]
            table = "{table}"
            [transform]
            module = "{module}"
            instances = {instances}
            [transform.params]
            {params}
            [sink]
            topic = "{topic}"
            [sink.kafka]
            "bootstrap.servers" = "{bootstrap}"
            "#
        ),
        Path::new("/"),
    )
    .map_err(anyhow::Error::msg)
}

/// Runs `config`'s pipeline to the latest version with `controls`.
async fn run_to_latest(
    config: &PipelineConfig,
    controls: RunControls,
) -> anyhow::Result<sluice_pipeline::RunSummary> {
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    Ok(sluice_pipeline::run_controlled(
        config,
        RunMode::StopAtLatest,
        StartFrom::Configured,
        shutdown,
        controls,
    )
    .await?)
}

async fn native(table: &str, topic: &str, bootstrap: &str, instances: usize) -> anyhow::Result<()> {
    let started = Instant::now();
    let name = format!("bench-native-{topic}");
    let config = bench_config(
        &name,
        table,
        topic,
        bootstrap,
        "gold-deals compiled into the host",
        instances,
        "",
    )?;
    let controls = RunControls {
        module: Some(Arc::new(NativeGoldDeals)),
        quiet_progress: true,
        ..RunControls::default()
    };
    let summary = run_to_latest(&config, controls).await?;
    println!(
        "{}",
        serde_json::json!({ "rows": summary.rows_in, "seconds": started.elapsed().as_secs_f64() })
    );
    Ok(())
}

/// What runs in the shadow of the `wasm` pipeline: its own module unless another is
/// named, with the pipeline's parameters (TOML lines) both modules read.
struct Candidate<'a> {
    module: Option<&'a Path>,
    params: &'a str,
}

async fn wasm(
    table: &str,
    topic: &str,
    bootstrap: &str,
    module: &Path,
    cache: &Path,
    shadowed: Option<Candidate<'_>>,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let name = format!("bench-wasm-{topic}");
    let params = shadowed.as_ref().map_or("", |c| c.params);
    let config = bench_config(
        &name,
        table,
        topic,
        bootstrap,
        &module.to_string_lossy(),
        1,
        params,
    )?;
    let engine = TransformEngine::new(EngineConfig {
        limits: instance_limits(&config.transform),
        cache_dir: Some(cache.to_path_buf()),
        ..EngineConfig::default()
    })?;
    let live: Arc<dyn Module> = Arc::new(engine.load(module)?);
    let slot = Arc::new(ShadowSlot::default());
    let shadow = if let Some(shadowed) = shadowed {
        let candidate: Arc<dyn Module> = Arc::new(engine.load(shadowed.module.unwrap_or(module))?);
        let instance =
            candidate.instantiate(&config.transform_params(), Arc::new(config.format()))?;
        let shadow = Shadow::start(
            &config,
            live.digest(),
            candidate,
            instance,
            ShadowLimits::default(),
        );
        slot.install(shadow.clone());
        Some(shadow)
    } else {
        None
    };
    let controls = RunControls {
        module: Some(live),
        quiet_progress: true,
        shadow: slot,
        ..RunControls::default()
    };
    let summary = run_to_latest(&config, controls).await?;
    let seconds = started.elapsed().as_secs_f64();
    let compared = shadow.map(|shadow| {
        let report = shadow.report();
        serde_json::json!({
            "batches": report.batches,
            "failed_batches": report.failed_batches,
            "phase": report.phase,
            "reason": report.reason,
            "skipped_batches": report.skipped_batches,
            "equal": report.total().equal,
            "differing": report.total().changed + report.total().added + report.total().missing,
        })
    });
    println!(
        "{}",
        serde_json::json!({ "rows": summary.rows_in, "seconds": seconds, "shadow": compared })
    );
    // A looping candidate holds its blocking thread until its deadline, and the
    // runtime would wait for it on the way out: the run is over, leave now.
    std::process::exit(0);
}

/// gold-deals compiled into the host, run by the pipeline as a module.
struct NativeGoldDeals;

struct NativeGoldDealsInstance(gold_deals::GoldDeals);

const NATIVE: &str = "gold-deals (native)";

impl Module for NativeGoldDeals {
    fn name(&self) -> &str {
        NATIVE
    }

    fn digest(&self) -> &str {
        "native"
    }

    fn contract(&self) -> &str {
        "native"
    }

    fn instantiate(
        &self,
        params: &[(String, String)],
        _: Arc<Format>,
    ) -> Result<Box<dyn Instance>, EngineError> {
        let params = Params::from_pairs(params.iter().cloned());
        let transform =
            gold_deals::GoldDeals::init(&params).map_err(|message| EngineError::Init {
                module: NATIVE.into(),
                message: message.to_string(),
            })?;
        Ok(Box::new(NativeGoldDealsInstance(transform)))
    }
}

impl Instance for NativeGoldDealsInstance {
    fn transform(&mut self, batch: &RecordBatch) -> Result<BatchOutput, TransformError> {
        let mut out = Output::default();
        self.0
            .transform(&Batch::from_arrow(batch.clone()), &mut out)
            .map_err(|e| TransformError::Batch {
                module: NATIVE.into(),
                message: format!("{e:?}"),
            })?;
        Ok(BatchOutput {
            records: out.records(),
            framed: Vec::new(),
            state: Default::default(),
            state_access: Default::default(),
            lookup_access: Default::default(),
            rejected: out
                .rejected()
                .iter()
                .map(|(row, message)| RejectedRow {
                    row: *row,
                    message: message.clone(),
                })
                .collect(),
        })
    }
}

fn raw(table: &str, topic: &str, bootstrap: &str) -> anyhow::Result<()> {
    let mut records: Vec<Record> = Vec::new();
    let rows = gold_records(table, |_, batch| {
        records.extend(batch);
        Ok(())
    })?;
    let mut config = ClientConfig::new();
    for (name, value) in sluice_sink::DEFAULT_PROPERTIES {
        config.set(*name, *value);
    }
    let producer: ThreadedProducer<DefaultProducerContext> = config
        .set("bootstrap.servers", bootstrap)
        .set("transactional.id", format!("bench-raw-{topic}"))
        .create()?;
    producer.init_transactions(Duration::from_secs(30))?;
    let started = Instant::now();
    for chunk in records.chunks(COMMIT_EVERY as usize) {
        producer.begin_transaction()?;
        for Record { key, value, .. } in chunk {
            let mut record = BaseRecord::<[u8], [u8]>::to(topic);
            if let Some(key) = key {
                record = record.key(key.as_slice());
            }
            if let Some(value) = value {
                record = record.payload(value.as_slice());
            }
            let mut pending = record;
            loop {
                match producer.send(pending) {
                    Ok(()) => break,
                    Err((
                        KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull),
                        back,
                    )) => {
                        std::thread::sleep(Duration::from_millis(1));
                        pending = back;
                    }
                    Err((e, _)) => return Err(e.into()),
                }
            }
        }
        producer.commit_transaction(Duration::from_secs(60))?;
    }
    println!(
        "{}",
        serde_json::json!({ "rows": rows, "records": records.len(), "seconds": started.elapsed().as_secs_f64() })
    );
    Ok(())
}

fn payloads(table: &str, file: &Path) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(file).with_context(|| format!("creating {}", file.display()))?,
    );
    let (mut records, mut bytes) = (0u64, 0u64);
    let rows = gold_records(table, |_, batch| {
        for Record { key, value, .. } in batch {
            let payload = [key.unwrap_or_default(), value.unwrap_or_default()].concat();
            // One record per line: the JSON records gold-deals makes hold no newline.
            if payload.contains(&b'\n') {
                bail!("a record holds a newline; it cannot be one line of the payload file");
            }
            out.write_all(&payload)?;
            out.write_all(b"\n")?;
            records += 1;
            bytes += payload.len() as u64;
        }
        Ok(())
    })?;
    out.flush()?;
    println!(
        "{}",
        serde_json::json!({ "rows": rows, "records": records, "bytes": bytes })
    );
    Ok(())
}

async fn topic(topic: &str, bootstrap: &str) -> anyhow::Result<()> {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    let results = admin
        .create_topics(
            [&NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        )
        .await?;
    for result in results {
        if let Err((name, code)) = result {
            bail!("creating topic {name} failed: {code}");
        }
    }
    println!("{}", serde_json::json!({ "topic": topic }));
    Ok(())
}

fn consumer(bootstrap: &str, topic: &str, from: Offset) -> anyhow::Result<BaseConsumer> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("bench-reader-{topic}"))
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()?;
    let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(10))?;
    let partitions = metadata
        .topics()
        .first()
        .map_or(0, |t| t.partitions().len() as i32);
    let mut assignment = TopicPartitionList::new();
    for partition in 0..partitions.max(1) {
        assignment.add_partition_offset(topic, partition, from)?;
    }
    consumer.assign(&assignment)?;
    Ok(consumer)
}

/// Calls `each` with the key and value of every committed record of `topic`, from the
/// beginning to its end.
fn read_topic(
    topic: &str,
    bootstrap: &str,
    mut each: impl FnMut(Option<&[u8]>, Option<&[u8]>),
) -> anyhow::Result<()> {
    let consumer = consumer(bootstrap, topic, Offset::Beginning)?;
    let partitions = consumer.assignment()?.count();
    let mut ended = 0;
    let deadline = Instant::now() + Duration::from_secs(1800);
    while ended < partitions {
        if Instant::now() > deadline {
            bail!("{topic} was not read to its end in time");
        }
        match consumer.poll(Duration::from_millis(500)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(_))) => ended += 1,
            Some(Err(e)) => return Err(e.into()),
            Some(Ok(message)) => each(message.key(), message.payload()),
        }
    }
    Ok(())
}

/// A topic's committed records, counted in constant memory.
fn count(topic: &str, bootstrap: &str) -> anyhow::Result<()> {
    let mut count = 0u64;
    read_topic(topic, bootstrap, |_, _| count += 1)?;
    println!("{}", serde_json::json!({ "count": count }));
    Ok(())
}

fn digest(topic: &str, bootstrap: &str) -> anyhow::Result<()> {
    let mut lines: Vec<Vec<u8>> = Vec::new();
    read_topic(topic, bootstrap, |key, value| {
        let mut line = key.unwrap_or_default().to_vec();
        line.push(b'\t');
        line.extend_from_slice(value.unwrap_or(b"<tombstone>"));
        lines.push(line);
    })?;
    lines.sort_unstable();
    let mut hash = Sha256::new();
    for line in &lines {
        hash.update(line);
        hash.update(b"\n");
    }
    let hex: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    println!(
        "{}",
        serde_json::json!({ "count": lines.len(), "sha256": hex })
    );
    Ok(())
}

fn latency(topic: &str, bootstrap: &str, count: usize) -> anyhow::Result<()> {
    let consumer = consumer(bootstrap, topic, Offset::End)?;
    // Ready before the first commit is written.
    println!("{}", serde_json::json!({ "ready": true }));
    let mut millis = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(600);
    while millis.len() < count {
        if Instant::now() > deadline {
            bail!("only {} of {count} records arrived", millis.len());
        }
        let Some(message) = consumer.poll(Duration::from_millis(50)) else {
            continue;
        };
        let message = match message {
            Ok(message) => message,
            Err(KafkaError::PartitionEOF(_)) => continue,
            Err(e) => return Err(e.into()),
        };
        let seen = SystemTime::now().duration_since(UNIX_EPOCH)?.as_micros() as f64;
        let committed = message
            .headers()
            .and_then(|h| h.iter().find(|h| h.key == "sluice.commit_timestamp"))
            .and_then(|h| std::str::from_utf8(h.value?).ok()?.parse::<f64>().ok())
            .context("records need the sluice.commit_timestamp header (change_headers = true)")?;
        millis.push((seen - committed) / 1000.0);
    }
    println!("{}", serde_json::json!({ "latency_ms": millis }));
    Ok(())
}

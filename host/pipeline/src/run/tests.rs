//! The loop's unit tests: a real Delta table, modules compiled into the test, and the
//! in-memory sink injecting the Kafka sink's failures. No broker.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_engine::{
    BatchContext, BatchOutput, EngineError, Format, OutputRecord, RejectedRow, TransformError,
};
use sluice_sink::SinkError;
use sluice_source::arrow::array::RecordBatch;
use sluice_source::{ChangeBatch, ChangeFeed, Position, Preceded, SourceOptions};
use tokio::sync::{mpsc, oneshot, watch};

use super::*;
use crate::memory_sink::{Call, Failure, MemorySink, Seen};
use crate::shadow::{
    DifferenceKind, LiveBatch, LiveKeyed, Shadow, ShadowLimits, ShadowPhase, ShadowSlot,
};

/// A table with several versions of inserts, updates and deletes (from delta-kernel's
/// test data, in the repository's fixtures).
fn table() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/delta-tables/kernel/cdf-table")
        .to_string_lossy()
        .into_owned()
}

fn config(transform: &str) -> PipelineConfig {
    config_with("", transform, "")
}

/// A config with extra lines in `[source]`, `[transform]` and `[sink]`.
fn config_with(source: &str, transform: &str, sink: &str) -> PipelineConfig {
    PipelineConfig::parse(&config_text(source, transform, sink), Path::new("/"))
        .expect("the test config parses")
}

fn config_text(source: &str, transform: &str, sink: &str) -> String {
    format!(
        r#"
        [pipeline]
        name = "unit"
        [source]
        table = "{}"
        batch_rows = 2
        {source}
        [transform]
        module = "unused.wasm"
        {transform}
        [sink]
        topic = "out"
        commit_rows = 3
        {sink}
        [sink.kafka]
        "bootstrap.servers" = "memory:1"
        "#,
        table()
    )
}

/// Every change row of the table, in order, as (version, row in version).
fn all_rows() -> Vec<(u64, u64)> {
    let feed = ChangeFeed::open(&table(), SourceOptions::default()).unwrap();
    let latest = feed.latest_version().unwrap();
    let mut rows = Vec::new();
    for batch in feed
        .read(Position::at_version(0), latest, Preceded::Nothing)
        .unwrap()
    {
        let batch = batch.unwrap();
        let first = batch.end.row_offset - batch.batch.num_rows() as u64;
        rows.extend((first..batch.end.row_offset).map(|row| (batch.end.version, row)));
    }
    assert!(rows.len() > 6, "the table has rows for several commits");
    rows
}

fn latest() -> u64 {
    ChangeFeed::open(&table(), SourceOptions::default())
        .unwrap()
        .latest_version()
        .unwrap()
}

/// A swap a module asks for from inside a batch: where to send it, and what.
type SwapAsk = Arc<Mutex<Option<(mpsc::Sender<SwapRequest>, SwapRequest)>>>;

/// What a test module does on its n-th batch (counting from 1).
#[derive(Clone, Default)]
struct Script {
    /// Reject batch row 0 of every batch.
    reject_first_rows: bool,
    /// Fail row 1 of this batch.
    fail_on: Option<usize>,
    /// On this batch, ask for a swap to this module.
    swap_on: Option<(usize, SwapAsk)>,
    /// On this batch, ask the pipeline to shut down.
    shutdown_on: Option<(usize, Arc<watch::Sender<bool>>)>,
    /// Batch row 1 of every batch also makes a record on topic `acme.stolen`.
    steal_on_row_1: bool,
}

/// A module compiled into the test: one record per row, keyed by its digest.
#[derive(Clone)]
struct Rows {
    digest: &'static str,
    script: Script,
}

struct RowsInstance {
    module: Rows,
    batches: usize,
}

impl Module for Rows {
    fn name(&self) -> &str {
        "rows"
    }
    fn digest(&self) -> &str {
        self.digest
    }
    fn contract(&self) -> &str {
        "test"
    }
    fn instantiate(
        &self,
        _: &[(String, String)],
        _: Arc<Format>,
    ) -> Result<Box<dyn Instance>, EngineError> {
        Ok(Box::new(RowsInstance {
            module: self.clone(),
            batches: 0,
        }))
    }
}

impl Instance for RowsInstance {
    fn transform(&mut self, batch: &RecordBatch) -> Result<BatchOutput, TransformError> {
        self.batches += 1;
        let script = &self.module.script;
        if let Some((n, swap)) = &script.swap_on
            && *n == self.batches
            && let Some((sender, request)) = swap.lock().unwrap().take()
        {
            assert!(sender.try_send(request).is_ok(), "the swap is taken");
        }
        if let Some((n, stop)) = &script.shutdown_on
            && *n == self.batches
        {
            stop.send(true).unwrap();
        }
        if script.fail_on == Some(self.batches) {
            return Err(TransformError::Row {
                module: "rows".into(),
                row: 1,
                message: "row 1 is bad".into(),
            });
        }
        let skip = usize::from(script.reject_first_rows);
        let stolen = (script.steal_on_row_1 && batch.num_rows() > 1).then(|| OutputRecord {
            source_row: 1,
            topic: Some("acme.stolen".into()),
            value: Some(b"stolen".to_vec()),
            ..OutputRecord::default()
        });
        Ok(BatchOutput {
            records: (skip..batch.num_rows())
                .map(|row| OutputRecord {
                    source_row: row as u32,
                    key: Some(self.module.digest.as_bytes().to_vec()),
                    value: Some(row.to_string().into_bytes()),
                    ..OutputRecord::default()
                })
                .chain(stolen)
                .collect(),
            framed: Vec::new(),
            state: Default::default(),
            state_access: Default::default(),
            lookup_access: Default::default(),
            rejected: (0..skip.min(batch.num_rows()))
                .map(|row| RejectedRow {
                    row: row as u32,
                    message: "the first row of a batch is refused".into(),
                })
                .collect(),
        })
    }
}

/// A module that fails row 1 of its `n`-th batch.
fn failing_on_batch(n: usize) -> Rows {
    Rows {
        digest: "a",
        script: Script {
            fail_on: Some(n),
            ..Script::default()
        },
    }
}

fn rows(digest: &'static str) -> Rows {
    Rows {
        digest,
        script: Script::default(),
    }
}

struct Outcome {
    result: Result<RunSummary, PipelineError>,
    metrics: Arc<PipelineMetrics>,
}

async fn run_once(
    config: &PipelineConfig,
    module: Rows,
    delivery: &MemorySink,
    shutdown: watch::Receiver<bool>,
    swaps: Option<mpsc::Receiver<SwapRequest>>,
) -> Outcome {
    run_in(
        RunMode::StopAtLatest,
        config,
        module,
        delivery,
        shutdown,
        swaps,
    )
    .await
}

async fn run_in(
    mode: RunMode,
    config: &PipelineConfig,
    module: Rows,
    delivery: &MemorySink,
    shutdown: watch::Receiver<bool>,
    swaps: Option<mpsc::Receiver<SwapRequest>>,
) -> Outcome {
    let metrics = Arc::new(PipelineMetrics::default());
    let controls = RunControls {
        module: Some(Arc::new(module)),
        swaps,
        metrics: metrics.clone(),
        quiet_progress: true,
        ..RunControls::default()
    };
    let result = run_on(mode, config, controls, delivery, shutdown).await;
    Outcome { result, metrics }
}

/// The loop over `delivery` with `controls`, from the stored position.
async fn run_on(
    mode: RunMode,
    config: &PipelineConfig,
    controls: RunControls,
    delivery: &MemorySink,
    shutdown: watch::Receiver<bool>,
) -> Result<RunSummary, PipelineError> {
    let sink = delivery.clone();
    let connect = move || {
        let sink = sink.clone();
        async move { sink.connect().await }
    };
    run_with(
        config,
        mode,
        StartFrom::StoredPosition,
        shutdown,
        controls,
        connect,
    )
    .await
}

async fn run_to_latest(config: &PipelineConfig, module: Rows, delivery: &MemorySink) -> Outcome {
    let (_stop, shutdown) = watch::channel(false);
    run_once(config, module, delivery, shutdown, None).await
}

/// Each transaction's stored position is the row after its last record.
fn assert_positions_follow_records(seen: &Seen) {
    for transaction in &seen.committed {
        if let Some(last) = transaction.records.last().and_then(|r| r.origin) {
            let at = transaction.position.position;
            assert!(
                (at.version, at.row_offset) == (last.version, last.row + 1)
                    || (at.version > last.version && at.row_offset == 0),
                "position {at} does not follow row {last:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_row_is_delivered_once_in_order_and_commits_follow_the_row_count() {
    let delivery = MemorySink::default();
    let outcome = run_to_latest(&config(""), rows("a"), &delivery).await;
    let summary = outcome.result.unwrap();
    let seen = delivery.seen();
    assert_eq!(seen.origins(), all_rows());
    assert_eq!(summary.rows_in, all_rows().len() as u64);
    assert_eq!(summary.position, Position::at_version(latest() + 1));
    assert_eq!(seen.stored().unwrap().position, summary.position);
    // Batches of at most 2 rows, committed once 3 rows are open: at most 4 rows each.
    for transaction in &seen.committed {
        assert!(
            transaction.records.len() <= 4,
            "{}",
            transaction.records.len()
        );
        assert_eq!(transaction.position.module_digest, "a");
    }
    assert_positions_follow_records(&seen);
    let progress = outcome.metrics.snapshot().progress;
    assert_eq!(progress.versions_done, progress.versions_total);
    assert_eq!(progress.rows_done, summary.rows_in);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_instances_keep_table_order_and_one_module_per_transaction() {
    let delivery = MemorySink::default();
    let outcome = run_to_latest(&config("instances = 3"), rows("a"), &delivery).await;
    outcome.result.unwrap();
    assert_eq!(delivery.seen().origins(), all_rows());
    assert_positions_follow_records(&delivery.seen());

    // A failure under the `fail` policy still stops after exactly the batches before it.
    let failing = failing_on_batch(3);
    let delivery = MemorySink::default();
    let outcome = run_to_latest(&config("instances = 3"), failing, &delivery).await;
    assert!(matches!(
        outcome.result,
        Err(PipelineError::Transform { .. })
    ));
    let committed = delivery.seen().origins();
    assert_eq!(committed, all_rows()[..committed.len()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retriable_failures_redo_the_work_from_the_last_commit() {
    for (call, failure, retries) in [
        (Call::Commit(2), Failure::Abort, 1),
        (Call::Send(3), Failure::Abort, 1),
        (Call::Send(2), Failure::BrokerDown, 3),
        (Call::Commit(3), Failure::TransactionTimeout, 1),
    ] {
        let delivery = MemorySink::default();
        delivery.fail(call, failure);
        let outcome = run_to_latest(&config(""), rows("a"), &delivery).await;
        outcome
            .result
            .unwrap_or_else(|e| panic!("{failure:?} at {call:?}: {e}"));
        let seen = delivery.seen();
        assert_eq!(seen.origins(), all_rows(), "{failure:?} at {call:?}");
        assert_positions_follow_records(&seen);
        assert_eq!(
            outcome.metrics.snapshot().sink_retries,
            retries,
            "{failure:?}"
        );
        let reconnects = usize::from(failure == Failure::TransactionTimeout);
        assert_eq!(seen.connects, 1 + reconnects, "{failure:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_and_refused_records_stop_the_pipeline_keeping_what_was_committed() {
    let delivery = MemorySink::default();
    delivery.fail(Call::Commit(2), Failure::Fence);
    let outcome = run_to_latest(&config(""), rows("a"), &delivery).await;
    let error = outcome.result.unwrap_err();
    assert!(
        matches!(error, PipelineError::Sink(SinkError::Fenced { .. })),
        "{error}"
    );
    let committed = delivery.seen().origins();
    assert_eq!(committed, all_rows()[..committed.len()]);

    let delivery = MemorySink::default();
    delivery.fail(Call::Commit(2), Failure::Refuse);
    let outcome = run_to_latest(&config(""), rows("a"), &delivery).await;
    let error = outcome.result.unwrap_err();
    let PipelineError::Sink(SinkError::Rejected { version, row, .. }) = error else {
        panic!("{error}");
    };
    let committed = delivery.seen().origins();
    assert_eq!(
        (version, row),
        all_rows()[committed.len()],
        "the refused record is the first after the last commit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_from_the_config_is_kept_when_the_first_commit_fails() {
    // Refused: the start is stored through a new connection (the old producer may be
    // unusable), so a restart after the fix starts there.
    let delivery = MemorySink::default();
    delivery.fail(Call::Commit(1), Failure::Refuse);
    let outcome = run_to_latest(&config(""), rows("a"), &delivery).await;
    assert!(outcome.result.is_err());
    {
        let seen = delivery.seen();
        assert!(seen.origins().is_empty());
        assert_eq!(seen.stored().unwrap().position, Position::at_version(0));
        assert_eq!(seen.connects, 2);
    }

    // Fenced: another instance owns the pipeline now; this one stores nothing.
    let delivery = MemorySink::default();
    delivery.fail(Call::Commit(1), Failure::Fence);
    let outcome = run_to_latest(&config(""), rows("a"), &delivery).await;
    assert!(outcome.result.is_err());
    assert!(delivery.seen().stored().is_none());
    assert_eq!(delivery.seen().connects, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_error_policy_routes_failed_rows() {
    // skip: rejected rows are counted and left out.
    let module = Rows {
        digest: "a",
        script: Script {
            reject_first_rows: true,
            ..Script::default()
        },
    };
    let delivery = MemorySink::default();
    let outcome = run_to_latest(&config("on_error = \"skip\""), module.clone(), &delivery).await;
    let summary = outcome.result.unwrap();
    let delivered = delivery.seen().origins().len() as u64;
    assert!(summary.rows_failed > 0);
    assert_eq!(delivered + summary.rows_failed, summary.rows_in);
    assert_eq!(outcome.metrics.snapshot().failed_rows, summary.rows_failed);

    // dead-letter: each failed row becomes a record on the dead-letter topic.
    let delivery = MemorySink::default();
    let dead_letters = "on_error = \"dead-letter\"\ndead_letter_topic = \"dead\"";
    let outcome = run_to_latest(&config(dead_letters), module.clone(), &delivery).await;
    let summary = outcome.result.unwrap();
    {
        let seen = delivery.seen();
        let letters: Vec<_> = seen
            .committed
            .iter()
            .flat_map(|t| &t.records)
            .filter(|r| r.topic.as_deref() == Some("dead"))
            .collect();
        assert_eq!(letters.len() as u64, summary.rows_failed);
        let letter = String::from_utf8(letters[0].value.clone().unwrap()).unwrap();
        assert!(letter.contains("\"error_kind\":\"row\""), "{letter}");
        assert!(letter.contains("\"module_digest\":\"a\""), "{letter}");
        assert_eq!(
            seen.origins().len() as u64,
            summary.rows_in,
            "every row once, as a record or a letter"
        );
    }

    // fail: the pipeline stops naming the row; the batches before it are committed.
    let failing = failing_on_batch(3);
    let delivery = MemorySink::default();
    let outcome = run_to_latest(&config(""), failing, &delivery).await;
    let error = outcome.result.unwrap_err();
    let PipelineError::Transform {
        version,
        row_in_version,
        ..
    } = error
    else {
        panic!("{error}");
    };
    let committed = delivery.seen().origins();
    let expected = all_rows();
    assert_eq!(committed, expected[..committed.len()]);
    // Two batches of two rows went before; the third batch's row 1 failed.
    assert_eq!(committed.len(), 4);
    assert_eq!((version, row_in_version), expected[5]);
}

/// A record on a topic outside the tenant's prefix, or off `[sink] allowed_topics`,
/// fails its row under the error policy, with its other records, and is never sent
/// (issue 35: a tenant wrote records into 3,000 topics of another tenant's prefix).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_on_refused_topics_fail_their_rows_and_are_never_sent() {
    let module = Rows {
        digest: "a",
        script: Script {
            steal_on_row_1: true,
            ..Script::default()
        },
    };
    let tenant = |transform: &str, sink: &str, prefix: Option<&str>| {
        let mut config = config_with("", transform, sink);
        config.sink.topic_prefix = prefix.map(str::to_string);
        config
    };
    let stolen = |seen: &Seen| {
        seen.committed
            .iter()
            .flat_map(|t| &t.records)
            .any(|r| r.topic.as_deref() == Some("acme.stolen"))
    };

    for (prefix, sink, rule) in [
        (Some("out"), "", "topic_prefix `out`"),
        (None, "allowed_topics = [\"out.side\"]", "allowed_topics"),
    ] {
        let delivery = MemorySink::default();
        let policy = "on_error = \"dead-letter\"\ndead_letter_topic = \"out-dead\"";
        let outcome = run_to_latest(&tenant(policy, sink, prefix), module.clone(), &delivery).await;
        let summary = outcome.result.unwrap();
        let seen = delivery.seen();
        assert!(!stolen(&seen), "{rule}: nothing reaches the refused topic");
        let (letters, records): (Vec<_>, Vec<_>) = seen
            .committed
            .iter()
            .flat_map(|t| &t.records)
            .partition(|r| r.topic.as_deref() == Some("out-dead"));
        assert!(summary.rows_failed > 0, "{rule}");
        assert_eq!(letters.len() as u64, summary.rows_failed, "{rule}");
        assert_eq!(
            records.len() as u64 + summary.rows_failed,
            summary.rows_in,
            "{rule}: a refused row loses its own record too"
        );
        let letter = String::from_utf8(letters[0].value.clone().unwrap()).unwrap();
        assert!(
            letter.contains("`acme.stolen`") && letter.contains(rule),
            "{rule}: {letter}"
        );
    }

    // fail: the pipeline stops at the first such row, naming the topic.
    let delivery = MemorySink::default();
    let outcome = run_to_latest(&tenant("", "", Some("out")), module, &delivery).await;
    let error = outcome.result.unwrap_err();
    assert!(
        matches!(error, PipelineError::Transform { .. })
            && error.to_string().contains("`acme.stolen`"),
        "{error}"
    );
    assert!(!stolen(&delivery.seen()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swap_happens_at_a_batch_boundary_and_positions_name_the_module() {
    for instances in [1, 2] {
        swap_once(instances).await;
    }
}

async fn swap_once(instances: usize) {
    let (swaps_in, swaps) = mpsc::channel(1);
    let (reply_in, reply) = oneshot::channel();
    let new_module = rows("b");
    let request = SwapRequest {
        instance: new_module.instantiate(&[], Arc::default()).unwrap(),
        module: Arc::new(new_module),
        reply: reply_in,
    };
    let old_module = Rows {
        digest: "a",
        script: Script {
            swap_on: Some((3, Arc::new(Mutex::new(Some((swaps_in, request)))))),
            ..Script::default()
        },
    };
    let delivery = MemorySink::default();
    let (_stop, shutdown) = watch::channel(false);
    let config = config(&format!("instances = {instances}"));
    let outcome = run_once(&config, old_module, &delivery, shutdown, Some(swaps)).await;
    outcome.result.unwrap();
    let report = reply.await.unwrap().unwrap();
    assert_eq!(
        (report.from_digest.as_str(), report.to_digest.as_str()),
        ("a", "b")
    );
    let seen = delivery.seen();
    assert_eq!(
        seen.origins(),
        all_rows(),
        "no row lost or repeated across the swap"
    );
    let mut digests = Vec::new();
    for transaction in &seen.committed {
        let digest = transaction.position.module_digest.as_str();
        for record in &transaction.records {
            assert_eq!(
                record.key.as_deref(),
                Some(digest.as_bytes()),
                "one module per transaction"
            );
        }
        if digests.last() != Some(&digest) {
            digests.push(digest);
        }
        if digest == "a" {
            assert!(transaction.position.position <= report.position);
        }
    }
    assert_eq!(digests, ["a", "b"]);
    assert_eq!(outcome.metrics.snapshot().swaps, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_commits_the_batch_in_hand_and_a_restart_resumes_after_it() {
    let (stop, shutdown) = watch::channel(false);
    let module = Rows {
        digest: "a",
        script: Script {
            shutdown_on: Some((2, Arc::new(stop))),
            ..Script::default()
        },
    };
    let delivery = MemorySink::default();
    let outcome = run_once(&config(""), module, &delivery, shutdown, None).await;
    let summary = outcome.result.unwrap();
    let first = delivery.seen().origins();
    assert!(first.len() < all_rows().len(), "it stopped early");
    assert_eq!(delivery.seen().stored().unwrap().position, summary.position);

    let outcome = run_to_latest(&config(""), rows("a"), &delivery).await;
    outcome.result.unwrap();
    assert_eq!(delivery.seen().origins(), all_rows());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_pipeline_releases_its_producer_and_keeps_its_position() {
    let config = config_with(
        "poll_interval = \"10ms\"",
        "",
        "release_producer_after = \"50ms\"",
    );
    let delivery = MemorySink::default();
    let (stop, shutdown) = watch::channel(false);
    let run = {
        let delivery = delivery.clone();
        tokio::spawn(async move {
            run_in(
                RunMode::Follow,
                &config,
                rows("a"),
                &delivery,
                shutdown,
                None,
            )
            .await
        })
    };
    let waited = std::time::Instant::now();
    while delivery.seen().released == 0 {
        assert!(
            waited.elapsed() < Duration::from_secs(30),
            "the producer is released"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.send(true).unwrap();
    let outcome = run.await.unwrap();
    let summary = outcome.result.unwrap();
    let seen = delivery.seen();
    assert_eq!(seen.origins(), all_rows());
    assert_eq!(seen.stored().unwrap().position, summary.position);
    assert_eq!(seen.connects, 1, "an idle table needs no new connection");
}

#[test]
fn more_busy_pipelines_than_blocking_threads_all_finish() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let runs = (0..8).map(|_| {
            tokio::spawn(async {
                let delivery = MemorySink::default();
                let outcome = run_to_latest(&config(""), rows("a"), &delivery).await;
                outcome.result.unwrap();
                delivery.seen().origins().len()
            })
        });
        let all = tokio::time::timeout(Duration::from_secs(120), futures_join(runs.collect()))
            .await
            .expect("every pipeline finishes");
        assert!(all.iter().all(|&n| n == all_rows().len()));
    });
}

async fn futures_join(handles: Vec<tokio::task::JoinHandle<usize>>) -> Vec<usize> {
    let mut done = Vec::new();
    for handle in handles {
        done.push(handle.await.unwrap());
    }
    done
}

/// A stateful module: it counts the rows it has seen in state under `rows`, and each
/// record's value is the count after its row, so a change applied twice or lost shows
/// in the records as well as in the state.
#[derive(Clone)]
struct Counting {
    digest: &'static str,
    /// On this batch (counting from 1), ask for a swap.
    swap_on: Option<(usize, SwapAsk)>,
    /// Take this long over every batch.
    slow: Duration,
}

struct CountingInstance {
    module: Counting,
    batches: usize,
}

impl Module for Counting {
    fn name(&self) -> &str {
        "counting"
    }
    fn digest(&self) -> &str {
        self.digest
    }
    fn contract(&self) -> &str {
        "test"
    }
    fn instantiate(
        &self,
        _: &[(String, String)],
        _: Arc<Format>,
    ) -> Result<Box<dyn Instance>, EngineError> {
        Ok(Box::new(CountingInstance {
            module: self.clone(),
            batches: 0,
        }))
    }
}

impl Instance for CountingInstance {
    fn transform(&mut self, _: &RecordBatch) -> Result<BatchOutput, TransformError> {
        unreachable!("a pipeline with [state] transforms with its state")
    }

    fn transform_in(
        &mut self,
        batch: &RecordBatch,
        context: &BatchContext,
    ) -> Result<BatchOutput, TransformError> {
        let state = context.state.as_ref().expect("the pipeline keeps state");
        self.batches += 1;
        std::thread::sleep(self.module.slow);
        if let Some((n, swap)) = &self.module.swap_on
            && *n == self.batches
            && let Some((sender, request)) = swap.lock().unwrap().take()
        {
            assert!(sender.try_send(request).is_ok(), "the swap is taken");
        }
        let before = state
            .source
            .get(b"rows")
            .expect("the test's state reads")
            .map_or(0, |bytes| {
                String::from_utf8(bytes).unwrap().parse().unwrap()
            });
        let records = (0..batch.num_rows())
            .map(|row| OutputRecord {
                source_row: row as u32,
                key: Some(self.module.digest.as_bytes().to_vec()),
                value: Some((before + row as u64 + 1).to_string().into_bytes()),
                ..OutputRecord::default()
            })
            .collect();
        let after = (before + batch.num_rows() as u64).to_string().into_bytes();
        Ok(BatchOutput {
            records,
            state: [(b"rows".to_vec(), Some(after))].into_iter().collect(),
            ..BatchOutput::default()
        })
    }
}

fn counting(digest: &'static str) -> Counting {
    Counting {
        digest,
        swap_on: None,
        slow: Duration::ZERO,
    }
}

/// The records' values on the output topic, in commit order.
fn counts(seen: &Seen) -> Vec<u64> {
    seen.committed
        .iter()
        .flat_map(|t| &t.records)
        .filter(|r| r.topic.is_none())
        .map(|r| {
            String::from_utf8(r.value.clone().unwrap())
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect()
}

/// The count the changelog holds last.
fn changelog_count(seen: &Seen) -> Option<u64> {
    seen.committed
        .iter()
        .flat_map(|t| &t.records)
        .rfind(|r| r.topic.as_deref() == Some("sluice-state-unit"))
        .map(|r| {
            String::from_utf8(r.value.clone().unwrap())
                .unwrap()
                .parse()
                .unwrap()
        })
}

async fn run_counting(
    config: &PipelineConfig,
    module: Counting,
    delivery: &MemorySink,
    swaps: Option<mpsc::Receiver<SwapRequest>>,
) -> Outcome {
    let metrics = Arc::new(PipelineMetrics::default());
    let controls = RunControls {
        module: Some(Arc::new(module)),
        swaps,
        metrics: metrics.clone(),
        quiet_progress: true,
        ..RunControls::default()
    };
    let (_stop, shutdown) = watch::channel(false);
    let result = run_on(RunMode::StopAtLatest, config, controls, delivery, shutdown).await;
    Outcome { result, metrics }
}

/// A config with `[state]` kept in `dir`.
fn stateful_config(dir: &Path) -> PipelineConfig {
    let text = format!(
        "{}\n[state]\ndir = \"{}\"",
        config_text("", "", ""),
        dir.display()
    );
    PipelineConfig::parse(&text, Path::new("/")).expect("the test config parses")
}

/// Every failure the sink reports leaves the state as after the last committed batch:
/// a batch's changes reach the store only once its transaction commits, and work
/// redone after a failure starts from the committed state (a change applied before its
/// commit, or kept after an abort, counts rows twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_changes_count_once_whatever_the_sink_reports() {
    for (call, failure) in [
        (None, Failure::Abort),
        (Some(Call::Commit(2)), Failure::Abort),
        (Some(Call::Send(3)), Failure::Abort),
        (Some(Call::Send(2)), Failure::BrokerDown),
        (Some(Call::Commit(3)), Failure::TransactionTimeout),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let delivery = MemorySink::default();
        if let Some(call) = call {
            delivery.fail(call, failure);
        }
        let outcome =
            run_counting(&stateful_config(dir.path()), counting("c"), &delivery, None).await;
        outcome
            .result
            .unwrap_or_else(|e| panic!("{failure:?} at {call:?}: {e}"));
        assert_counted_once(&delivery.seen(), &format!("{failure:?} at {call:?}"));
        assert_eq!(outcome.metrics.snapshot().state.keys, 1);
    }
}

/// A swap keeps the state, and the changes of batches the old module transformed
/// ahead of the switch are dropped: the new module redoes them over the committed state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swap_keeps_the_state_and_drops_the_old_modules_read_ahead() {
    let (swaps_in, swaps) = mpsc::channel(1);
    let (reply_in, reply) = oneshot::channel();
    let new_module = counting("d");
    let request = SwapRequest {
        instance: new_module.instantiate(&[], Arc::default()).unwrap(),
        module: Arc::new(new_module),
        reply: reply_in,
    };
    let old_module = Counting {
        digest: "c",
        swap_on: Some((3, Arc::new(Mutex::new(Some((swaps_in, request)))))),
        slow: Duration::ZERO,
    };
    let dir = tempfile::tempdir().unwrap();
    let delivery = MemorySink::default();
    // The stage transforms the next batches while the loop sends, before it sees the swap.
    delivery.slow_sends(Duration::from_millis(200));
    let outcome = run_counting(
        &stateful_config(dir.path()),
        old_module,
        &delivery,
        Some(swaps),
    )
    .await;
    outcome.result.unwrap();
    reply.await.unwrap().unwrap();
    let seen = delivery.seen();
    assert_counted_once(&seen, "swap");
    let digests: Vec<_> = seen
        .committed
        .iter()
        .map(|t| t.position.module_digest.as_str())
        .collect();
    assert!(
        digests.contains(&"c") && digests.contains(&"d"),
        "{digests:?}"
    );
}

/// Each row was delivered once in table order, each counted once.
fn assert_counted_once(seen: &Seen, case: &str) {
    let total = all_rows().len() as u64;
    assert_eq!(seen.origins(), all_rows(), "{case}");
    assert_eq!(
        counts(seen),
        (1..=total).collect::<Vec<_>>(),
        "{case}: each row counted once, in order"
    );
    assert_eq!(changelog_count(seen), Some(total), "{case}");
}

/// A module that fails every batch it is given.
#[derive(Clone)]
struct AlwaysFails;

impl Module for AlwaysFails {
    fn name(&self) -> &str {
        "always-fails"
    }
    fn digest(&self) -> &str {
        "f"
    }
    fn contract(&self) -> &str {
        "test"
    }
    fn instantiate(
        &self,
        _: &[(String, String)],
        _: Arc<Format>,
    ) -> Result<Box<dyn Instance>, EngineError> {
        Ok(Box::new(AlwaysFails))
    }
}

impl Instance for AlwaysFails {
    fn transform(&mut self, _: &RecordBatch) -> Result<BatchOutput, TransformError> {
        Err(TransformError::Batch {
            module: "always-fails".into(),
            message: "nothing works".into(),
        })
    }
}

/// Runs `live` to the latest version with `candidate` in its shadow, and waits for the
/// shadow to compare what the live module did (or to end).
async fn run_shadowed(
    config: &PipelineConfig,
    live: Arc<dyn Module>,
    candidate: Arc<dyn Module>,
    limits: ShadowLimits,
    delivery: &MemorySink,
) -> crate::shadow::ShadowReport {
    let instance = candidate
        .instantiate(&config.transform_params(), Arc::new(config.format()))
        .unwrap();
    let shadow = Shadow::start(config, live.digest(), candidate, instance, limits);
    let slot = Arc::new(ShadowSlot::default());
    slot.install(shadow.clone());
    let controls = RunControls {
        module: Some(live),
        quiet_progress: true,
        shadow: slot,
        ..RunControls::default()
    };
    let (_stop, shutdown) = watch::channel(false);
    let summary = run_on(RunMode::StopAtLatest, config, controls, delivery, shutdown)
        .await
        .unwrap();
    assert_eq!(summary.position, Position::at_version(latest() + 1));
    for _ in 0..500 {
        let report = shadow.report();
        if !shadow.is_running()
            || (report.through.is_some() && report.through == report.live_through)
        {
            return report;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the shadow did not catch up: {:?}", shadow.report());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_of_the_same_module_finds_every_record_equal_and_produces_nothing() {
    let delivery = MemorySink::default();
    // An abort redoes batches the shadow has compared already: they count once.
    delivery.fail(Call::Commit(2), Failure::Abort);
    let report = run_shadowed(
        &config(""),
        Arc::new(rows("a")),
        Arc::new(rows("a")),
        ShadowLimits::default(),
        &delivery,
    )
    .await;
    let seen = delivery.seen();
    assert_eq!(seen.origins(), all_rows(), "the live records, once each");
    let rows = all_rows().len() as u64;
    assert_eq!(report.rows, rows);
    assert_eq!(report.skipped_batches, 0);
    assert_eq!(report.topics["out"].equal, rows);
    assert!(!report.total().differs());
    assert!(report.differences.is_empty());
    assert_eq!(report.live_cost.records, rows);
    assert_eq!(report.candidate_cost.records, rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_names_the_records_and_rejections_a_candidate_changes() {
    let delivery = MemorySink::default();
    let candidate = Rows {
        digest: "b",
        script: Script {
            reject_first_rows: true,
            ..Script::default()
        },
    };
    let config = config("on_error = \"skip\"");
    let report = run_shadowed(
        &config,
        Arc::new(rows("a")),
        Arc::new(candidate),
        ShadowLimits {
            differences: 1000,
            ..ShadowLimits::default()
        },
        &delivery,
    )
    .await;
    assert_eq!(delivery.seen().origins(), all_rows());
    // Every batch's first row is rejected (a missing record and a rejection); every
    // other record has the candidate's key (changed).
    let rows = all_rows().len() as u64;
    let counts = report.topics["out"];
    assert_eq!(report.rejections.candidate_only, report.batches);
    assert_eq!(counts.missing, report.batches);
    assert_eq!(counts.changed, rows - report.batches);
    assert_eq!(counts.equal + counts.added, 0);
    let missing: Vec<(u64, u64)> = report
        .differences
        .iter()
        .filter(|d| d.kind == DifferenceKind::Missing)
        .map(|d| (d.version, d.row))
        .collect();
    assert_eq!(missing.len() as u64, report.batches);
    for (version, row) in missing {
        assert!(all_rows().contains(&(version, row)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_candidate_is_stopped_and_the_live_pipeline_delivers_everything() {
    let delivery = MemorySink::default();
    let report = run_shadowed(
        &config(""),
        Arc::new(rows("a")),
        Arc::new(AlwaysFails),
        ShadowLimits::default(),
        &delivery,
    )
    .await;
    assert_eq!(delivery.seen().origins(), all_rows());
    assert_eq!(report.phase, ShadowPhase::Stopped);
    assert_eq!(
        report.failed_batches,
        u64::from(crate::shadow::MAX_FAILED_IN_A_ROW)
    );
    assert!(
        report.reason.as_deref().unwrap().contains("nothing works"),
        "{report:?}"
    );
    assert_eq!(report.topics["out"].missing, report.live_cost.records);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_finishes_at_its_batch_limit() {
    let delivery = MemorySink::default();
    let report = run_shadowed(
        &config(""),
        Arc::new(rows("a")),
        Arc::new(rows("a")),
        ShadowLimits {
            batches: Some(2),
            ..ShadowLimits::default()
        },
        &delivery,
    )
    .await;
    assert_eq!(report.phase, ShadowPhase::Finished);
    assert_eq!(report.batches, 2);
    assert_eq!(delivery.seen().origins(), all_rows());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_following_pipeline_stops_after_its_ending_version() {
    let end = latest() - 1;
    let config = config_with(&format!("ending_version = {end}"), "", "");
    let delivery = MemorySink::default();
    let (_stop, shutdown) = watch::channel(false);
    let outcome = run_in(
        RunMode::Follow,
        &config,
        rows("a"),
        &delivery,
        shutdown,
        None,
    )
    .await;
    let summary = outcome.result.unwrap();
    assert_eq!(summary.position, Position::at_version(end + 1));
    let through_end: Vec<(u64, u64)> = all_rows()
        .into_iter()
        .filter(|(version, _)| *version <= end)
        .collect();
    assert_eq!(delivery.seen().origins(), through_end);
}

/// A stateful candidate counts on from a copy of the live state: the same counts as
/// the live module, batch after batch, while the live pipeline counts every row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateful_shadow_works_on_a_copy_of_the_live_state() {
    let dir = tempfile::tempdir().unwrap();
    let delivery = MemorySink::default();
    delivery.fail(Call::Commit(2), Failure::Abort);
    let config = stateful_config(dir.path());
    let report = run_shadowed(
        &config,
        Arc::new(counting("c")),
        Arc::new(counting("c")),
        ShadowLimits::default(),
        &delivery,
    )
    .await;
    assert_counted_once(&delivery.seen(), "beside a shadow");
    let state = report.state.clone().expect("the candidate has a copy");
    // Made for the first batch, which read an empty state.
    assert_eq!(state.copied_keys, 0, "{report:?}");
    assert_eq!(state.keys, 1, "{report:?}");
    assert!(report.batches > 2, "{report:?}");
    assert_eq!(state.changes_equal, report.batches, "{report:?}");
    assert_eq!(
        (state.changes_differ, state.live_only, state.candidate_only),
        (0, 0, 0)
    );
    let counts = report.topics["out"];
    assert_eq!(counts.equal, report.rows, "{report:?}");
    assert!(!report.total().differs(), "{report:?}");
    assert_eq!(report.rows, all_rows().len() as u64, "{report:?}");
}

/// A one-row batch at `version`, as the live Counting module left it after a count of
/// 100 before version 1: its record, its state changes, and (when the shadow asks)
/// the state it read.
fn counted_batch(live: &sluice_state::PipelineState, shadow: &Shadow, version: u64) -> LiveBatch {
    use sluice_source::arrow::array::Int32Array;
    use sluice_source::arrow::datatypes::{DataType, Field, Schema};
    let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int32, false)]));
    let batch = RecordBatch::try_new(schema, vec![Arc::new(Int32Array::from(vec![1]))]).unwrap();
    let end = Position {
        version,
        row_offset: 1,
        snapshot: false,
    };
    let count = (100 + version).to_string().into_bytes();
    let before = shadow.wants_state().then(|| live.freeze().unwrap());
    let changes = Arc::new(
        [(b"rows".to_vec(), Some(count.clone()))]
            .into_iter()
            .collect::<sluice_engine::StateChanges>(),
    );
    live.push(end, changes.clone());
    live.committed(end).unwrap();
    LiveBatch {
        batch: ChangeBatch { batch, end },
        records: vec![OutputRecord {
            source_row: 0,
            key: Some(b"c".to_vec()),
            value: Some(count),
            ..OutputRecord::default()
        }],
        failed: Vec::new(),
        took: Duration::ZERO,
        memory_peak: 0,
        keyed: Some(LiveKeyed { before, changes }),
        lookups: None,
    }
}

/// A stateful candidate too slow for the live module skips batches and takes their
/// live state changes, so its counts still match on the batches it compares.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateful_candidate_behind_the_live_module_reads_on_from_the_live_changes() {
    let dir = tempfile::tempdir().unwrap();
    let config = stateful_config(dir.path());
    let slow = Counting {
        slow: Duration::from_millis(20),
        ..counting("c")
    };
    let instance = slow.instantiate(&[], Arc::default()).unwrap();
    let shadow = Shadow::start(
        &config,
        "c",
        Arc::new(slow),
        instance,
        ShadowLimits::default(),
    );
    let live = sluice_state::PipelineState::new(Arc::new(sluice_state::MemoryStore::default()));
    let counted: sluice_engine::StateChanges = [(b"rows".to_vec(), Some(b"100".to_vec()))]
        .into_iter()
        .collect();
    live.push(Position::at_version(0), Arc::new(counted));
    live.committed(Position::at_version(0)).unwrap();
    let wait = async |until: &dyn Fn(&crate::shadow::ShadowReport) -> bool| {
        for _ in 0..500 {
            let report = shadow.report();
            if until(&report) {
                return report;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the shadow did not get there: {:?}", shadow.report());
    };
    // The copy is made on the first batch; the next ones come faster than the
    // candidate takes them, so most are skipped.
    shadow.offer(counted_batch(&live, &shadow, 1));
    let copied = wait(&|report| report.state.is_some()).await;
    assert_eq!(copied.state.unwrap().copied_keys, 1);
    for version in 2..=60 {
        shadow.offer(counted_batch(&live, &shadow, version));
    }
    // Every batch after the copy either compared or skipped.
    wait(&|report| report.batches + report.skipped_batches == 59).await;
    // The next batch comes after the skipped ones: their changes are applied first.
    shadow.offer(counted_batch(&live, &shadow, 61));
    let report = wait(&|report| report.through.is_some_and(|t| t.version == 61)).await;
    let state = report.state.clone().expect("the candidate has a copy");
    assert!(report.skipped_batches > 0, "{report:?}");
    assert_eq!(
        state.caught_up_batches, report.skipped_batches,
        "{report:?}"
    );
    assert_eq!(report.topics["out"].changed, 0, "{report:?}");
    assert_eq!(report.topics["out"].equal, report.batches, "{report:?}");
    assert_eq!(state.changes_differ, 0, "{report:?}");
}

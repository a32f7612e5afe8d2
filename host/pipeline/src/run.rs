//! The pipeline loop.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_engine::{OutputRecord, TransformError, TransformInstance, TransformModule};
use sluice_sink::{Delivery, KafkaSink, RecordOrigin, SinkConfig, SinkRecord, SourcePosition};
use sluice_source::arrow::array::{AsArray, RecordBatch};
use sluice_source::arrow::compute::cast;
use sluice_source::arrow::datatypes::{DataType, Int64Type, TimeUnit};
use sluice_source::{ChangeBatch, ChangeFeed, Position, SourceError, SourceOptions};
use tokio::sync::{mpsc, oneshot, watch};

use crate::config::{DeliveryMode, PipelineConfig, StartingVersion};
use crate::error::PipelineError;
use crate::metrics::PipelineMetrics;
use crate::stage::{TransformStage, dead_letter_value, load_module};

/// Whether the pipeline keeps following the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunMode {
    /// Read to the latest version, then poll for new commits until shut down.
    Follow,
    /// Read to the latest version, then stop (like Spark's `availableNow` trigger).
    StopAtLatest,
}

/// Where a run starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartFrom {
    /// After the stored position, or where the config says if there is none (as Spark
    /// does with its checkpoint).
    StoredPosition,
    /// Where the config says, ignoring the stored position.
    Configured,
}

/// What a run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Change rows read.
    pub rows_in: u64,
    /// Records produced (dead letters included).
    pub records_out: u64,
    /// Rows the module failed on that were skipped or dead-lettered.
    pub rows_failed: u64,
    /// Where the pipeline stopped.
    pub position: Position,
}

/// A module to run from the next batch boundary on.
pub struct SwapRequest {
    /// The new module, already checked.
    pub module: TransformModule,
    /// An instance of it, initialised with the pipeline's parameters, so the switch
    /// itself does no compiling or initialising.
    pub instance: TransformInstance,
    /// Told when the switch is done, or why it could not be.
    pub reply: oneshot::Sender<Result<SwapReport, String>>,
}

/// A finished swap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwapReport {
    /// Digest of the module that ran up to `position`.
    pub from_digest: String,
    /// Digest of the module that runs from `position` on.
    pub to_digest: String,
    /// The boundary: records before it were made by the old module and committed with
    /// a position naming it; records after it are the new module's.
    pub position: Position,
    /// How long the pipeline was held at the boundary (committing the old module's
    /// work and switching), compile and initialisation excluded.
    pub pause: Duration,
    /// Change rows of the old module's work committed at the boundary.
    pub committed_rows: u64,
}

/// What a supervisor hands a run beyond its config.
#[derive(Default)]
pub struct RunControls {
    /// The module to run; loaded from `[transform] module` when `None`.
    pub module: Option<TransformModule>,
    /// Modules to switch to, each at the next batch boundary.
    pub swaps: Option<mpsc::Receiver<SwapRequest>>,
    /// Where the run counts what it does.
    pub metrics: Arc<PipelineMetrics>,
}

/// Batches read ahead of the transform.
const READ_AHEAD: usize = 4;

/// Pause before redoing work after an aborted transaction.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// Aborted transactions in a row, without a commit in between, after which the
/// pipeline stops instead of retrying: the cause is not transient.
const MAX_RETRIES: u32 = 10;

/// The Kafka settings of a pipeline.
pub fn sink_config(config: &PipelineConfig) -> SinkConfig {
    SinkConfig {
        pipeline: config.pipeline.name.clone(),
        properties: config.kafka_properties(),
        topic: config.sink.topic.clone(),
        position_topic: config.position_topic(),
        delivery: match config.sink.delivery {
            DeliveryMode::ExactlyOnce => Delivery::ExactlyOnce,
            DeliveryMode::AtLeastOnce => Delivery::AtLeastOnce,
        },
        connect_timeout: config.sink.connect_timeout,
        transaction_timeout: config.sink.transaction_timeout,
    }
}

/// The state one run carries from batch to batch.
struct Pipeline<'a> {
    name: &'a str,
    feed: Arc<ChangeFeed>,
    stage: TransformStage,
    dead_letter_topic: Option<String>,
    sink: KafkaSink,
    change_headers: bool,
    commits: CommitPolicy,
    uncommitted: Option<Uncommitted>,
    summary: RunSummary,
    swaps: Option<mpsc::Receiver<SwapRequest>>,
    metrics: Arc<PipelineMetrics>,
}

/// When sent work is committed (in exactly-once mode, when a transaction ends).
#[derive(Clone, Copy)]
struct CommitPolicy {
    rows: u64,
    interval: Duration,
    per_version: bool,
}

/// Runs a pipeline until it fails, `shutdown` becomes true, or (in
/// [`RunMode::StopAtLatest`]) it has caught up.
pub async fn run(
    config: &PipelineConfig,
    mode: RunMode,
    start_from: StartFrom,
    shutdown: watch::Receiver<bool>,
) -> Result<RunSummary, PipelineError> {
    run_controlled(config, mode, start_from, shutdown, RunControls::default()).await
}

/// [`run`], with a module, swaps and metrics from a supervisor.
pub async fn run_controlled(
    config: &PipelineConfig,
    mode: RunMode,
    start_from: StartFrom,
    mut shutdown: watch::Receiver<bool>,
    controls: RunControls,
) -> Result<RunSummary, PipelineError> {
    let name = config.pipeline.name.as_str();
    let options = SourceOptions {
        batch_rows: config.source.batch_rows,
        storage_options: config.source.storage_options.clone().into_iter().collect(),
    };
    let table = config.source.table.clone();
    let feed = Arc::new(blocking(move || ChangeFeed::open(&table, options)).await?);

    let stage_config = config.clone();
    let metrics = controls.metrics.clone();
    let module = controls.module;
    let stage = blocking(move || {
        let module = match module {
            Some(module) => module,
            None => load_module(&stage_config)?,
        };
        TransformStage::start(&stage_config, module, metrics)
    })
    .await?;

    let sink = KafkaSink::connect(sink_config(config)).await?;
    let stored = match start_from {
        StartFrom::StoredPosition => stored_position(config, &feed, &sink).await?,
        StartFrom::Configured => None,
    };
    let (start, resolved) = match stored {
        Some(position) => (position, false),
        None => (configured_start(config, &feed).await?, true),
    };
    tracing::info!(pipeline = name, table = feed.table(), position = %start, "Pipeline started.");
    let mut pipeline = Pipeline {
        name,
        feed,
        stage,
        dead_letter_topic: config.transform.dead_letter_topic.clone(),
        sink,
        change_headers: config.sink.change_headers,
        commits: CommitPolicy {
            rows: config.sink.commit_rows,
            interval: config.sink.commit_interval,
            per_version: config.sink.commit_per_version,
        },
        uncommitted: None,
        summary: RunSummary {
            position: start,
            ..RunSummary::default()
        },
        swaps: controls.swaps,
        metrics: controls.metrics,
    };
    pipeline
        .metrics
        .record_commit(0, 0, 0, start.version, start.row_offset);
    if resolved {
        // Store the start at once: `latest` (or a snapshot of the latest version) means
        // another version later, and a restart must not skip what was committed since.
        let position = pipeline.source_position(start);
        pipeline.sink.commit(&position).await?;
    }

    let mut retries = 0;
    let mut idle_wait = config.source.poll_interval;
    loop {
        if *shutdown.borrow() {
            break;
        }
        let reader = pipeline.feed.clone();
        let latest = blocking(move || reader.latest_version()).await?;
        pipeline.metrics.record_latest(latest);
        if pipeline.summary.position.version <= latest {
            idle_wait = config.source.poll_interval;
            let before = pipeline.summary.position;
            match pipeline.process_range(latest, &mut shutdown).await {
                Ok(true) => break,
                Ok(false) => {
                    retries = 0;
                    continue;
                }
                Err(PipelineError::Sink(e)) if e.is_retriable() && retries < MAX_RETRIES => {
                    retries = if pipeline.summary.position == before {
                        retries + 1
                    } else {
                        1
                    };
                    tracing::warn!(pipeline = name, error = %e, position = %pipeline.summary.position, "Redoing the work from the last committed position.");
                    pipeline.metrics.count_sink_retry();
                    tokio::time::sleep(RETRY_PAUSE).await;
                    if e.needs_reconnect() {
                        pipeline.sink = KafkaSink::connect(sink_config(config)).await?;
                    }
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
        if mode == RunMode::StopAtLatest {
            break;
        }
        let swap = tokio::select! {
            _ = tokio::time::sleep(idle_wait) => None,
            _ = shutdown.changed() => None,
            swap = next_swap(&mut pipeline.swaps) => swap,
        };
        if let Some(request) = swap {
            pipeline.swap(request).await?;
        }
        let max_wait = config
            .source
            .max_poll_interval
            .unwrap_or(config.source.poll_interval);
        idle_wait = (idle_wait * 2).min(max_wait);
    }
    let summary = pipeline.summary;
    tracing::info!(pipeline = name, position = %summary.position, rows_in = summary.rows_in, records_out = summary.records_out, rows_failed = summary.rows_failed, "Pipeline stopped.");
    Ok(summary)
}

/// The next swap asked for; never resolves when swaps are not taken.
async fn next_swap(swaps: &mut Option<mpsc::Receiver<SwapRequest>>) -> Option<SwapRequest> {
    let Some(receiver) = swaps else {
        return std::future::pending().await;
    };
    let request = receiver.recv().await;
    if request.is_none() {
        // Nobody can ask any more.
        *swaps = None;
    }
    request
}

/// The position stored by the last run, checked to belong to the configured table.
async fn stored_position(
    config: &PipelineConfig,
    feed: &Arc<ChangeFeed>,
    sink: &KafkaSink,
) -> Result<Option<Position>, PipelineError> {
    if let Some(stored) = sink.load_position().await? {
        if stored.table != feed.table() {
            return Err(PipelineError::OtherTable {
                pipeline: config.pipeline.name.clone(),
                stored: stored.table,
                configured: feed.table().to_string(),
            });
        }
        let position = Position {
            version: stored.version,
            row_offset: stored.row_offset,
            snapshot: stored.snapshot,
        };
        let reader = feed.clone();
        let latest = blocking(move || reader.latest_version()).await?;
        if position.version > latest + 1 {
            return Err(PipelineError::PositionAhead {
                pipeline: config.pipeline.name.clone(),
                table: feed.table().to_string(),
                version: position.version,
                latest,
            });
        }
        tracing::info!(%position, module_digest = %stored.module_digest, "Resuming from the stored position.");
        return Ok(Some(position));
    }
    Ok(None)
}

/// Where the config says a pipeline without a stored position starts.
pub(crate) async fn configured_start(
    config: &PipelineConfig,
    feed: &Arc<ChangeFeed>,
) -> Result<Position, PipelineError> {
    let source = &config.source;
    let reader = feed.clone();
    if let Some(time) = source.starting_timestamp {
        let millis = time
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let version = blocking(move || reader.version_at_or_after(millis)).await?;
        return Ok(Position::at_version(version));
    }
    let version = match source.starting_version {
        None | Some(StartingVersion::Earliest) => 0,
        Some(StartingVersion::Version(v)) => v,
        Some(StartingVersion::Latest) => blocking(move || reader.latest_version()).await?,
    };
    Ok(match (source.snapshot, source.starting_version) {
        (true, _) => Position::snapshot_at(version),
        (false, Some(StartingVersion::Latest)) => Position::at_version(version + 1),
        (false, _) => Position::at_version(version),
    })
}

/// Work sent to Kafka since the last commit.
struct Uncommitted {
    since: Instant,
    rows: u64,
    records: u64,
    bytes: u64,
    failed: u64,
    end: Position,
}

impl Pipeline<'_> {
    /// Delivers versions from the current position through `latest`; returns whether a
    /// shutdown was asked for (after committing the batch in hand). On error everything
    /// since the last commit is rolled back, so the caller may redo from
    /// `summary.position`.
    async fn process_range(
        &mut self,
        latest: u64,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<bool, PipelineError> {
        let result = self.deliver_range(latest, shutdown).await;
        if result.is_err() {
            self.uncommitted = None;
            self.sink.rollback().await;
        }
        result
    }

    async fn deliver_range(
        &mut self,
        latest: u64,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<bool, PipelineError> {
        let from = self.summary.position;
        // A snapshot ends where the changes of the next version begin.
        let end = Position::at_version(if from.snapshot {
            from.version + 1
        } else {
            latest + 1
        });
        let (tx, mut rx) = mpsc::channel::<Result<ChangeBatch, SourceError>>(READ_AHEAD);
        let reader = self.feed.clone();
        let read = tokio::task::spawn_blocking(move || {
            let send_all = |batches: &mut dyn Iterator<Item = Result<ChangeBatch, SourceError>>| {
                for batch in batches {
                    if tx.blocking_send(batch).is_err() {
                        return;
                    }
                }
            };
            let opened = if from.snapshot {
                reader
                    .read_snapshot(from)
                    .map(|mut batches| send_all(&mut batches))
            } else {
                reader
                    .read(from, latest)
                    .map(|mut batches| send_all(&mut batches))
            };
            if let Err(e) = opened {
                let _ = tx.blocking_send(Err(e));
            }
        });
        let (rows_before, records_before) = (self.summary.rows_in, self.summary.records_out);
        while let Some(batch) = rx.recv().await {
            let batch = batch?;
            if let Ok(request) = self.swaps.as_mut().map_or(
                Err(mpsc::error::TryRecvError::Empty),
                mpsc::Receiver::try_recv,
            ) {
                self.swap(request).await?;
            }
            if self.commits.per_version
                && let Some(open) = &self.uncommitted
                && open.end.version != batch.end.version
            {
                self.commit(open.end).await?;
            }
            let output = match tokio::task::block_in_place(|| self.stage.apply(&batch.batch)) {
                Ok(output) => output,
                Err((row, source)) => {
                    // The batches before this one are good: keep them.
                    self.commit_uncommitted().await?;
                    return Err(transform_error(
                        self.name,
                        self.feed.table(),
                        &batch,
                        row,
                        source,
                    ));
                }
            };
            let metadata = self
                .change_headers
                .then(|| ChangeMetadata::of(&batch.batch));
            let first_row = batch.end.row_offset - batch.batch.num_rows() as u64;
            let origin = |row: u32| RecordOrigin {
                version: batch.end.version,
                row: first_row + u64::from(row),
            };
            let mut records: Vec<SinkRecord> = output
                .records
                .into_iter()
                .map(|record| {
                    let origin = origin(record.source_row);
                    sink_record(record, origin, metadata.as_ref())
                })
                .collect();
            let failed = output.failed.len() as u64;
            for failure in &output.failed {
                let origin = origin(failure.row);
                tracing::warn!(
                    pipeline = self.name,
                    table = self.feed.table(),
                    version = origin.version,
                    row = origin.row,
                    policy = ?self.stage.policy,
                    error = %failure.error,
                    "The transform failed on a change row; the error policy lets the pipeline carry on without it."
                );
                if let Some(topic) = &self.dead_letter_topic {
                    let value = dead_letter_value(
                        self.feed.table(),
                        origin.version,
                        origin.row,
                        self.stage.name(),
                        self.stage.digest(),
                        &batch.batch,
                        failure,
                    );
                    records.push(SinkRecord {
                        topic: Some(topic.clone()),
                        partition: None,
                        key: Some(
                            format!("{}@{}#{}", self.feed.table(), origin.version, origin.row)
                                .into_bytes(),
                        ),
                        value: Some(value.into_bytes()),
                        headers: Vec::new(),
                        origin: Some(origin),
                    });
                }
            }
            let produced = records.len() as u64;
            let bytes: usize = records
                .iter()
                .map(|r| r.key.as_ref().map_or(0, Vec::len) + r.value.as_ref().map_or(0, Vec::len))
                .sum();
            self.sink.send(records).await?;
            let open = self.uncommitted.get_or_insert(Uncommitted {
                since: Instant::now(),
                rows: 0,
                records: 0,
                bytes: 0,
                failed: 0,
                end: batch.end,
            });
            open.rows += batch.batch.num_rows() as u64;
            open.records += produced;
            open.bytes += bytes as u64;
            open.failed += failed;
            open.end = batch.end;
            let stopping = *shutdown.borrow();
            if stopping
                || open.rows >= self.commits.rows
                || open.since.elapsed() >= self.commits.interval
            {
                self.commit_uncommitted().await?;
            }
            if stopping {
                return Ok(true);
            }
        }
        read.await.expect("the reader thread does not panic");
        // Versions without change rows (OPTIMIZE, metadata) still move the position.
        self.commit(end).await?;
        tracing::info!(
            pipeline = self.name,
            versions = %format!("{}..={}", from.version, end.version - 1),
            snapshot = from.snapshot,
            rows_in = self.summary.rows_in - rows_before,
            records_out = self.summary.records_out - records_before,
            "Delivered the changes of a version range."
        );
        Ok(false)
    }

    /// Commits the work sent so far, if any, at the position after it.
    async fn commit_uncommitted(&mut self) -> Result<(), PipelineError> {
        match &self.uncommitted {
            Some(open) => self.commit(open.end).await,
            None => Ok(()),
        }
    }

    /// Commits the work sent so far together with `position`.
    async fn commit(&mut self, position: Position) -> Result<(), PipelineError> {
        if self.uncommitted.is_none() && self.summary.position == position {
            return Ok(());
        }
        self.sink.commit(&self.source_position(position)).await?;
        let done = self.uncommitted.take();
        let (rows, records, bytes) = done
            .as_ref()
            .map_or((0, 0, 0), |d| (d.rows, d.records, d.bytes));
        if let Some(done) = done {
            self.summary.rows_in += done.rows;
            self.summary.records_out += done.records;
            self.summary.rows_failed += done.failed;
        }
        self.summary.position = position;
        self.metrics
            .record_commit(rows, records, bytes, position.version, position.row_offset);
        Ok(())
    }

    /// Switches to the requested module at this batch boundary: the old module's work
    /// is committed first, under its digest, so every transaction holds one module's
    /// records and the position that follows them names that module.
    async fn swap(&mut self, request: SwapRequest) -> Result<(), PipelineError> {
        let started = Instant::now();
        let committed_rows = self.uncommitted.as_ref().map_or(0, |open| open.rows);
        if let Err(e) = self.commit_uncommitted().await {
            let _ = request.reply.send(Err(format!(
                "the work before the switch could not be committed: {e}"
            )));
            return Err(e);
        }
        let from_digest = self.stage.digest().to_string();
        self.stage.swap(request.module, request.instance);
        let pause = started.elapsed();
        self.metrics.record_swap(pause);
        let report = SwapReport {
            from_digest,
            to_digest: self.stage.digest().to_string(),
            position: self.summary.position,
            pause,
            committed_rows,
        };
        tracing::info!(
            pipeline = self.name,
            from = report.from_digest,
            to = report.to_digest,
            position = %report.position,
            pause_ms = pause.as_secs_f64() * 1000.0,
            "Switched the pipeline to a new module at a batch boundary."
        );
        let _ = request.reply.send(Ok(report));
        Ok(())
    }

    fn source_position(&self, position: Position) -> SourcePosition {
        SourcePosition {
            table: self.feed.table().to_string(),
            version: position.version,
            row_offset: position.row_offset,
            module_digest: self.stage.digest().to_string(),
            snapshot: position.snapshot,
        }
    }
}

/// The error that stops a pipeline when its module fails on `row` of `batch`.
pub(crate) fn transform_error(
    pipeline: &str,
    table: &str,
    batch: &ChangeBatch,
    row: u32,
    source: TransformError,
) -> PipelineError {
    let first_row = batch.end.row_offset - batch.batch.num_rows() as u64;
    let row = u64::from(row);
    PipelineError::Transform {
        pipeline: pipeline.to_string(),
        table: table.to_string(),
        version: batch.end.version,
        row_in_version: first_row + row,
        source,
    }
}

fn sink_record(
    record: OutputRecord,
    origin: RecordOrigin,
    metadata: Option<&ChangeMetadata>,
) -> SinkRecord {
    let mut headers = record.headers;
    if let Some(metadata) = metadata {
        headers.extend(metadata.headers(record.source_row as usize));
    }
    SinkRecord {
        topic: record.topic,
        partition: record.partition,
        key: record.key,
        value: record.value,
        headers,
        origin: Some(origin),
    }
}

/// The change columns of a batch, for records' headers.
struct ChangeMetadata {
    change_types: Vec<String>,
    versions: Vec<i64>,
    timestamps: Vec<i64>,
}

impl ChangeMetadata {
    fn of(batch: &RecordBatch) -> ChangeMetadata {
        let column =
            |name: &str, to: DataType| batch.column_by_name(name).and_then(|c| cast(c, &to).ok());
        let integers = |name: &str, to: DataType| -> Vec<i64> {
            column(name, to)
                .and_then(|c| cast(&c, &DataType::Int64).ok())
                .map(|c| {
                    c.as_primitive::<Int64Type>()
                        .iter()
                        .map(Option::unwrap_or_default)
                        .collect()
                })
                .unwrap_or_default()
        };
        ChangeMetadata {
            change_types: column("_change_type", DataType::Utf8)
                .map(|c| {
                    c.as_string::<i32>()
                        .iter()
                        .map(|v| v.unwrap_or_default().to_string())
                        .collect()
                })
                .unwrap_or_default(),
            versions: integers("_commit_version", DataType::Int64),
            timestamps: integers(
                "_commit_timestamp",
                DataType::Timestamp(TimeUnit::Microsecond, None),
            ),
        }
    }

    fn headers(&self, row: usize) -> [(String, Vec<u8>); 3] {
        let text = |v: Option<String>| v.unwrap_or_default().into_bytes();
        [
            (
                "sluice.change_type".to_string(),
                text(self.change_types.get(row).cloned()),
            ),
            (
                "sluice.commit_version".to_string(),
                text(self.versions.get(row).map(i64::to_string)),
            ),
            (
                "sluice.commit_timestamp".to_string(),
                text(self.timestamps.get(row).map(i64::to_string)),
            ),
        ]
    }
}

async fn blocking<T: Send + 'static, E: Send + 'static>(
    f: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, PipelineError>
where
    PipelineError: From<E>,
{
    tokio::task::spawn_blocking(f)
        .await
        .expect("blocking pipeline work does not panic")
        .map_err(PipelineError::from)
}

//! The pipeline loop: ranges of the change feed, read and transformed ahead
//! ([`crate::range`]), sent and committed here with the position after them, retried
//! from the last commit when Kafka aborts, switched to a new module at a batch boundary.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use sluice_sink::{SinkError, SourcePosition};
use sluice_source::{ChangeFeed, Position, Preceded};
use sluice_state::LiveState;
use tokio::sync::{mpsc, oneshot, watch};

use crate::config::PipelineConfig;
use crate::error::{EarlierWork, PipelineError};
use crate::keyed::KeyedState;
use crate::lookups::LookupTables;
use crate::metrics::{PipelineMetrics, Stage};
use crate::module::{Instance, Module};
use crate::outage::{Next, Outage, Waiting, WaitingFor, epoch_ms};
use crate::progress::Progress;
use crate::range::{Prepared, PreparedBatch, RangeJob};
use crate::records::RecordBuilder;
use crate::schema_ids::SchemaIds;
use crate::shadow::ShadowSlot;
use crate::sink::{ConnectSink, Sink};
use crate::stage::TransformStage;
use crate::start::{StartFrom, Started, latest_version, start};

/// Whether the pipeline keeps following the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunMode {
    /// Read to the latest version, then poll for new commits until shut down.
    Follow,
    /// Read to the latest version, then stop (like Spark's `availableNow` trigger).
    StopAtLatest,
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
    pub module: Arc<dyn Module>,
    /// An instance of it, initialised with the pipeline's parameters, so the switch
    /// itself does no compiling or initialising.
    pub instance: Box<dyn Instance>,
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
    pub module: Option<Arc<dyn Module>>,
    /// Modules to switch to, each at the next batch boundary.
    pub swaps: Option<mpsc::Receiver<SwapRequest>>,
    /// Where the run counts what it does.
    pub metrics: Arc<PipelineMetrics>,
    /// Where the run lends its keyed state's store while it runs, for reads from
    /// outside the loop.
    pub live_state: Arc<LiveState>,
    /// Whether progress on long work is shown another way (a progress bar drawn from
    /// the metrics), so the run does not log it.
    pub quiet_progress: bool,
    /// Where a shadow deploy is put to run beside the live module.
    pub shadow: Arc<ShadowSlot>,
    /// The lookup tables this node follows, shared with its other pipelines.
    pub lookups: Arc<LookupTables>,
}

/// Pause before redoing work after an aborted transaction.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// Longest pause between reads of a table whose storage keeps failing.
const MAX_STORAGE_PAUSE: Duration = Duration::from_secs(30);

/// Failed attempts in a row, without a commit in between, after which the pipeline
/// stops instead of retrying: the cause is not transient. With storage pauses that is
/// about three minutes on top of the object store's own retries. The schema registry's
/// outages are bounded by time instead ([`Outage`]).
const MAX_RETRIES: u32 = 10;

/// The loop over any [`Sink`], which `connect` makes.
pub(crate) async fn run_with<D: Sink, C: ConnectSink<D>>(
    config: &PipelineConfig,
    mode: RunMode,
    start_from: StartFrom,
    mut shutdown: watch::Receiver<bool>,
    controls: RunControls,
    connect: C,
) -> Result<RunSummary, PipelineError> {
    let name = config.pipeline.name.as_str();
    let schema_ids = SchemaIds::for_config(config)
        .map_err(|e| PipelineError::RegistryClient(Box::new(e)))?
        .map(Arc::new);
    let keyed = KeyedState::open(config, &controls.live_state)?;
    let Started {
        feed,
        stages,
        delivery,
        start,
        resolved,
        fresh,
        took,
    } = start(
        config,
        start_from,
        controls.module,
        controls.metrics.clone(),
        keyed.as_ref().map(KeyedState::stage),
        controls.lookups.clone(),
        connect.connect(),
    )
    .await?;
    tracing::info!(pipeline = name, table = feed.table(), position = %start, startup = %took, "Pipeline started.");
    controls.metrics.record_commit(0, 0, 0, start);
    let mut pipeline = Pipeline {
        name,
        digest: stages[0].digest().to_string(),
        builder: Arc::new(RecordBuilder::new(config, feed.table(), schema_ids)),
        feed,
        stages: Some(stages),
        delivery: Some(delivery),
        connect,
        commits: CommitPolicy {
            rows: config.sink.commit_rows,
            interval: config.sink.commit_interval,
            per_version: config.sink.commit_per_version,
        },
        uncommitted: None,
        // `latest` (or a snapshot of the latest version) means another version later, so
        // the start is stored with the first commit, or before waiting for new versions:
        // a restart must not skip what was committed since.
        start_unstored: resolved,
        fresh_start: fresh.then_some(start),
        summary: RunSummary {
            position: start,
            ..RunSummary::default()
        },
        swaps: controls.swaps,
        progress: Progress::new(name, controls.metrics.clone(), !controls.quiet_progress),
        metrics: controls.metrics,
        max_outage: config
            .sink
            .schema_registry
            .as_ref()
            .map_or(Duration::ZERO, |registry| registry.max_outage),
        outage: None,
        keyed,
        shadow: controls.shadow,
    };

    let result = pipeline.follow(config, mode, &mut shutdown).await;
    // A stopped pipeline waits for nothing.
    pipeline.metrics.record_waiting(None);
    let fenced = matches!(result, Err(PipelineError::Sink(SinkError::Fenced { .. })));
    if pipeline.start_unstored && !fenced {
        // Keep where the config said to start (`latest` is another version later), so
        // that a restart after a fix does not skip what was committed since. After an
        // error the producer may be unusable: store it through a new one.
        if result.is_err() {
            pipeline.delivery = None;
        }
        let stored = pipeline.commit(pipeline.summary.position).await;
        match (&result, stored) {
            (Ok(()), Err(error)) => return Err(error),
            (Err(_), Err(error)) => tracing::warn!(
                pipeline = name,
                %error,
                "The start position could not be stored after the error that stops the pipeline."
            ),
            _ => {}
        }
    }
    result?;
    pipeline.checkpoint_state().await;
    let summary = pipeline.summary;
    let counters = pipeline.metrics.snapshot();
    let stages = counters.stage_seconds;
    tracing::info!(pipeline = name, position = %summary.position, rows_in = summary.rows_in, records_out = summary.records_out, rows_failed = summary.rows_failed, storage_requests = counters.storage_requests, storage_failures = counters.storage_failures, source_retries = counters.source_retries, state_keys_read = counters.state.keys_read, state_keys_written = counters.state.keys_written, %stages, "Pipeline stopped.");
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

/// A swap asked for and not yet done, if any.
fn pending_swap(swaps: &mut Option<mpsc::Receiver<SwapRequest>>) -> Option<SwapRequest> {
    swaps.as_mut()?.try_recv().ok()
}

/// The state one run carries from batch to batch.
struct Pipeline<'a, D, C> {
    name: &'a str,
    feed: Arc<ChangeFeed>,
    /// The transform stage, when no range job holds it.
    stages: Option<Vec<TransformStage>>,
    /// Digest of the module whose records are being delivered.
    digest: String,
    builder: Arc<RecordBuilder>,
    /// The sink, while connected.
    delivery: Option<D>,
    connect: C,
    commits: CommitPolicy,
    uncommitted: Option<Uncommitted>,
    start_unstored: bool,
    /// The position before which this pipeline delivered nothing, if it starts fresh:
    /// a read from there takes its version's schema as the first.
    fresh_start: Option<Position>,
    summary: RunSummary,
    swaps: Option<mpsc::Receiver<SwapRequest>>,
    progress: Progress,
    metrics: Arc<PipelineMetrics>,
    /// `[sink.schema_registry] max_outage`.
    max_outage: Duration,
    /// The schema registry's outage being waited out, if it is away.
    outage: Option<Outage>,
    /// The pipeline's state, if it keeps state.
    keyed: Option<KeyedState>,
    shadow: Arc<ShadowSlot>,
}

/// When sent work is committed (in exactly-once mode, when a transaction ends).
#[derive(Clone, Copy)]
struct CommitPolicy {
    rows: u64,
    interval: Duration,
    per_version: bool,
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

impl<D: Sink, C: ConnectSink<D>> Pipeline<'_, D, C> {
    /// Delivers new versions until shutdown, an error, or (in [`RunMode::StopAtLatest`])
    /// the latest version.
    async fn follow(
        &mut self,
        config: &PipelineConfig,
        mode: RunMode,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<(), PipelineError> {
        let name = self.name;
        let mut retries = 0;
        let mut idle_wait = config.source.poll_interval;
        let mut idle_since: Option<Instant> = None;
        loop {
            if *shutdown.borrow() {
                break;
            }
            let latest = match latest_version(&self.feed).await {
                Ok(latest) => latest,
                Err(e) if e.is_retriable() && retries < MAX_RETRIES => {
                    retries += 1;
                    self.pause_before_retry(&e, retries, shutdown).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            self.metrics.record_latest(latest);
            // Nothing after the ending version is read.
            let latest = config
                .source
                .ending_version
                .map_or(latest, |end| latest.min(end));
            if self.summary.position.version <= latest {
                idle_since = None;
                idle_wait = config.source.poll_interval;
                let before = self.summary.position;
                match self.process_range(latest, shutdown).await {
                    Ok(true) => break,
                    Ok(false) => {
                        retries = 0;
                        continue;
                    }
                    Err(PipelineError::Registry { source, .. }) if source.is_transient() => {
                        self.wait_for_registry(*source, shutdown).await?;
                        continue;
                    }
                    Err(e) if e.is_retriable() && retries < MAX_RETRIES => {
                        retries = if self.summary.position == before {
                            retries + 1
                        } else {
                            1
                        };
                        self.pause_before_retry(&e, retries, shutdown).await;
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            }
            if self.start_unstored {
                self.commit(self.summary.position).await?;
            }
            if let Some(end) = config.source.ending_version
                && self.summary.position.version > end
            {
                tracing::info!(
                    pipeline = name,
                    ending_version = end,
                    "The pipeline delivered its ending version and stops."
                );
                break;
            }
            if mode == RunMode::StopAtLatest {
                break;
            }
            let idle = *idle_since.get_or_insert_with(Instant::now);
            if idle.elapsed() >= config.sink.release_producer_after && self.delivery.is_some() {
                self.delivery = None;
                tracing::debug!(
                    pipeline = name,
                    "Released the Kafka producer of an idle pipeline; it connects again when the table changes."
                );
            }
            let swap = tokio::select! {
                _ = tokio::time::sleep(idle_wait) => None,
                _ = shutdown.changed() => None,
                swap = next_swap(&mut self.swaps) => swap,
            };
            if let Some(request) = swap {
                self.swap(request).await?;
            }
            let max_wait = config
                .source
                .max_poll_interval
                .unwrap_or(config.source.poll_interval);
            idle_wait = (idle_wait * 2).min(max_wait);
        }
        Ok(())
    }

    /// Counts and logs a failure the pipeline retries, and waits before the retry (or
    /// until shutdown): a moment for Kafka; for storage, twice as long each time up to
    /// [`MAX_STORAGE_PAUSE`], as its outages last longer.
    async fn pause_before_retry(
        &mut self,
        error: &PipelineError,
        retries: u32,
        shutdown: &mut watch::Receiver<bool>,
    ) {
        let name = self.name;
        let position = self.summary.position;
        let pause = match error {
            PipelineError::Source(_) => {
                self.metrics.count_source_retry();
                let pause = (RETRY_PAUSE * 2u32.pow(retries.saturating_sub(1).min(8)))
                    .min(MAX_STORAGE_PAUSE);
                tracing::warn!(pipeline = name, error = %error, %position, retry = retries, pause_seconds = pause.as_secs_f64(), "Reading the table failed; reading again from the last committed position after a pause.");
                pause
            }
            _ => {
                self.metrics.count_sink_retry();
                tracing::warn!(pipeline = name, error = %error, %position, "Redoing the work from the last committed position.");
                RETRY_PAUSE
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.changed() => {}
        }
        if let PipelineError::Sink(e) = error
            && e.needs_reconnect()
        {
            // The next use connects afresh.
            self.delivery = None;
        }
    }

    /// Waits out a schema registry that gave no id (`error`, a transient one) before the
    /// work is redone from the last committed position, or stops the pipeline once the
    /// outage has lasted `[sink.schema_registry] max_outage`. The status says what the
    /// pipeline waits for meanwhile.
    async fn wait_for_registry(
        &mut self,
        error: sluice_registry::RegistryError,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<(), PipelineError> {
        let name = self.name;
        let position = self.summary.position;
        let now = Instant::now();
        let limit = self.max_outage;
        let outage = self
            .outage
            .get_or_insert_with(|| Outage::begin(now, SystemTime::now(), limit));
        let (retry, pause) = match outage.after_failure(now) {
            Next::Retry { retry, pause } => (retry, pause),
            Next::GiveUp { waited } => {
                return Err(PipelineError::RegistryOutage {
                    pipeline: name.to_string(),
                    table: self.feed.table().to_string(),
                    position,
                    waited,
                    source: Box::new(error),
                });
            }
        };
        let (url, reason) = error
            .unavailability()
            .map(|(url, reason)| (url.to_string(), reason))
            .unwrap_or_default();
        self.metrics.count_registry_retry();
        self.metrics.record_waiting(Some(Waiting {
            waiting_for: WaitingFor::Registry,
            url,
            since_ms: epoch_ms(outage.since()),
            retries: retry,
            next_retry_ms: epoch_ms(SystemTime::now() + pause),
            gives_up_ms: epoch_ms(outage.gives_up_at()),
            reason,
        }));
        tracing::warn!(
            pipeline = name,
            %error,
            %position,
            retry,
            pause_seconds = pause.as_secs_f64(),
            waited_seconds = outage.lasted(now).as_secs(),
            max_outage_seconds = limit.as_secs(),
            "The schema registry gave no schema id; the pipeline waits for it and then redoes the work from the last committed position."
        );
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.changed() => {}
        }
        Ok(())
    }

    /// The sink, connected first if it is not.
    async fn delivery(&mut self) -> Result<&mut D, PipelineError> {
        if self.delivery.is_none() {
            self.delivery = Some(self.connect.connect().await?);
        }
        Ok(self.delivery.as_mut().expect("connected above"))
    }

    /// Delivers versions from the current position through `latest`; returns whether a
    /// shutdown was asked for (after committing the batch in hand). On error everything
    /// since the last commit is rolled back, so the caller may redo from
    /// `summary.position`.
    async fn process_range(
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
        self.progress.range(from, latest);
        if let Err(error) = self.restore_state().await {
            self.delivery = None;
            return Err(error);
        }
        let mut job = self.start_job(latest);
        let result = self.deliver_range(&mut job, latest, end, shutdown).await;
        if let Some(stages) = job.stop().await {
            self.stages = Some(stages);
        }
        if result.is_err() {
            if let Some(keyed) = &mut self.keyed {
                // A commit that failed may have gone through: the changelog says.
                keyed.restore_before_next_range();
            }
            self.uncommitted = None;
            if let Some(delivery) = &mut self.delivery {
                delivery.rollback().await;
            }
        }
        result
    }

    /// Brings a stateful pipeline's store up to its changelog when it must be: at start,
    /// and after an error that may have left a commit's outcome unknown.
    async fn restore_state(&mut self) -> Result<(), PipelineError> {
        let Some(topic) = self
            .keyed
            .as_ref()
            .filter(|keyed| keyed.needs_restore())
            .map(|keyed| keyed.topic().to_string())
        else {
            return Ok(());
        };
        let changelog = self.delivery().await?.changelog(&topic)?;
        let keyed = self.keyed.as_mut().expect("looked at above");
        keyed.restore(self.name, changelog, &self.metrics).await
    }

    /// Writes a stateful pipeline's checkpoint after the run's last commit.
    async fn checkpoint_state(&mut self) {
        let Some(topic) = self.keyed.as_ref().map(|keyed| keyed.topic().to_string()) else {
            return;
        };
        let changelog = match self.delivery().await.and_then(|d| Ok(d.changelog(&topic)?)) {
            Ok(changelog) => changelog,
            Err(error) => {
                tracing::warn!(pipeline = self.name, %error, "The state's checkpoint could not be written; the next start restores more of the changelog.");
                return;
            }
        };
        if let Some(keyed) = &self.keyed {
            keyed.checkpoint(self.name, changelog).await;
        }
    }

    fn start_job(&mut self, latest: u64) -> RangeJob {
        if let Some(keyed) = &self.keyed {
            // The job starts from the last commit: changes after it are redone.
            keyed.discard_pending();
        }
        let stages = self
            .stages
            .take()
            .expect("the stages are back from the last range job");
        let position = self.summary.position;
        let preceded = if self.fresh_start == Some(position) {
            Preceded::Nothing
        } else {
            Preceded::ByEarlierRows
        };
        RangeJob::start(
            self.feed.clone(),
            (position, preceded),
            latest,
            stages,
            self.builder.clone(),
            self.metrics.clone(),
            self.shadow.clone(),
        )
    }

    async fn deliver_range(
        &mut self,
        job: &mut RangeJob,
        latest: u64,
        end: Position,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<bool, PipelineError> {
        let from = self.summary.position;
        let (rows_before, records_before) = (self.summary.rows_in, self.summary.records_out);
        loop {
            if let Some(request) = pending_swap(&mut self.swaps) {
                // The work read and transformed ahead was the old module's: drop it, and
                // redo it with the new module from the boundary.
                if let Some(stages) = job.stop().await {
                    self.stages = Some(stages);
                }
                self.swap(request).await?;
                *job = self.start_job(latest);
            }
            let waited = Instant::now();
            let next = job.next().await;
            self.metrics.record_stage(Stage::Wait, waited.elapsed());
            let batch = match next {
                None => break,
                Some(Prepared::Failed(error)) => {
                    match error.earlier_work() {
                        EarlierWork::KeptUpTo(version) => {
                            self.commit(Position::at_version(version)).await?
                        }
                        EarlierWork::Kept => self.commit_uncommitted().await?,
                        EarlierWork::RolledBack => {}
                    }
                    return Err(error);
                }
                Some(Prepared::Batch(batch)) => batch,
            };
            self.deliver(batch).await?;
            let open = self.uncommitted.as_ref().expect("a batch was just sent");
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

    /// Sends a batch's records, after committing the open work when the batch starts a
    /// new version and versions are committed one by one.
    async fn deliver(&mut self, batch: PreparedBatch) -> Result<(), PipelineError> {
        if self.commits.per_version
            && let Some(open) = &self.uncommitted
            && open.end.version != batch.end.version
        {
            self.commit(open.end).await?;
        }
        let produced = batch.records.len() as u64;
        let mut records = batch.records;
        if let Some(keyed) = &self.keyed {
            records.extend(keyed.changelog_records(&batch.state));
        }
        let started = Instant::now();
        self.delivery().await?.send(records).await?;
        self.metrics.record_stage(Stage::Send, started.elapsed());
        let open = self.uncommitted.get_or_insert(Uncommitted {
            since: Instant::now(),
            rows: 0,
            records: 0,
            bytes: 0,
            failed: 0,
            end: batch.end,
        });
        open.rows += batch.rows;
        open.records += produced;
        open.bytes += batch.bytes;
        open.failed += batch.failed;
        open.end = batch.end;
        Ok(())
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
        if self.uncommitted.is_none() && self.summary.position == position && !self.start_unstored {
            return Ok(());
        }
        let stored = SourcePosition {
            table: self.feed.table().to_string(),
            position,
            module_digest: self.digest.clone(),
            starts_fresh: self.fresh_start == Some(position),
        };
        let started = Instant::now();
        self.delivery().await?.commit(&stored).await?;
        self.metrics.record_stage(Stage::Commit, started.elapsed());
        if let Some(keyed) = &self.keyed {
            keyed.committed(self.name, position, &self.metrics)?;
        }
        self.start_unstored = false;
        let done = self.uncommitted.take();
        let (rows, records, bytes) = done
            .as_ref()
            .map_or((0, 0, 0), |d| (d.rows, d.records, d.bytes));
        if let Some(done) = done {
            self.summary.rows_in += done.rows;
            self.summary.records_out += done.records;
            self.summary.rows_failed += done.failed;
        }
        if let Some(outage) = self.outage.take_if(|_| position != self.summary.position) {
            // Work past the failure committed: the registry gave its ids.
            self.metrics.record_waiting(None);
            tracing::info!(
                pipeline = self.name,
                waited_seconds = outage.lasted(Instant::now()).as_secs(),
                "The schema registry answers again; the pipeline goes on."
            );
        }
        self.summary.position = position;
        self.metrics.record_commit(rows, records, bytes, position);
        self.progress.committed(rows, position);
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
        let stages = self
            .stages
            .as_mut()
            .expect("no range job holds the stages during a swap");
        let from_digest = std::mem::replace(&mut self.digest, request.module.digest().to_string());
        // The first stage starts with the instance made for the swap; the others make
        // theirs when their next batch comes, outside the pause.
        let mut instance = Some(request.instance);
        for stage in stages.iter_mut() {
            stage.swap(request.module.clone(), instance.take());
        }
        let pause = started.elapsed();
        self.metrics.record_swap(pause);
        let report = SwapReport {
            from_digest,
            to_digest: self.digest.clone(),
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
}

#[cfg(test)]
mod tests;

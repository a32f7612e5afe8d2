//! Starting a run: the table, the module and the sink are made ready at the same time,
//! then the run's first position is found (the stored one, or where the config says).

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_sink::{SinkError, SourcePosition};
use sluice_source::{ChangeFeed, Position, SourceOptions};

use crate::config::{PipelineConfig, StartingVersion};
use crate::error::PipelineError;
use crate::keyed::StageState;
use crate::lookups::{LookupTables, PipelineLookups};
use crate::metrics::PipelineMetrics;
use crate::module::Module;
use crate::sink::Sink;
use crate::stage::{TransformStage, load_module};
use crate::work::blocking_step;

/// Where a run starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartFrom {
    /// After the stored position, or where the config says if there is none (as Spark
    /// does with its checkpoint).
    StoredPosition,
    /// Where the config says, ignoring the stored position.
    Configured,
}

/// What a run starts with.
pub(crate) struct Started<D> {
    pub feed: Arc<ChangeFeed>,
    /// One stage per `[transform] instances`.
    pub stages: Vec<TransformStage>,
    pub delivery: D,
    pub start: Position,
    /// Whether `start` came from the config and is not stored yet.
    pub resolved: bool,
    /// Whether nothing was delivered before `start` (a configured start, or a stored
    /// one marked fresh): its version's schema is not checked against earlier records.
    pub fresh: bool,
    /// How long each step took.
    pub took: StartupTimes,
}

/// How long each step of a start took: an operator's answer to "why did this pipeline
/// take long to start?" (a module compiled for the first time, a slow broker).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct StartupTimes {
    table: Duration,
    module: Duration,
    kafka: Duration,
    lookups: Duration,
    position: Duration,
}

impl fmt::Display for StartupTimes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "table {:.2} s, module {:.2} s, kafka {:.2} s, lookups {:.2} s, position {:.2} s",
            self.table.as_secs_f64(),
            self.module.as_secs_f64(),
            self.kafka.as_secs_f64(),
            self.lookups.as_secs_f64(),
            self.position.as_secs_f64()
        )
    }
}

/// Runs `step`, with how long it took.
async fn timed<T>(step: impl Future<Output = T>) -> (T, Duration) {
    let started = Instant::now();
    let value = step.await;
    (value, started.elapsed())
}

/// Both of a timed step's results, or its error.
fn split<T, E>((result, took): (Result<T, E>, Duration)) -> Result<(T, Duration), E> {
    result.map(|value| (value, took))
}

/// Opens the table, loads and starts the module, connects the sink and opens the lookup
/// tables, concurrently; then finds where to start.
pub(crate) async fn start<D: Sink>(
    config: &PipelineConfig,
    start_from: StartFrom,
    module: Option<Arc<dyn Module>>,
    metrics: Arc<PipelineMetrics>,
    keyed: Option<StageState>,
    tables: Arc<LookupTables>,
    connect: impl Future<Output = Result<D, SinkError>>,
) -> Result<Started<D>, PipelineError> {
    let options = SourceOptions {
        storage_metrics: metrics.storage.clone(),
        ..config.source_options()
    };
    let table = config.source.table.clone();
    let feed = async {
        blocking_step(move || ChangeFeed::open(&table, options))
            .await
            .map(Arc::new)
            .map_err(PipelineError::from)
    };
    let stage_config = config.clone();
    let stages = async {
        blocking_step(move || {
            let module: Arc<dyn Module> = match module {
                Some(module) => module,
                None => Arc::new(load_module(&stage_config)?),
            };
            (0..stage_config.transform.instances)
                .map(|_| {
                    TransformStage::start(
                        &stage_config,
                        module.clone(),
                        metrics.clone(),
                        keyed.clone(),
                    )
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(PipelineError::from)
        })
        .await
    };
    let connect = async { connect.await.map_err(PipelineError::from) };
    let lookup_config = config.clone();
    let lookups =
        async { blocking_step(move || PipelineLookups::open(&lookup_config, &tables)).await };
    let ((feed, table), (mut stages, module), (delivery, kafka), (lookups, lookups_took)) = tokio::try_join!(
        async { split(timed(feed).await) },
        async { split(timed(stages).await) },
        async { split(timed(connect).await) },
        async { split(timed(lookups).await) },
    )?;
    if let Some(lookups) = lookups.map(Arc::new) {
        for stage in &mut stages {
            stage.set_lookups(lookups.clone());
        }
    }
    let positioning = Instant::now();
    let stored = match start_from {
        StartFrom::StoredPosition => stored_position(config, &feed, &delivery).await?,
        StartFrom::Configured => None,
    };
    let (start, resolved, fresh) = match stored {
        Some(stored) => (stored.position, false, stored.starts_fresh),
        None => (configured_start(config, &feed).await?, true, true),
    };
    Ok(Started {
        feed,
        stages,
        delivery,
        start,
        resolved,
        fresh,
        took: StartupTimes {
            table,
            module,
            kafka,
            lookups: lookups_took,
            position: positioning.elapsed(),
        },
    })
}

/// The position stored by the last run, checked to belong to the configured table.
async fn stored_position(
    config: &PipelineConfig,
    feed: &Arc<ChangeFeed>,
    delivery: &impl Sink,
) -> Result<Option<SourcePosition>, PipelineError> {
    let Some(stored) = delivery.stored_position().await? else {
        return Ok(None);
    };
    if stored.table != feed.table() {
        return Err(PipelineError::OtherTable {
            pipeline: config.pipeline.name.clone(),
            stored: stored.table,
            configured: feed.table().to_string(),
        });
    }
    let position = stored.position;
    let latest = latest_version(feed).await?;
    if position.version > latest + 1 {
        return Err(PipelineError::PositionAhead {
            pipeline: config.pipeline.name.clone(),
            table: feed.table().to_string(),
            version: position.version,
            latest,
        });
    }
    tracing::info!(%position, module_digest = %stored.module_digest, "Resuming from the stored position.");
    Ok(Some(stored))
}

/// The table's latest version, read on the blocking pool.
pub(crate) async fn latest_version(feed: &Arc<ChangeFeed>) -> Result<u64, PipelineError> {
    let reader = feed.clone();
    Ok(blocking_step(move || reader.latest_version()).await?)
}

/// The versions of `config`'s table that commit times name: the first committed at
/// or after `from` and the last at or before `to`, as Spark's `startingTimestamp` and
/// `endingTimestamp` resolve them (in-commit timestamps where the table has them, file
/// modification times otherwise).
pub async fn versions_at_times(
    config: &PipelineConfig,
    from: Option<std::time::SystemTime>,
    to: Option<std::time::SystemTime>,
) -> Result<(Option<u64>, Option<u64>), PipelineError> {
    let millis = |time: std::time::SystemTime| {
        time.duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    };
    let (table, options) = (config.source.table.clone(), config.source_options());
    let resolved = blocking_step(move || {
        let feed = ChangeFeed::open(&table, options)?;
        let from = from
            .map(|time| feed.version_at_or_after(millis(time)))
            .transpose()?;
        let to = to
            .map(|time| feed.version_at_or_before(millis(time)))
            .transpose()?;
        Ok::<_, sluice_source::SourceError>((from, to))
    })
    .await?;
    Ok(resolved)
}

/// Where the config says a pipeline without a stored position starts.
pub(crate) async fn configured_start(
    config: &PipelineConfig,
    feed: &Arc<ChangeFeed>,
) -> Result<Position, PipelineError> {
    let source = &config.source;
    if let Some(time) = source.starting_timestamp {
        let millis = time
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let reader = feed.clone();
        let version = blocking_step(move || reader.version_at_or_after(millis)).await?;
        return Ok(Position::at_version(version));
    }
    let version = match (source.starting_version, source.snapshot) {
        // A snapshot is of the latest version unless a version is named, as Spark's
        // streaming read without a starting version.
        (None, true) | (Some(StartingVersion::Latest), _) => latest_version(feed).await?,
        (None, false) | (Some(StartingVersion::Earliest), _) => 0,
        (Some(StartingVersion::Version(v)), _) => v,
    };
    Ok(match (source.snapshot, source.starting_version) {
        (true, _) => Position::snapshot_at(version),
        (false, Some(StartingVersion::Latest)) => Position::at_version(version + 1),
        (false, _) => Position::at_version(version),
    })
}

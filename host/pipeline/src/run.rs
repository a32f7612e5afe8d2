//! The pipeline loop.

use std::sync::Arc;

use sluice_engine::{
    EngineConfig, OutputRecord, TransformEngine, TransformError, TransformInstance,
};
use sluice_sink::{KafkaSink, SinkRecord};
use sluice_source::{ChangeBatch, ChangeFeed, Position, SourceError, SourceOptions};
use tokio::sync::{mpsc, watch};

use crate::config::{PipelineConfig, StartingVersion};
use crate::error::PipelineError;
use crate::position_store::PositionStore;

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
    /// Records produced.
    pub records_out: u64,
    /// Where the pipeline stopped.
    pub position: Position,
}

/// Batches read ahead of the transform.
const READ_AHEAD: usize = 4;

/// Runs a pipeline until it fails, `shutdown` becomes true, or (in
/// [`RunMode::StopAtLatest`]) it has caught up.
pub async fn run(
    config: &PipelineConfig,
    mode: RunMode,
    mut shutdown: watch::Receiver<bool>,
) -> Result<RunSummary, PipelineError> {
    let name = config.pipeline.name.clone();
    let options = SourceOptions {
        batch_rows: config.source.batch_rows,
        storage_options: config.source.storage_options.clone().into_iter().collect(),
    };
    let table = config.source.table.clone();
    let feed = Arc::new(blocking(move || ChangeFeed::open(&table, options)).await?);
    let store = PositionStore::new(&config.pipeline.state_dir, &name, feed.table());

    let engine_config = EngineConfig {
        memory_limit_bytes: config.transform.memory_limit_mib * 1024 * 1024,
        batch_deadline: config.transform.batch_timeout,
    };
    let module_path = config.transform.module.clone();
    let params = config.transform_params();
    let (engine, mut instance) = blocking(move || {
        let engine = TransformEngine::new(engine_config)?;
        let module = engine.load(&module_path)?;
        let instance = module.instantiate(&params)?;
        Ok::<_, sluice_engine::EngineError>((engine, instance))
    })
    .await?;

    let sink = KafkaSink::connect(
        &config.kafka_properties(),
        &config.sink.topic,
        config.sink.connect_timeout,
    )
    .await?;

    let mut summary = RunSummary {
        position: start_position(config, &feed, &store).await?,
        ..RunSummary::default()
    };
    tracing::info!(pipeline = %name, table = feed.table(), position = %summary.position, "Pipeline started.");

    loop {
        if *shutdown.borrow() {
            break;
        }
        let reader = feed.clone();
        let latest = blocking(move || reader.latest_version()).await?;
        if summary.position.version <= latest {
            let stopped = process_range(
                &feed,
                latest,
                &mut instance,
                &sink,
                &store,
                &mut summary,
                &name,
                &mut shutdown,
            )
            .await?;
            if stopped {
                break;
            }
            continue;
        }
        if mode == RunMode::StopAtLatest {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(config.source.poll_interval) => {}
            _ = shutdown.changed() => {}
        }
    }
    drop(engine);
    tracing::info!(pipeline = %name, position = %summary.position, rows_in = summary.rows_in, records_out = summary.records_out, "Pipeline stopped.");
    Ok(summary)
}

async fn start_position(
    config: &PipelineConfig,
    feed: &Arc<ChangeFeed>,
    store: &PositionStore,
) -> Result<Position, PipelineError> {
    if let Some(stored) = store.load()? {
        tracing::info!(position = %stored, file = %store.path().display(), "Resuming from the stored position.");
        return Ok(stored);
    }
    Ok(match config.source.starting_version {
        StartingVersion::Earliest => Position::at_version(0),
        StartingVersion::Version(v) => Position::at_version(v),
        StartingVersion::Latest => {
            let reader = feed.clone();
            Position::at_version(blocking(move || reader.latest_version()).await? + 1)
        }
    })
}

/// Reads versions from the current position through `latest`; returns whether a
/// shutdown was asked for (after finishing the batch in hand).
#[allow(clippy::too_many_arguments)]
async fn process_range(
    feed: &Arc<ChangeFeed>,
    latest: u64,
    instance: &mut TransformInstance,
    sink: &KafkaSink,
    store: &PositionStore,
    summary: &mut RunSummary,
    pipeline: &str,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<bool, PipelineError> {
    let from = summary.position;
    let (tx, mut rx) = mpsc::channel::<Result<ChangeBatch, SourceError>>(READ_AHEAD);
    let reader = feed.clone();
    let read = tokio::task::spawn_blocking(move || {
        let batches = match reader.read(from, latest) {
            Ok(batches) => batches,
            Err(e) => {
                let _ = tx.blocking_send(Err(e));
                return;
            }
        };
        for batch in batches {
            if tx.blocking_send(batch).is_err() {
                return;
            }
        }
    });
    let (rows_before, records_before) = (summary.rows_in, summary.records_out);
    while let Some(batch) = rx.recv().await {
        let batch = batch?;
        let records = tokio::task::block_in_place(|| instance.transform(&batch.batch))
            .map_err(|source| transform_error(pipeline, feed.table(), &batch, source))?;
        let records: Vec<SinkRecord> = records.into_iter().map(sink_record).collect();
        sink.send_all(&records).await?;
        store.save(batch.end)?;
        summary.rows_in += batch.batch.num_rows() as u64;
        summary.records_out += records.len() as u64;
        summary.position = batch.end;
        if *shutdown.borrow() {
            return Ok(true);
        }
    }
    read.await.expect("the reader thread does not panic");
    summary.position = Position::at_version(latest + 1);
    store.save(summary.position)?;
    tracing::info!(
        pipeline,
        versions = %format!("{}..={latest}", from.version),
        rows_in = summary.rows_in - rows_before,
        records_out = summary.records_out - records_before,
        "Delivered the changes of a version range."
    );
    Ok(false)
}

fn transform_error(
    pipeline: &str,
    table: &str,
    batch: &ChangeBatch,
    source: TransformError,
) -> PipelineError {
    let first_row = batch.end.row_offset - batch.batch.num_rows() as u64;
    let row = match &source {
        TransformError::Row { row, .. } => u64::from(*row),
        _ => 0,
    };
    PipelineError::Transform {
        pipeline: pipeline.to_string(),
        table: table.to_string(),
        version: batch.end.version,
        row_in_version: first_row + row,
        source,
    }
}

fn sink_record(record: OutputRecord) -> SinkRecord {
    SinkRecord {
        topic: record.topic,
        key: record.key,
        value: record.value,
        headers: record.headers,
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

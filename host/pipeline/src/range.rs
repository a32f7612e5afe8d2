//! Reading and transforming a range of the change feed ahead of delivery: a reader and
//! a transformer, each its own task, joined to the loop by queues bounded in bytes. The
//! loop sends and commits one batch while the next ones are read and transformed.

use std::sync::Arc;

use sluice_sink::SinkRecord;
use sluice_source::{ChangeBatch, ChangeFeed, Position, SourceError};
use tokio::task::JoinHandle;

use crate::error::PipelineError;
use crate::metrics::{PipelineMetrics, Stage};
use crate::queue::{ByteReceiver, ByteSender, byte_queue};
use crate::records::{MadeBy, RecordBuilder};
use crate::stage::TransformStage;
use crate::work::blocking_step;

/// Bytes of change batches read ahead of the transform.
const READ_AHEAD_BYTES: usize = 64 * 1024 * 1024;

/// Bytes of records transformed ahead of delivery.
const TRANSFORM_AHEAD_BYTES: usize = 64 * 1024 * 1024;

/// A batch's records, ready for the sink.
pub(crate) struct PreparedBatch {
    /// The position after the batch.
    pub end: Position,
    /// Change rows in the batch.
    pub rows: u64,
    /// The records to send.
    pub records: Vec<SinkRecord>,
    /// Bytes of their keys and values.
    pub bytes: u64,
    /// Rows the module failed on that the error policy let through.
    pub failed: u64,
}

/// What the transformer hands the loop.
pub(crate) enum Prepared {
    /// The next batch's records.
    Batch(PreparedBatch),
    /// The range could not be read or the module failed under the `fail` policy: the
    /// batches before are good, nothing after comes.
    Failed(PipelineError),
}

type Batches = Box<dyn Iterator<Item = Result<ChangeBatch, SourceError>> + Send>;

/// A range being read and transformed.
pub(crate) struct RangeJob {
    prepared: Option<ByteReceiver<Prepared>>,
    transformer: Option<JoinHandle<TransformStage>>,
}

impl RangeJob {
    /// Starts reading `feed` from `from` (through `latest`, or to the snapshot's end) and
    /// transforming with `stage`, which [`RangeJob::stop`] gives back.
    pub(crate) fn start(
        feed: Arc<ChangeFeed>,
        from: Position,
        latest: u64,
        stage: TransformStage,
        builder: Arc<RecordBuilder>,
        metrics: Arc<PipelineMetrics>,
    ) -> RangeJob {
        let (batches_in, batches_out) = byte_queue(READ_AHEAD_BYTES);
        let (prepared_in, prepared_out) = byte_queue(TRANSFORM_AHEAD_BYTES);
        tokio::spawn(read(feed, from, latest, batches_in, metrics.clone()));
        let transformer =
            tokio::spawn(transform(stage, builder, batches_out, prepared_in, metrics));
        RangeJob {
            prepared: Some(prepared_out),
            transformer: Some(transformer),
        }
    }

    /// The next batch's records; `None` when the range is done.
    pub(crate) async fn next(&mut self) -> Option<Prepared> {
        self.prepared.as_mut()?.recv().await
    }

    /// Stops reading and transforming (work not yet taken is dropped) and gives the
    /// stage back; `None` if it was given back before.
    pub(crate) async fn stop(&mut self) -> Option<TransformStage> {
        self.prepared = None;
        let transformer = self.transformer.take()?;
        match transformer.await {
            Ok(stage) => Some(stage),
            Err(error) => std::panic::resume_unwind(error.into_panic()),
        }
    }
}

/// Reads the range into `out`, one batch per blocking step.
async fn read(
    feed: Arc<ChangeFeed>,
    from: Position,
    latest: u64,
    out: ByteSender<Result<ChangeBatch, SourceError>>,
    metrics: Arc<PipelineMetrics>,
) {
    let opened = blocking_step(move || -> Result<Batches, SourceError> {
        Ok(if from.snapshot {
            Box::new(feed.read_snapshot(from)?)
        } else {
            Box::new(feed.read(from, latest)?)
        })
    })
    .await;
    let mut batches = match opened {
        Ok(batches) => batches,
        Err(error) => {
            let _ = out.send(Err(error), 0).await;
            return;
        }
    };
    loop {
        let (rest, next) = blocking_step(move || {
            let started = std::time::Instant::now();
            let next = batches.next();
            (batches, (next, started.elapsed()))
        })
        .await;
        let (next, took) = next;
        metrics.record_stage(Stage::Read, took);
        batches = rest;
        let Some(next) = next else { return };
        let (bytes, failed) = match &next {
            Ok(batch) => (batch.batch.get_array_memory_size(), false),
            Err(_) => (0, true),
        };
        if out.send(next, bytes).await.is_err() || failed {
            return;
        }
    }
}

/// Transforms batches from `batches` into records for `out`, one batch per blocking
/// step, until the range ends, fails, or the loop stops taking them.
async fn transform(
    mut stage: TransformStage,
    builder: Arc<RecordBuilder>,
    mut batches: ByteReceiver<Result<ChangeBatch, SourceError>>,
    out: ByteSender<Prepared>,
    metrics: Arc<PipelineMetrics>,
) -> TransformStage {
    loop {
        let batch = tokio::select! {
            batch = batches.recv() => batch,
            () = out.closed() => None,
        };
        let batch = match batch {
            None => return stage,
            Some(Ok(batch)) => batch,
            Some(Err(error)) => {
                let _ = out.send(Prepared::Failed(error.into()), 0).await;
                return stage;
            }
        };
        let builder = builder.clone();
        let (back, prepared, bytes, took) = blocking_step(move || {
            let started = std::time::Instant::now();
            let (prepared, bytes) = prepare(&mut stage, &builder, &batch);
            (stage, prepared, bytes, started.elapsed())
        })
        .await;
        stage = back;
        metrics.record_stage(Stage::Transform, took);
        let failed = matches!(prepared, Prepared::Failed(_));
        if out.send(prepared, bytes).await.is_err() || failed {
            return stage;
        }
    }
}

/// One batch through the stage and into records, with the bytes they hold.
fn prepare(
    stage: &mut TransformStage,
    builder: &RecordBuilder,
    batch: &ChangeBatch,
) -> (Prepared, usize) {
    match stage.apply(&batch.batch) {
        Ok(output) => {
            let made_by = MadeBy {
                name: stage.name(),
                digest: stage.digest(),
            };
            let built = builder.build(batch, output, made_by);
            let bytes = built.bytes as usize;
            let prepared = Prepared::Batch(PreparedBatch {
                end: batch.end,
                rows: batch.batch.num_rows() as u64,
                records: built.records,
                bytes: built.bytes,
                failed: built.failed,
            });
            (prepared, bytes)
        }
        Err((row, source)) => (
            Prepared::Failed(builder.transform_error(batch, row, source)),
            0,
        ),
    }
}

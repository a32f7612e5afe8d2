//! Reading and transforming a range of the change feed ahead of delivery: a reader and
//! a transformer, each its own task, joined to the loop by queues bounded in bytes. The
//! loop sends and commits one batch while the next ones are read and transformed. With
//! several stages (`[transform] instances`), batches are transformed at the same time
//! and handed on in table order.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_encoding::{Framed, SNAPSHOT_METADATA};
use sluice_engine::StateChanges;
use sluice_sink::SinkRecord;
use sluice_source::{ChangeBatch, ChangeFeed, Position, Preceded, SourceError};
use tokio::task::JoinHandle;

use crate::error::PipelineError;
use crate::metrics::{PipelineMetrics, Stage};
use crate::queue::{ByteReceiver, ByteSender, byte_queue};
use crate::records::{MadeBy, RecordBuilder};
use crate::shadow::{LiveBatch, LiveKeyed, Shadow, ShadowSlot};
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
    /// Records whose keys or values wait for a schema id (the module's records come
    /// first in `records`, at the indexes the helpers gave them).
    pub framed: Vec<Framed>,
    /// What the module changed in the pipeline's state, committed with the records
    /// (shared with the pipeline's pending state).
    pub state: Arc<StateChanges>,
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
    transformer: Option<JoinHandle<Vec<TransformStage>>>,
}

impl RangeJob {
    /// Starts reading `feed` from `from` (through `latest`, or to the snapshot's end),
    /// after what `from` is preceded by, and transforming with `stages`, which
    /// [`RangeJob::stop`] gives back; each transformed batch goes to the shadow in
    /// `shadow` too, while one runs.
    pub(crate) fn start(
        feed: Arc<ChangeFeed>,
        from: (Position, Preceded),
        latest: u64,
        stages: Vec<TransformStage>,
        builder: Arc<RecordBuilder>,
        metrics: Arc<PipelineMetrics>,
        shadow: Arc<ShadowSlot>,
    ) -> RangeJob {
        let (batches_in, batches_out) = byte_queue(READ_AHEAD_BYTES);
        let (prepared_in, prepared_out) = byte_queue(TRANSFORM_AHEAD_BYTES);
        tokio::spawn(read(feed, from, latest, batches_in, metrics.clone()));
        let transformer = tokio::spawn(transform(
            stages,
            builder,
            batches_out,
            prepared_in,
            metrics,
            shadow,
        ));
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
    /// stages back; `None` if they were given back before.
    pub(crate) async fn stop(&mut self) -> Option<Vec<TransformStage>> {
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
    (from, preceded): (Position, Preceded),
    latest: u64,
    out: ByteSender<Result<ChangeBatch, SourceError>>,
    metrics: Arc<PipelineMetrics>,
) {
    let opened = blocking_step(move || -> Result<Batches, SourceError> {
        Ok(if from.snapshot {
            Box::new(
                feed.read_snapshot(from)?
                    .map(|batch| batch.map(marked_snapshot)),
            )
        } else {
            Box::new(feed.read(from, latest, preceded)?)
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
            let started = Instant::now();
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

/// Marks a batch of an initial snapshot in its schema's metadata: the helpers write
/// its rows as reads (Debezium's `r`) rather than inserts.
fn marked_snapshot(mut batch: ChangeBatch) -> ChangeBatch {
    let mut schema = batch.batch.schema().as_ref().clone();
    schema
        .metadata
        .insert(SNAPSHOT_METADATA.to_string(), "true".to_string());
    // Only metadata changes, which cannot fail; the batch is kept as it was if it did.
    if let Ok(marked) = batch.batch.clone().with_schema(Arc::new(schema)) {
        batch.batch = marked;
    }
    batch
}

/// A batch being transformed on one stage: the stage comes back with the batch's
/// records, the bytes they hold, the time it took and, while a shadow runs, what the
/// shadow compares.
type Transforming = JoinHandle<(
    Option<TransformStage>,
    Prepared,
    usize,
    Duration,
    Option<LiveBatch>,
)>;

/// Transforms batches from `batches` into records for `out`, each batch one blocking
/// step on a free stage, until the range ends, fails, or the loop stops taking them.
/// Results go out in the order the batches came in.
async fn transform(
    mut free: Vec<TransformStage>,
    builder: Arc<RecordBuilder>,
    mut batches: ByteReceiver<Result<ChangeBatch, SourceError>>,
    out: ByteSender<Prepared>,
    metrics: Arc<PipelineMetrics>,
    shadow: Arc<ShadowSlot>,
) -> Vec<TransformStage> {
    let mut running: VecDeque<Transforming> = VecDeque::new();
    let mut reading = true;
    loop {
        if running.is_empty() && !reading {
            return free;
        }
        tokio::select! {
            // Oldest first: records leave in table order.
            biased;
            done = async { running.front_mut().expect("a batch is running").await },
                if !running.is_empty() =>
            {
                running.pop_front();
                let (stage, prepared, bytes, took, live) = match done {
                    Ok(done) => done,
                    Err(error) => std::panic::resume_unwind(error.into_panic()),
                };
                free.extend(stage);
                metrics.record_stage(Stage::Transform, took);
                // In table order, so the shadow knows a batch redone after an abort.
                if let (Some(live), Some(shadow)) = (live, shadow.running()) {
                    shadow.offer(live);
                }
                // Schema ids in batch order: a new schema version is registered after
                // the batches written with the one before it.
                let prepared = match prepared {
                    Prepared::Batch(mut batch) => {
                        let framed = std::mem::take(&mut batch.framed);
                        let records = std::mem::take(&mut batch.records);
                        match builder.frame(records, framed, batch.end.version).await {
                            Ok(records) => Prepared::Batch(PreparedBatch { records, ..batch }),
                            Err(error) => Prepared::Failed(error),
                        }
                    }
                    failed => failed,
                };
                let failed = matches!(prepared, Prepared::Failed(_));
                if out.send(prepared, bytes).await.is_err() || failed {
                    break;
                }
            }
            batch = batches.recv(), if reading && !free.is_empty() => match batch {
                None => reading = false,
                Some(Ok(batch)) => {
                    let mut stage = free.pop().expect("a stage is free");
                    let builder = builder.clone();
                    let shadowed = shadow.running();
                    running.push_back(tokio::spawn(blocking_step(move || {
                        let started = Instant::now();
                        let (prepared, bytes, live) =
                            prepare(&mut stage, &builder, batch, shadowed.as_deref());
                        (Some(stage), prepared, bytes, started.elapsed(), live)
                    })));
                }
                Some(Err(error)) => {
                    // After the batches before it, like any result.
                    let failed = Prepared::Failed(error.into());
                    running.push_back(tokio::spawn(async move {
                        (None, failed, 0, Duration::ZERO, None)
                    }));
                    reading = false;
                }
            },
            () = out.closed() => break,
        }
    }
    // Stopped early: the stages still running come back before the job ends.
    for transforming in running {
        match transforming.await {
            Ok((stage, ..)) => free.extend(stage),
            Err(error) => std::panic::resume_unwind(error.into_panic()),
        }
    }
    free
}

/// One batch through the stage and into records, with the bytes they hold and, when
/// `shadowed`, a copy of the module's work for the shadow to compare (and the state it
/// read, frozen, when the shadow asks for it).
fn prepare(
    stage: &mut TransformStage,
    builder: &RecordBuilder,
    batch: ChangeBatch,
    shadowed: Option<&Shadow>,
) -> (Prepared, usize, Option<LiveBatch>) {
    let lookups = match stage.lookups().map(|l| l.for_batch(&batch)) {
        None => None,
        Some(Ok(view)) => Some(view),
        Some(Err(error)) => return (Prepared::Failed(error), 0, None),
    };
    let started = Instant::now();
    let applied = stage.apply(&batch.batch, lookups.clone());
    let took = started.elapsed();
    match applied {
        Ok(mut output) => {
            let made_by = MadeBy {
                name: stage.name(),
                digest: stage.digest(),
            };
            let framed = std::mem::take(&mut output.framed);
            if let Err(refused) = builder.refuse_unframed(&batch, &output, &framed) {
                return (Prepared::Failed(refused), 0, None);
            }
            let state = Arc::new(std::mem::take(&mut output.state));
            let before = match (stage.keyed(), shadowed) {
                (Some(keyed), Some(shadow)) if shadow.wants_state() => {
                    keyed.state.freeze().map_err(|error| {
                        tracing::warn!(pipeline = stage.name(), %error, "The state could not be frozen for a shadow deploy's copy; the next batch tries again.");
                    }).ok()
                }
                _ => None,
            };
            if let Some(keyed) = stage.keyed() {
                // The next batches read these changes before they are committed.
                keyed.state.push(batch.end, state.clone());
            }
            let copied = shadowed.map(|_| {
                let failed = output
                    .failed
                    .iter()
                    .map(|f| (f.row, f.error.clone()))
                    .collect();
                let keyed = stage.keyed().map(|_| LiveKeyed {
                    before,
                    changes: state.clone(),
                });
                (output.records.clone(), failed, stage.memory_peak(), keyed)
            });
            let built = builder.build(&batch, output, made_by);
            let bytes = built.bytes as usize;
            let prepared = Prepared::Batch(PreparedBatch {
                end: batch.end,
                rows: batch.batch.num_rows() as u64,
                records: built.records,
                bytes: built.bytes,
                failed: built.failed,
                framed,
                state,
            });
            let live = copied.map(|(records, failed, memory_peak, keyed)| LiveBatch {
                batch,
                records,
                failed,
                took,
                memory_peak,
                keyed,
                lookups,
            });
            (prepared, bytes, live)
        }
        Err((row, source)) => (
            Prepared::Failed(builder.transform_error(&batch, row, source)),
            0,
            None,
        ),
    }
}

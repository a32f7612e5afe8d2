//! Shadow deploys: a candidate module runs beside the live one on the batches the live
//! one transforms, and what the two make is compared record by record; the candidate's
//! records are never produced.
//!
//! The live pipeline never waits for the candidate: the transformer hands each batch
//! it finished (with the live records) to the shadow's queue without waiting, and a
//! full queue skips the batch (counted). The candidate runs on its own instance under
//! the pipeline's budgets, on its own task, so its traps, deadlines and failures are
//! its own; after [`MAX_FAILED_IN_A_ROW`] failed batches in a row it is stopped.

mod compare;
mod report;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use sluice_engine::OutputRecord;
use sluice_source::ChangeBatch;
use tokio::sync::{Notify, mpsc};

pub use report::{
    CandidateError, Difference, DifferenceKind, ModuleCost, RecordCounts, RecordView,
    RejectionCounts, ShadowLimits, ShadowPhase, ShadowReport,
};

use crate::config::PipelineConfig;
use crate::metrics::PipelineMetrics;
use crate::module::{Instance, Module};
use crate::stage::TransformStage;
use crate::work::blocking_step;
use compare::{BatchPlace, Side, compare_batch, count_missing};

/// Batches the live module finished that wait for the candidate; past that the
/// shadow skips batches rather than hold the live pipeline back.
const QUEUED_BATCHES: usize = 16;

/// Failed batches in a row after which a candidate is stopped: a module that fails
/// every batch has shown what it would do, and would only burn the tenant's CPU.
pub const MAX_FAILED_IN_A_ROW: u32 = 3;

/// The candidate's errors a report keeps.
const KEPT_ERRORS: usize = 5;

/// A pipeline's place for a shadow deploy, shared by the pipeline's runs and whoever
/// starts, reads and stops the shadow.
#[derive(Default)]
pub struct ShadowSlot {
    shadow: Mutex<Option<Arc<Shadow>>>,
}

impl ShadowSlot {
    /// Puts `shadow` in the slot; one there before is stopped.
    pub fn install(&self, shadow: Arc<Shadow>) {
        let replaced = self.lock().replace(shadow);
        if let Some(replaced) = replaced {
            replaced.stop("replaced by another shadow deploy");
        }
    }

    /// The shadow in the slot, running or done.
    pub fn current(&self) -> Option<Arc<Shadow>> {
        self.lock().clone()
    }

    /// Stops the shadow in the slot (with `reason`) and empties the slot.
    pub fn take(&self, reason: &str) -> Option<Arc<Shadow>> {
        let taken = self.lock().take();
        if let Some(shadow) = &taken {
            shadow.stop(reason);
        }
        taken
    }

    /// The shadow, if one is running.
    pub(crate) fn running(&self) -> Option<Arc<Shadow>> {
        self.lock().clone().filter(|shadow| shadow.is_running())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Arc<Shadow>>> {
        self.shadow.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What the live module made of a batch, handed to the shadow.
pub(crate) struct LiveBatch {
    pub batch: ChangeBatch,
    pub records: Vec<OutputRecord>,
    /// Rows it failed, with why.
    pub failed: Vec<(u32, String)>,
    pub took: Duration,
    pub memory_peak: u64,
}

/// A candidate module running in the shadow of a pipeline's live module.
pub struct Shadow {
    report: Mutex<ShadowReport>,
    batches: mpsc::Sender<LiveBatch>,
    stopping: Notify,
}

impl Shadow {
    /// Starts `module` (with `instance`, initialised with the pipeline's parameters) in
    /// the shadow of `config`'s pipeline, whose live module is `live_digest`. It
    /// compares nothing until it is installed in the pipeline's [`ShadowSlot`]. Needs a
    /// tokio runtime.
    pub fn start(
        config: &PipelineConfig,
        live_digest: &str,
        module: Arc<dyn Module>,
        instance: Box<dyn Instance>,
        limits: ShadowLimits,
    ) -> Arc<Shadow> {
        let started_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let report = ShadowReport::new(
            module.digest(),
            module.name(),
            live_digest,
            limits,
            started_ms,
        );
        // Its own counters: the candidate's batches are not the pipeline's.
        let stage = TransformStage::with_instance(
            config,
            module,
            instance,
            Arc::new(PipelineMetrics::default()),
        );
        let (batches, queued) = mpsc::channel(QUEUED_BATCHES);
        let shadow = Arc::new(Shadow {
            report: Mutex::new(report),
            batches,
            stopping: Notify::new(),
        });
        let deadline = Instant::now() + Duration::from_secs(limits.seconds);
        tokio::spawn(compare_batches(
            shadow.clone(),
            stage,
            queued,
            config.sink.topic.clone(),
            deadline,
        ));
        shadow
    }

    /// What the shadow found so far.
    pub fn report(&self) -> ShadowReport {
        self.lock().clone()
    }

    /// Whether it still compares batches.
    pub fn is_running(&self) -> bool {
        self.lock().phase == ShadowPhase::Running
    }

    /// Stops comparing, saying why; a shadow already done keeps its end.
    pub fn stop(&self, reason: &str) {
        self.end(ShadowPhase::Stopped, reason);
    }

    /// Hands the shadow a batch the live module finished, unless the candidate is too
    /// far behind (then the batch is skipped, and counted).
    pub(crate) fn offer(&self, live: LiveBatch) {
        let end = live.batch.end;
        let mut report = self.lock();
        report.live_through = report.live_through.max(Some(end));
        if let Err(mpsc::error::TrySendError::Full(_)) = self.batches.try_send(live) {
            report.skipped_batches += 1;
        }
    }

    fn end(&self, phase: ShadowPhase, reason: &str) {
        {
            let mut report = self.lock();
            if report.phase != ShadowPhase::Running {
                return;
            }
            report.phase = phase;
            report.reason = Some(reason.to_string());
        }
        tracing::info!(
            candidate = self.lock().candidate,
            reason,
            "A shadow deploy ended."
        );
        self.stopping.notify_one();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ShadowReport> {
        self.report.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The shadow's task: runs the candidate on each batch handed to it and adds the
/// comparison to the report, until a limit, a stop, or too many failures.
async fn compare_batches(
    shadow: Arc<Shadow>,
    mut stage: TransformStage,
    mut queued: mpsc::Receiver<LiveBatch>,
    default_topic: String,
    deadline: Instant,
) {
    let mut failed_in_a_row = 0;
    loop {
        let live = tokio::select! {
            live = queued.recv() => live,
            () = tokio::time::sleep_until(deadline.into()) => {
                shadow.end(ShadowPhase::Finished, "it ran for its time limit");
                return;
            }
            () = shadow.stopping.notified() => return,
        };
        let Some(live) = live else { return };
        if !shadow.is_running() {
            return;
        }
        // A batch redone after an abort or a swap was compared the first time.
        if shadow
            .lock()
            .through
            .is_some_and(|through| live.batch.end <= through)
        {
            continue;
        }
        let (back, (result, took, memory_peak, live)) = blocking_step(move || {
            let started = Instant::now();
            let result = stage.apply(&live.batch.batch);
            let took = started.elapsed();
            let memory_peak = stage.memory_peak();
            (stage, (result, took, memory_peak, live))
        })
        .await;
        stage = back;
        let batch = &live.batch;
        let place = BatchPlace {
            version: batch.end.version,
            first_row: batch.end.row_offset - batch.batch.num_rows() as u64,
            default_topic: &default_topic,
        };
        let failure = {
            let mut report = shadow.lock();
            report.batches += 1;
            report.rows += batch.batch.num_rows() as u64;
            report.through = Some(batch.end);
            add_cost(
                &mut report.live_cost,
                &live.records,
                live.took,
                live.memory_peak,
            );
            let failure = match result {
                Ok(output) => {
                    let failed: Vec<(u32, String)> = output
                        .failed
                        .iter()
                        .map(|f| (f.row, f.error.clone()))
                        .collect();
                    add_cost(
                        &mut report.candidate_cost,
                        &output.records,
                        took,
                        memory_peak,
                    );
                    compare_batch(
                        place,
                        Side {
                            records: &live.records,
                            failed: &live.failed,
                        },
                        Side {
                            records: &output.records,
                            failed: &failed,
                        },
                        &mut report,
                    );
                    // Under the skip and dead-letter policies a failed batch comes
                    // back as every row failed with kind `batch` or `trap`.
                    output
                        .failed
                        .iter()
                        .find(|f| f.kind != "row")
                        .map(|f| f.error.clone())
                }
                Err((_, error)) => {
                    report.candidate_cost.transform_ms += took.as_secs_f64() * 1000.0;
                    count_missing(place, &live.records, &mut report);
                    Some(error.to_string())
                }
            };
            if let Some(error) = &failure {
                report.failed_batches += 1;
                report.errors.push(CandidateError {
                    position: batch.end,
                    error: error.clone(),
                });
                if report.errors.len() > KEPT_ERRORS {
                    report.errors.remove(0);
                }
            }
            failure
        };
        match failure {
            Some(error) => {
                failed_in_a_row += 1;
                if failed_in_a_row >= MAX_FAILED_IN_A_ROW {
                    shadow.stop(&format!(
                        "the candidate failed {failed_in_a_row} batches in a row, the last with: {error}"
                    ));
                    return;
                }
            }
            None => failed_in_a_row = 0,
        }
        let reached = limit_reached(&shadow.lock());
        if let Some(reason) = reached {
            shadow.end(ShadowPhase::Finished, reason);
            return;
        }
    }
}

fn add_cost(cost: &mut ModuleCost, records: &[OutputRecord], took: Duration, memory: u64) {
    cost.transform_ms += took.as_secs_f64() * 1000.0;
    cost.records += records.len() as u64;
    cost.output_bytes += records
        .iter()
        .map(|r| (r.key.as_ref().map_or(0, Vec::len) + r.value.as_ref().map_or(0, Vec::len)) as u64)
        .sum::<u64>();
    cost.memory_peak_bytes = cost.memory_peak_bytes.max(memory);
}

/// The batch or row limit the report reached, if any.
fn limit_reached(report: &ShadowReport) -> Option<&'static str> {
    if report.limits.batches.is_some_and(|b| report.batches >= b) {
        return Some("it compared the batches it was asked to");
    }
    if report.limits.rows.is_some_and(|r| report.rows >= r) {
        return Some("it compared the change rows it was asked to");
    }
    None
}

//! Shadow deploys: a candidate module runs beside the live one on the batches the live
//! one transforms, and what the two make is compared record by record; the candidate's
//! records are never produced.
//!
//! The live pipeline never waits for the candidate: the transformer hands each batch
//! it finished (with the live records) to the shadow's queue without waiting, and a
//! full queue skips the batch (counted). The candidate runs on its own instance under
//! the pipeline's budgets, on its own task, so its traps, deadlines and failures are
//! its own; after [`MAX_FAILED_IN_A_ROW`] failed batches in a row it is stopped.
//!
//! A stateful candidate works on a copy of the live state as the first batch after the
//! shadow started read it (frozen cheaply there, copied on the shadow's task); the live
//! state is only read.
//! A batch skipped while the candidate is behind brings its live state changes to the
//! copy, so the candidate reads on from where the live module was.

mod compare;
mod report;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use sluice_engine::{LookupView, OutputRecord, StateChanges, StateLimits, TransformError};
use sluice_source::{ChangeBatch, Position};
use sluice_state::{FrozenState, PipelineState, StateStore};
use tokio::sync::{Notify, mpsc};

pub use report::{
    CandidateError, Difference, DifferenceKind, ModuleCost, RecordCounts, RecordView,
    RejectionCounts, ShadowLimits, ShadowPhase, ShadowReport, ShadowState,
};

use crate::config::PipelineConfig;
use crate::keyed::{StageState, state_limits};
use crate::metrics::PipelineMetrics;
use crate::module::{Instance, Module};
use crate::stage::TransformStage;
use crate::stage_output::StageOutput;
use crate::work::blocking_step;
use compare::{BatchPlace, Side, compare_batch, count_missing};

/// Batches the live module finished that wait for the candidate; past that the
/// shadow skips batches rather than hold the live pipeline back.
const QUEUED_BATCHES: usize = 16;

/// Failed batches in a row after which a candidate is stopped: a module that fails
/// every batch has shown what it would do, and would only burn the tenant's CPU.
pub const MAX_FAILED_IN_A_ROW: u32 = 3;

/// Skipped batches whose state changes a stateful candidate may wait to apply; one
/// further behind is stopped, as it would hold ever more of the live changes.
const MAX_SKIPPED_CHANGES: usize = 256;

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
    /// For a pipeline that keeps state: that state, and the batch's changes to it.
    pub keyed: Option<LiveKeyed>,
    /// The lookup tables as the live module read them, which the candidate reads too.
    pub lookups: Option<Arc<dyn LookupView>>,
}

/// A stateful pipeline's live batch: its state changes, and the state it read when the
/// shadow asked for a copy.
pub(crate) struct LiveKeyed {
    /// The state before the batch, frozen for the candidate to copy.
    pub before: Option<FrozenState>,
    /// What the batch changed.
    pub changes: Arc<StateChanges>,
}

/// A candidate module running in the shadow of a pipeline's live module.
pub struct Shadow {
    report: Mutex<ShadowReport>,
    batches: mpsc::Sender<LiveBatch>,
    /// The state changes of skipped batches, for a stateful candidate to apply.
    skipped_changes: Mutex<Vec<(Position, Arc<StateChanges>)>>,
    /// The most memory the copy of a stateful pipeline's state takes, in MiB.
    state_copy_mib: usize,
    /// Whether the candidate waits for a frozen live state to copy.
    wants_state: std::sync::atomic::AtomicBool,
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
            skipped_changes: Mutex::default(),
            state_copy_mib: config.state.as_ref().map_or(0, |s| s.max_mib as usize),
            wants_state: config.state.is_some().into(),
            stopping: Notify::new(),
        });
        let deadline = Instant::now() + Duration::from_secs(limits.seconds);
        tokio::spawn(compare_batches(
            shadow.clone(),
            Candidate {
                stage,
                state_limits: state_limits(config),
                state: None,
            },
            queued,
            config.sink.topic.clone(),
            deadline,
        ));
        shadow
    }

    /// The most memory its copy of the pipeline's state may take, in MiB (0 for a
    /// pipeline without state).
    pub fn state_copy_mib(&self) -> usize {
        self.state_copy_mib
    }

    /// Whether the next live batch should freeze the state it reads for the candidate.
    pub(crate) fn wants_state(&self) -> bool {
        self.wants_state.load(std::sync::atomic::Ordering::Relaxed)
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
        let too_far_behind = {
            let mut report = self.lock();
            report.live_through = report.live_through.max(Some(end));
            let Err(mpsc::error::TrySendError::Full(live)) = self.batches.try_send(live) else {
                return;
            };
            report.skipped_batches += 1;
            let Some(keyed) = live.keyed else { return };
            let mut skipped = self.skipped();
            skipped.push((end, keyed.changes));
            skipped.len() > MAX_SKIPPED_CHANGES
        };
        if too_far_behind {
            self.stop(&format!(
                "the candidate fell {MAX_SKIPPED_CHANGES} batches behind the live module, whose state changes it would have to hold"
            ));
        }
    }

    fn skipped(&self) -> std::sync::MutexGuard<'_, Vec<(Position, Arc<StateChanges>)>> {
        self.skipped_changes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the changes of skipped batches that came before the batch ending at `end`.
    fn skipped_before(&self, end: Position) -> Vec<(Position, Arc<StateChanges>)> {
        let mut skipped = self.skipped();
        let (before, rest) = std::mem::take(&mut *skipped)
            .into_iter()
            .partition(|(at, _)| *at < end);
        *skipped = rest;
        before
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

/// What the candidate's stage made of a batch, or the row it failed on and why.
type Transformed = Result<StageOutput, (u32, TransformError)>;

/// The candidate's side of a shadow: its stage and, for a stateful pipeline, its copy
/// of the state once made.
struct Candidate {
    stage: TransformStage,
    state_limits: Option<StateLimits>,
    /// A stateful candidate's own state, copied from the live one.
    state: Option<Arc<PipelineState>>,
}

impl Candidate {
    /// Whether the candidate can run `live`: a stateless one always; a stateful one once
    /// it has its copy of the live state, made from the first batch that brings one.
    async fn ready_for(&mut self, live: &mut LiveBatch, shadow: &Shadow) -> Result<bool, String> {
        let Some(limits) = self.state_limits else {
            return Ok(true);
        };
        if self.state.is_some() {
            return Ok(true);
        }
        let Some(frozen) = live.keyed.as_mut().and_then(|keyed| keyed.before.take()) else {
            return Ok(false);
        };
        let (copied, took) = blocking_step(move || {
            let started = Instant::now();
            (frozen.copy(), started.elapsed())
        })
        .await;
        let store =
            copied.map_err(|error| format!("the live state could not be copied: {error}"))?;
        shadow
            .wants_state
            .store(false, std::sync::atomic::Ordering::Relaxed);
        // Batches skipped before this one are in the copy already.
        drop(shadow.skipped_before(live.batch.end));
        let usage = store.usage();
        let state = Arc::new(PipelineState::new(Arc::new(store)));
        self.stage.set_state(StageState::new(state.clone(), limits));
        self.state = Some(state);
        shadow.lock().state = Some(ShadowState {
            copied_keys: usage.keys,
            copied_bytes: usage.bytes,
            copy_ms: took.as_millis() as u64,
            copied_for: Some(live.batch.end),
            keys: usage.keys,
            bytes: usage.bytes,
            ..ShadowState::default()
        });
        tracing::info!(
            keys = usage.keys,
            bytes = usage.bytes,
            took_ms = took.as_millis() as u64,
            "A shadow deploy copied the live state for its candidate."
        );
        Ok(true)
    }

    /// Applies the live changes of the batches skipped before the one ending at `end`,
    /// and returns how many there were.
    fn catch_up(&self, shadow: &Shadow, end: Position) -> u64 {
        let Some(candidate) = &self.state else {
            return 0;
        };
        let compared = shadow.lock().through;
        let mut applied = 0;
        for (at, changes) in shadow.skipped_before(end) {
            if compared.is_none_or(|through| at > through) {
                candidate.push(at, changes);
                applied += 1;
            }
        }
        if applied > 0 {
            commit_copy(candidate, end);
        }
        applied
    }

    /// Runs the batch, keeping what a stateful candidate changed in its copy.
    fn transform(
        &mut self,
        batch: &ChangeBatch,
        lookups: Option<Arc<dyn LookupView>>,
    ) -> (Transformed, Option<Arc<StateChanges>>) {
        let mut result = self.stage.apply(&batch.batch, lookups);
        let changes = match (&mut result, &self.state) {
            (Ok(output), Some(state)) => {
                let changes = Arc::new(std::mem::take(&mut output.state));
                state.push(batch.end, changes.clone());
                commit_copy(state, batch.end);
                Some(changes)
            }
            _ => None,
        };
        (result, changes)
    }
}

/// Moves the copy's changes through `end` into its store, which is memory.
fn commit_copy(state: &PipelineState, end: Position) {
    state
        .committed(end)
        .expect("the in-memory store does not fail");
}

/// Counts how the candidate's state changes of a batch compare with the live ones.
fn compare_changes(live: &StateChanges, candidate: &StateChanges, counts: &mut ShadowState) {
    for (key, value) in live.iter() {
        match candidate.lookup(key) {
            Some(theirs) if theirs == value => counts.changes_equal += 1,
            Some(_) => counts.changes_differ += 1,
            None => counts.live_only += 1,
        }
    }
    counts.candidate_only += candidate
        .iter()
        .filter(|(key, _)| live.lookup(key).is_none())
        .count() as u64;
}

/// The shadow's task: runs the candidate on each batch handed to it and adds the
/// comparison to the report, until a limit, a stop, or too many failures.
async fn compare_batches(
    shadow: Arc<Shadow>,
    mut candidate: Candidate,
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
        let mut live = live;
        match candidate.ready_for(&mut live, &shadow).await {
            Ok(true) => {}
            Ok(false) => continue,
            Err(reason) => {
                shadow.stop(&reason);
                return;
            }
        }
        let caught_up = candidate.catch_up(&shadow, live.batch.end);
        let (back, (result, changes, took, memory_peak, live)) = blocking_step(move || {
            let started = Instant::now();
            let (result, changes) = candidate.transform(&live.batch, live.lookups.clone());
            let took = started.elapsed();
            let memory_peak = candidate.stage.memory_peak();
            (candidate, (result, changes, took, memory_peak, live))
        })
        .await;
        candidate = back;
        let usage = candidate.state.as_ref().map(|copy| copy.store().usage());
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
            if let Some(state) = &mut report.state {
                state.caught_up_batches += caught_up;
                if let Some(usage) = usage {
                    (state.keys, state.bytes) = (usage.keys, usage.bytes);
                }
                if let (Some(live), Some(changes)) = (&live.keyed, &changes) {
                    compare_changes(&live.changes, changes, state);
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn changes(entries: &[(&str, Option<&str>)]) -> StateChanges {
        entries
            .iter()
            .map(|(key, value)| {
                (
                    key.as_bytes().to_vec(),
                    value.map(|v| v.as_bytes().to_vec()),
                )
            })
            .collect()
    }

    #[test]
    fn state_changes_are_compared_key_by_key() {
        let live = changes(&[("same", Some("1")), ("other", Some("2")), ("gone", None)]);
        let candidate = changes(&[("same", Some("1")), ("other", Some("3")), ("new", None)]);
        let mut counts = ShadowState::default();
        compare_changes(&live, &candidate, &mut counts);
        assert_eq!(
            (
                counts.changes_equal,
                counts.changes_differ,
                counts.live_only,
                counts.candidate_only
            ),
            (1, 1, 1, 1)
        );
    }
}

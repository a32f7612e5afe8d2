//! A pipeline's keyed state in the loop: the store `[state]` names, what the stage
//! transforms with, the changelog records a batch's changes become, and restoring the
//! store from the changelog before a range is read.

use std::sync::Arc;

use sluice_engine::{
    BatchContext, BatchOutput, StateChanges, StateEntry, StateLimits, StateScope, TransformError,
};
use sluice_sink::SinkRecord;
use sluice_source::arrow::array::RecordBatch;
use sluice_state::{Changelog, LiveState, Loan, MemoryStore, PipelineState, RedbStore, StateStore};

use crate::config::PipelineConfig;
use crate::error::PipelineError;
use crate::metrics::PipelineMetrics;
use crate::module::Instance;
use crate::work::blocking_step;

/// How often a long restore logs how far it is.
const RESTORE_LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// The state a pipeline's stage transforms with.
#[derive(Clone)]
pub(crate) struct StageState {
    /// The state, which the stage adds each batch's changes to.
    pub state: Arc<PipelineState>,
    /// The same state as the module reads it, with its limits.
    pub scope: StateScope,
}

impl StageState {
    /// `state` under `limits`.
    pub(crate) fn new(state: Arc<PipelineState>, limits: StateLimits) -> StageState {
        StageState {
            scope: StateScope {
                source: state.clone(),
                limits,
            },
            state,
        }
    }
}

/// The limits `[state]` sets.
pub(crate) fn state_limits(config: &PipelineConfig) -> Option<StateLimits> {
    let state = config.state.as_ref()?;
    Some(StateLimits {
        max_keys: state.max_keys,
        max_bytes: state.max_mib.saturating_mul(1024 * 1024),
        max_value_bytes: state.max_value_kib.saturating_mul(1024),
    })
}

/// A stateful pipeline's state and changelog, as the loop keeps them.
pub(crate) struct KeyedState {
    stage: StageState,
    topic: String,
    /// Whether the store must be brought up to the changelog before the next range: at
    /// start, and after an error that may have left a commit's outcome unknown.
    needs_restore: bool,
    /// The store, lent to readers outside the loop once restored.
    store: Arc<dyn StateStore>,
    /// Where it is lent.
    live: Arc<LiveState>,
    /// The loan, while the store is up to the changelog; taken back during a restore
    /// (readers would see an older state) and when the loop ends.
    loan: Option<Loan>,
}

impl KeyedState {
    /// Opens the store of a pipeline with `[state]`, to be lent to `live` once
    /// restored; `None` without one.
    pub(crate) fn open(
        config: &PipelineConfig,
        live: &Arc<LiveState>,
    ) -> Result<Option<KeyedState>, PipelineError> {
        let (Some(section), Some(limits), Some(topic)) = (
            config.state.as_ref(),
            state_limits(config),
            config.changelog_topic(),
        ) else {
            return Ok(None);
        };
        let dir = section
            .dir
            .as_ref()
            .expect("the config sets [state] dir when it loads");
        let store: Arc<dyn StateStore> =
            Arc::new(RedbStore::open(dir).map_err(|source| PipelineError::State {
                pipeline: config.pipeline.name.clone(),
                source,
            })?);
        Ok(Some(KeyedState {
            stage: StageState::new(Arc::new(PipelineState::new(store.clone())), limits),
            store,
            live: live.clone(),
            loan: None,
            topic,
            needs_restore: true,
        }))
    }

    /// The changelog topic.
    pub(crate) fn topic(&self) -> &str {
        &self.topic
    }

    /// Whether the store must be brought up to the changelog before the next range.
    pub(crate) fn needs_restore(&self) -> bool {
        self.needs_restore
    }

    /// What the stage transforms with.
    pub(crate) fn stage(&self) -> StageState {
        self.stage.clone()
    }

    /// The changelog records of a batch's changes: one per changed key, a tombstone
    /// for a removed one, all on the changelog's one partition.
    pub(crate) fn changelog_records(&self, changes: &StateChanges) -> Vec<SinkRecord> {
        changes
            .iter()
            .map(|(key, value)| SinkRecord {
                topic: Some(self.topic.clone()),
                partition: Some(0),
                key: Some(key.to_vec()),
                value: value.map(<[u8]>::to_vec),
                headers: Vec::new(),
                origin: None,
            })
            .collect()
    }

    /// Moves the changes of the batches through `position`, now committed, into the
    /// store.
    pub(crate) fn committed(
        &self,
        pipeline: &str,
        position: sluice_source::Position,
        metrics: &PipelineMetrics,
    ) -> Result<(), PipelineError> {
        self.stage
            .state
            .committed(position)
            .map_err(|source| PipelineError::State {
                pipeline: pipeline.to_string(),
                source,
            })?;
        let usage = self.stage.state.store().usage();
        metrics.record_state_usage(usage.keys, usage.bytes);
        Ok(())
    }

    /// Forgets the changes not committed, before the work after the last commit is
    /// redone.
    pub(crate) fn discard_pending(&self) {
        self.stage.state.discard_pending();
    }

    /// Restores the store from the changelog before the next range, once an error may
    /// have left a commit's outcome unknown.
    pub(crate) fn restore_before_next_range(&mut self) {
        self.needs_restore = true;
    }

    /// Brings the store up to the changelog, showing progress in the metrics.
    pub(crate) async fn restore(
        &mut self,
        pipeline: &str,
        changelog: Box<dyn Changelog>,
        metrics: &Arc<PipelineMetrics>,
    ) -> Result<(), PipelineError> {
        self.loan = None;
        let state = self.stage.state.clone();
        let progress_metrics = metrics.clone();
        let name = pipeline.to_string();
        let mut logged = std::time::Instant::now();
        let restored = blocking_step(move || {
            state.restore(&*changelog, &mut |read, total| {
                progress_metrics.record_state_restore(read, total);
                // A long restore says how far it is, as catching up does.
                if logged.elapsed() >= RESTORE_LOG_EVERY {
                    logged = std::time::Instant::now();
                    tracing::info!(
                        pipeline = name,
                        read,
                        total,
                        "Restoring the pipeline's state: {read} of {total} changelog offsets read."
                    );
                }
            })
        })
        .await
        .map_err(|source| PipelineError::State {
            pipeline: pipeline.to_string(),
            source,
        })?;
        let usage = self.stage.state.store().usage();
        metrics.record_state_usage(usage.keys, usage.bytes);
        metrics.record_state_restored(restored.took);
        tracing::info!(
            pipeline,
            changelog = self.topic,
            from_offset = restored.from,
            to_offset = restored.to,
            changes = restored.changes,
            keys = usage.keys,
            bytes = usage.bytes,
            rebuilt = restored.rebuilt.unwrap_or("no"),
            seconds = restored.took.as_secs_f64(),
            "Restored the pipeline's state from its changelog."
        );
        self.needs_restore = false;
        self.loan = Some(self.live.lend(self.store.clone()));
        Ok(())
    }

    /// Writes a checkpoint at the changelog's end after the run's last commit, so the
    /// next start reads only what comes after; a failure costs only a longer restore.
    pub(crate) async fn checkpoint(&self, pipeline: &str, changelog: Box<dyn Changelog>) {
        if self.needs_restore {
            // The store was not brought up to the changelog this run: a checkpoint at
            // the changelog's end would claim changes it never applied.
            return;
        }
        let state = self.stage.state.clone();
        let written = blocking_step(move || state.checkpoint(&*changelog)).await;
        if let Err(error) = written {
            tracing::warn!(
                pipeline,
                %error,
                "The state's checkpoint could not be written; the next start restores more of the changelog."
            );
        }
    }
}

/// Deletes this node's copy of a stateful pipeline's state; nothing when there is none.
pub(crate) fn remove_store(config: &PipelineConfig) -> Result<(), PipelineError> {
    let Some(dir) = config.state.as_ref().and_then(|state| state.dir.as_ref()) else {
        return Ok(());
    };
    match std::fs::remove_dir_all(dir) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(PipelineError::State {
            pipeline: config.pipeline.name.clone(),
            source: sluice_state::StoreError::Io {
                path: dir.clone(),
                detail: format!("deleting it failed: {error}"),
            },
        }),
        _ => Ok(()),
    }
}

/// The limits of state that lives only as long as a preview or a deploy's trial run:
/// `[state]`'s defaults.
const SCRATCH_LIMITS: StateLimits = StateLimits {
    max_keys: 1_000_000,
    max_bytes: 256 * 1024 * 1024,
    max_value_bytes: 512 * 1024,
};

/// State in memory for a run that commits nothing (a preview, a deploy's trial run):
/// each batch's changes are kept as if committed.
pub(crate) struct ScratchState {
    stage: StageState,
    store: Arc<MemoryStore>,
}

impl ScratchState {
    /// Empty state.
    pub(crate) fn new() -> ScratchState {
        ScratchState::seeded(&[])
    }

    /// State that starts with `entries`.
    pub(crate) fn seeded(entries: &[StateEntry]) -> ScratchState {
        let store = Arc::new(MemoryStore::default());
        let seed = entries
            .iter()
            .map(|(key, value)| (key.clone(), Some(value.clone())))
            .collect();
        store
            .apply(&seed)
            .expect("the in-memory store does not fail");
        let shared: Arc<dyn StateStore> = store.clone();
        ScratchState {
            stage: StageState::new(Arc::new(PipelineState::new(shared)), SCRATCH_LIMITS),
            store,
        }
    }

    /// Every entry, in key order.
    pub(crate) fn entries(&self) -> Vec<StateEntry> {
        self.store.entries()
    }

    /// Transforms `batch` with this state and keeps what the module changed.
    pub(crate) fn transform(
        &self,
        instance: &mut dyn Instance,
        batch: &RecordBatch,
    ) -> Result<BatchOutput, TransformError> {
        let context = BatchContext {
            state: Some(self.stage.scope.clone()),
            lookups: None,
        };
        let mut output = instance.transform_in(batch, &context)?;
        let at = sluice_source::Position::default();
        self.stage
            .state
            .push(at, Arc::new(std::mem::take(&mut output.state)));
        self.stage
            .state
            .committed(at)
            .expect("the in-memory store does not fail");
        Ok(output)
    }
}

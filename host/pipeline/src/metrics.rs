//! Counters a running pipeline keeps for whoever supervises it (the service's status
//! and Prometheus endpoints): cheap atomics updated on the batch path, read at any time.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use sluice_engine::{TransformError, TrapKind};
use sluice_source::{Position, StorageMetrics};

use crate::outage::Waiting;
use crate::stage_output::StageOutput;

/// Upper bounds, in seconds, of the batch latency histogram's buckets (the last bucket,
/// `+Inf`, is implied).
pub const BATCH_SECONDS_BUCKETS: [f64; 10] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0];

/// One pipeline's counters. Counts only grow, except the gauges noted.
#[derive(Debug, Default)]
pub struct PipelineMetrics {
    rows_in: AtomicU64,
    records_out: AtomicU64,
    bytes_out: AtomicU64,
    failed_rows: AtomicU64,
    failed_batches: AtomicU64,
    traps: AtomicU64,
    host_limits: AtomicU64,
    sink_retries: AtomicU64,
    registry_retries: AtomicU64,
    source_retries: AtomicU64,
    /// The table's storage requests, counted by its HTTP client.
    pub(crate) storage: std::sync::Arc<StorageMetrics>,
    batches: AtomicU64,
    guest_nanos: AtomicU64,
    buckets: [AtomicU64; BATCH_SECONDS_BUCKETS.len()],
    swaps: AtomicU64,
    last_swap_pause_nanos: AtomicU64,
    position_version: AtomicU64,
    position_row_offset: AtomicU64,
    position_snapshot: AtomicBool,
    latest_version: AtomicU64,
    progress: Mutex<ProgressSnapshot>,
    waiting: Mutex<Option<Waiting>>,
    stage_nanos: [AtomicU64; Stage::ALL.len()],
    state: Mutex<StateSnapshot>,
    state_keys_read: AtomicU64,
    state_keys_written: AtomicU64,
}

/// A stateful pipeline's state, as the metrics show it.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct StateSnapshot {
    /// Gauge: keys in the committed state on this node.
    pub keys: u64,
    /// Gauge: bytes of their keys and values.
    pub bytes: u64,
    /// Gauge: changelog offsets read by the restore in progress or last done.
    pub restore_read: u64,
    /// Gauge: changelog offsets that restore had to read.
    pub restore_total: u64,
    /// How long the last restore took, in seconds.
    pub restore_seconds: f64,
    /// Counter: keys the module read (each key of a `get-many`, each entry of a
    /// `scan`), work redone after a retry included.
    pub keys_read: u64,
    /// Counter: keys the module put or deleted, work redone included.
    pub keys_written: u64,
}

/// A stage of the pipeline, timed on its own: the stages overlap, so their times add
/// up to more than the run's; the one nearest the run's wall time is the bottleneck.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Reading change batches from the table.
    Read,
    /// Running the module and building the sink records.
    Transform,
    /// Handing records to the Kafka producer.
    Send,
    /// Committing (a transaction, or the position after acknowledgements).
    Commit,
    /// The loop waiting for the next transformed batch.
    Wait,
}

impl Stage {
    /// Every stage, in order.
    pub(crate) const ALL: [Stage; 5] = [
        Stage::Read,
        Stage::Transform,
        Stage::Send,
        Stage::Commit,
        Stage::Wait,
    ];
}

/// Seconds spent per stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct StageSeconds {
    /// Reading change batches from the table.
    pub read: f64,
    /// Running the module and building the sink records.
    pub transform: f64,
    /// Handing records to the Kafka producer.
    pub send: f64,
    /// Committing.
    pub commit: f64,
    /// The loop waiting for the next transformed batch.
    pub wait: f64,
}

impl std::fmt::Display for StageSeconds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "read {:.2} s, transform {:.2} s, send {:.2} s, commit {:.2} s, waiting for batches {:.2} s",
            self.read, self.transform, self.send, self.commit, self.wait
        )
    }
}

/// Where a pipeline is in the range of versions it is delivering (catching up, or
/// streaming a snapshot), and how fast it goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ProgressSnapshot {
    /// Whether the range is the snapshot of `first_version`.
    pub snapshot: bool,
    /// The range's first version.
    pub first_version: u64,
    /// Its last version: the table's latest when the range began.
    pub last_version: u64,
    /// Versions of the range committed.
    pub versions_done: u64,
    /// Versions in the range (1 for a snapshot).
    pub versions_total: u64,
    /// Change rows of the range committed.
    pub rows_done: u64,
    /// Change rows committed per second since the range began.
    pub rows_per_second: f64,
    /// Seconds the rest of the range takes at that pace (unknown for a snapshot).
    pub seconds_left: Option<f64>,
}

/// The counters at one moment.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct MetricsSnapshot {
    /// Change rows read and committed.
    pub rows_in: u64,
    /// Records committed to Kafka (dead letters included).
    pub records_out: u64,
    /// Bytes of keys and values committed.
    pub bytes_out: u64,
    /// Rows the module rejected or failed on alone (`row` errors).
    pub failed_rows: u64,
    /// Rows failed because their whole batch failed (`batch` errors, traps after the retry).
    pub failed_batches: u64,
    /// Module traps, each retry included.
    pub traps: u64,
    /// Of those, traps because the module made the host spend past its budgets (`host
    /// limit exceeded`).
    pub host_limits: u64,
    /// Times the pipeline redid work after Kafka aborted a transaction.
    pub sink_retries: u64,
    /// Times the pipeline redid work after the schema registry did not answer.
    pub registry_retries: u64,
    /// Times the pipeline read again from its position after the table's storage
    /// failed past the object store's own retries.
    pub source_retries: u64,
    /// HTTP requests sent to the table's store (none for a local table).
    pub storage_requests: u64,
    /// Of those, the ones that failed (transport error, timeout, 5xx or 429) and were
    /// retried by the object store.
    pub storage_failures: u64,
    /// Batches through the module.
    pub batches: u64,
    /// Seconds spent in the module (wall time of its calls).
    pub guest_seconds: f64,
    /// Batches per latency bucket (not cumulative), in `BATCH_SECONDS_BUCKETS` order.
    pub batch_seconds_buckets: [u64; BATCH_SECONDS_BUCKETS.len()],
    /// Module swaps done.
    pub swaps: u64,
    /// How long the last swap held the pipeline at the batch boundary, in seconds.
    pub last_swap_pause_seconds: f64,
    /// Gauge: the next change row to deliver.
    pub position: Position,
    /// Gauge: the table's latest version when last looked at.
    pub latest_version: u64,
    /// Gauge: the range being delivered.
    pub progress: ProgressSnapshot,
    /// Gauge: what the pipeline waits for, while it waits out an outage.
    pub waiting: Option<Waiting>,
    /// Seconds spent per stage.
    pub stage_seconds: StageSeconds,
    /// The keyed state, for a pipeline that keeps state.
    pub state: StateSnapshot,
}

impl MetricsSnapshot {
    /// Versions committed to the table but not yet delivered.
    pub fn lag_versions(&self) -> u64 {
        (self.latest_version + 1).saturating_sub(self.position.version)
    }
}

impl PipelineMetrics {
    /// Counts a batch through the module: its latency and how it went.
    pub(crate) fn record_batch(
        &self,
        took: Duration,
        result: &Result<StageOutput, (u32, TransformError)>,
    ) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.guest_nanos
            .fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
        let seconds = took.as_secs_f64();
        if let Some(bucket) = BATCH_SECONDS_BUCKETS.iter().position(|&b| seconds <= b) {
            self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        }
        if let Ok(output) = result {
            let access = output.state_access;
            self.state_keys_read
                .fetch_add(access.keys_read, Ordering::Relaxed);
            self.state_keys_written
                .fetch_add(access.keys_written, Ordering::Relaxed);
            for failed in &output.failed {
                let counter = if failed.kind == "row" {
                    &self.failed_rows
                } else {
                    &self.failed_batches
                };
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub(crate) fn count_trap(&self, kind: TrapKind) {
        self.traps.fetch_add(1, Ordering::Relaxed);
        if matches!(kind, TrapKind::HostLimit | TrapKind::StateLimit) {
            self.host_limits.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn update_state(&self, update: impl FnOnce(&mut StateSnapshot)) {
        update(&mut self.state.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// Records how far a restore of the state has read its changelog.
    pub(crate) fn record_state_restore(&self, read: u64, total: u64) {
        self.update_state(|state| {
            state.restore_read = read;
            state.restore_total = total;
        });
    }

    /// Records a restore that finished.
    pub(crate) fn record_state_restored(&self, took: Duration) {
        self.update_state(|state| state.restore_seconds = took.as_secs_f64());
    }

    /// Records the committed state's size.
    pub(crate) fn record_state_usage(&self, keys: u64, bytes: u64) {
        self.update_state(|state| {
            state.keys = keys;
            state.bytes = bytes;
        });
    }

    pub(crate) fn count_sink_retry(&self) {
        self.sink_retries.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_registry_retry(&self) {
        self.registry_retries.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_source_retry(&self) {
        self.source_retries.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_commit(&self, rows: u64, records: u64, bytes: u64, position: Position) {
        self.rows_in.fetch_add(rows, Ordering::Relaxed);
        self.records_out.fetch_add(records, Ordering::Relaxed);
        self.bytes_out.fetch_add(bytes, Ordering::Relaxed);
        self.position_version
            .store(position.version, Ordering::Relaxed);
        self.position_row_offset
            .store(position.row_offset, Ordering::Relaxed);
        self.position_snapshot
            .store(position.snapshot, Ordering::Relaxed);
    }

    pub(crate) fn record_stage(&self, stage: Stage, took: Duration) {
        self.stage_nanos[stage as usize].fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
    }

    pub(crate) fn record_progress(&self, progress: ProgressSnapshot) {
        *self.progress.lock().unwrap_or_else(|e| e.into_inner()) = progress;
    }

    pub(crate) fn record_waiting(&self, waiting: Option<Waiting>) {
        *self.waiting.lock().unwrap_or_else(|e| e.into_inner()) = waiting;
    }

    pub(crate) fn record_latest(&self, version: u64) {
        self.latest_version.store(version, Ordering::Relaxed);
    }

    pub(crate) fn record_swap(&self, pause: Duration) {
        self.swaps.fetch_add(1, Ordering::Relaxed);
        self.last_swap_pause_nanos
            .store(pause.as_nanos() as u64, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> MetricsSnapshot {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        MetricsSnapshot {
            rows_in: load(&self.rows_in),
            records_out: load(&self.records_out),
            bytes_out: load(&self.bytes_out),
            failed_rows: load(&self.failed_rows),
            failed_batches: load(&self.failed_batches),
            traps: load(&self.traps),
            host_limits: load(&self.host_limits),
            sink_retries: load(&self.sink_retries),
            registry_retries: load(&self.registry_retries),
            source_retries: load(&self.source_retries),
            storage_requests: self.storage.requests(),
            storage_failures: self.storage.failures(),
            batches: load(&self.batches),
            guest_seconds: load(&self.guest_nanos) as f64 / 1e9,
            batch_seconds_buckets: std::array::from_fn(|i| load(&self.buckets[i])),
            swaps: load(&self.swaps),
            last_swap_pause_seconds: load(&self.last_swap_pause_nanos) as f64 / 1e9,
            position: Position {
                version: load(&self.position_version),
                row_offset: load(&self.position_row_offset),
                snapshot: self.position_snapshot.load(Ordering::Relaxed),
            },
            latest_version: load(&self.latest_version),
            progress: *self.progress.lock().unwrap_or_else(|e| e.into_inner()),
            waiting: self
                .waiting
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            stage_seconds: {
                let seconds = |stage: Stage| load(&self.stage_nanos[stage as usize]) as f64 / 1e9;
                StageSeconds {
                    read: seconds(Stage::Read),
                    transform: seconds(Stage::Transform),
                    send: seconds(Stage::Send),
                    commit: seconds(Stage::Commit),
                    wait: seconds(Stage::Wait),
                }
            },
            state: StateSnapshot {
                keys_read: load(&self.state_keys_read),
                keys_written: load(&self.state_keys_written),
                ..*self.state.lock().unwrap_or_else(|e| e.into_inner())
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_fall_in_the_first_bucket_that_holds_them() {
        let metrics = PipelineMetrics::default();
        let ok = Ok(StageOutput {
            state: Default::default(),
            state_access: sluice_engine::StateAccess {
                keys_read: 3,
                keys_written: 2,
            },
            records: Vec::new(),
            framed: Vec::new(),
            failed: Vec::new(),
        });
        metrics.record_batch(Duration::from_micros(500), &ok);
        metrics.record_batch(Duration::from_millis(30), &ok);
        metrics.record_batch(Duration::from_secs(9), &ok);
        let snapshot = metrics.snapshot();
        assert_eq!(snapshot.batches, 3);
        assert_eq!(
            (snapshot.state.keys_read, snapshot.state.keys_written),
            (9, 6)
        );
        assert_eq!(snapshot.batch_seconds_buckets[0], 1);
        assert_eq!(snapshot.batch_seconds_buckets[5], 1);
        assert_eq!(snapshot.batch_seconds_buckets.iter().sum::<u64>(), 2);
    }

    #[test]
    fn lag_counts_the_versions_not_yet_delivered() {
        let metrics = PipelineMetrics::default();
        metrics.record_latest(9);
        metrics.record_commit(10, 10, 100, Position::at_version(7));
        assert_eq!(metrics.snapshot().lag_versions(), 3);
        metrics.record_commit(0, 0, 0, Position::at_version(10));
        assert_eq!(metrics.snapshot().lag_versions(), 0);
    }
}

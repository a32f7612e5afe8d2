//! A bounded history of each pipeline's figures over the last hour, kept in memory for
//! the console's charts (`GET .../history`).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde::Serialize;
use sluice_pipeline::MetricsSnapshot;

use super::Service;
use crate::auth::TenantScope;
use crate::error::ServiceError;
use crate::store::now_millis;

/// How often a point is added.
pub const HISTORY_EVERY: Duration = Duration::from_secs(5);

/// Points kept per pipeline: an hour's worth.
const HISTORY_POINTS: usize = 720;

/// How far back a history goes.
const HISTORY_MS: u64 = 3_600_000;

/// A pipeline's figures over one interval. Rates and means use `f32`: a thousand
/// pipelines keep 720 points each.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HistoryPoint {
    /// The interval's end, in milliseconds since the epoch.
    pub at_ms: u64,
    /// Change rows read and committed per second.
    pub rows_per_second: f32,
    /// Records committed to Kafka per second.
    pub records_per_second: f32,
    /// Versions committed to the table and not yet delivered, at the interval's end.
    pub lag_versions: u64,
    /// Mean seconds in the module per batch (0 without batches).
    pub guest_seconds_per_batch: f32,
    /// Seconds spent in the module per second (above 1 with several instances).
    pub guest_share: f32,
    /// Rows failed alone, rows failed with their batch, and traps, in the interval.
    pub errors: u64,
}

impl HistoryPoint {
    /// Whether the two show the same figures, whenever they were taken.
    fn same_figures(&self, other: &HistoryPoint) -> bool {
        HistoryPoint {
            at_ms: other.at_ms,
            ..self.clone()
        } == *other
    }
}

/// What the API shows of a pipeline's history.
#[derive(Clone, Debug, Serialize)]
pub struct History {
    /// Seconds between points.
    pub interval_seconds: u64,
    /// Oldest first.
    pub points: Vec<HistoryPoint>,
}

/// The recent history of each of a tenant's pipelines: what a list of them draws its
/// sparklines from, in one call.
#[derive(Clone, Debug, Serialize)]
pub struct TenantHistory {
    /// Seconds between points.
    pub interval_seconds: u64,
    /// Each pipeline's points by name, oldest first.
    pub pipelines: BTreeMap<String, Vec<HistoryPoint>>,
}

/// The points of one pipeline and the counters the next point is measured from.
///
/// A run of points with the same figures (an idle pipeline's) keeps only its first and
/// its latest point: a chart draws the same lines, and a thousand idle pipelines keep a
/// few points each instead of an hour's.
#[derive(Default)]
pub(super) struct MetricsHistory {
    points: VecDeque<HistoryPoint>,
    /// The latest point of the run the last stored point began, not yet stored.
    held: Option<HistoryPoint>,
    /// The last reading: when, from which node's counters (in a cluster), and them.
    last: Option<(u64, Option<String>, MetricsSnapshot)>,
}

impl MetricsHistory {
    /// Adds the point that ends at `at_ms` with these counters, read from `node`'s
    /// (in a cluster; `None` for this node's own when it runs alone). The first call,
    /// and a call after the counters came from another node (a pipeline moved or
    /// resumed elsewhere), only take the counters to measure from.
    pub(super) fn record(&mut self, at_ms: u64, node: Option<String>, now: MetricsSnapshot) {
        if let Some((then_ms, then_node, then)) = &self.last
            && *then_node == node
        {
            let seconds = at_ms.saturating_sub(*then_ms) as f64 / 1000.0;
            if seconds > 0.0 {
                self.add(point(at_ms, seconds, then, &now));
            }
        }
        self.last = Some((at_ms, node, now));
    }

    fn add(&mut self, point: HistoryPoint) {
        if self.points.back().is_some_and(|p| p.same_figures(&point)) {
            self.held = Some(point);
            return;
        }
        if let Some(held) = self.held.take() {
            self.store(held);
        }
        self.store(point);
    }

    fn store(&mut self, point: HistoryPoint) {
        let oldest = point.at_ms.saturating_sub(HISTORY_MS);
        while self
            .points
            .front()
            .is_some_and(|p| p.at_ms < oldest || self.points.len() == HISTORY_POINTS)
        {
            self.points.pop_front();
        }
        self.points.push_back(point);
    }

    /// The last `last` points (all without a number), oldest first.
    pub(super) fn points(&self, last: Option<usize>) -> Vec<HistoryPoint> {
        let all = self.points.iter().chain(&self.held);
        let count = self.points.len() + usize::from(self.held.is_some());
        let skip = last.map_or(0, |last| count.saturating_sub(last));
        all.skip(skip).cloned().collect()
    }
}

impl Service {
    /// A pipeline's figures over the last hour (its last `last` points).
    pub async fn history(
        &self,
        tenant: &TenantScope,
        name: &str,
        last: Option<usize>,
    ) -> Result<History, ServiceError> {
        let entry = self.found(|| self.entry(tenant, name)).await?;
        let history = entry.history.lock().unwrap_or_else(|e| e.into_inner());
        Ok(History {
            interval_seconds: HISTORY_EVERY.as_secs(),
            points: history.points(last),
        })
    }

    /// The last `last` points of each of the tenant's pipelines.
    pub async fn tenant_history(
        &self,
        tenant: &TenantScope,
        last: Option<usize>,
    ) -> Result<TenantHistory, ServiceError> {
        self.found(|| self.tenant(tenant)).await?;
        let pipelines = self
            .entries()
            .iter()
            .filter_map(|entry| {
                let definition = entry.definition();
                (definition.tenant == **tenant).then(|| {
                    let history = entry.history.lock().unwrap_or_else(|e| e.into_inner());
                    (definition.name, history.points(last))
                })
            })
            .collect();
        Ok(TenantHistory {
            interval_seconds: HISTORY_EVERY.as_secs(),
            pipelines,
        })
    }

    /// Adds a point to each pipeline's history.
    pub fn sample_history(&self) {
        let at_ms = now_millis();
        for entry in self.entries() {
            let (node, counters, _) = self.figures(&entry, &entry.definition());
            let mut history = entry.history.lock().unwrap_or_else(|e| e.into_inner());
            history.record(at_ms, node, counters);
        }
    }
}

/// The figures between two readings of the counters. Counters start again from zero
/// when a pipeline restarts elsewhere in a cluster; a counter lower than before counts
/// as no change.
fn point(at_ms: u64, seconds: f64, then: &MetricsSnapshot, now: &MetricsSnapshot) -> HistoryPoint {
    let batches = now.batches.saturating_sub(then.batches);
    let guest_seconds = (now.guest_seconds - then.guest_seconds).max(0.0);
    let errors = |s: &MetricsSnapshot| s.failed_rows + s.failed_batches + s.traps;
    HistoryPoint {
        at_ms,
        rows_per_second: (now.rows_in.saturating_sub(then.rows_in) as f64 / seconds) as f32,
        records_per_second: (now.records_out.saturating_sub(then.records_out) as f64 / seconds)
            as f32,
        lag_versions: now.lag_versions(),
        guest_seconds_per_batch: match batches {
            0 => 0.0,
            n => (guest_seconds / n as f64) as f32,
        },
        guest_share: (guest_seconds / seconds) as f32,
        errors: errors(now).saturating_sub(errors(then)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(rows_in: u64, batches: u64, guest_seconds: f64, traps: u64) -> MetricsSnapshot {
        MetricsSnapshot {
            rows_in,
            records_out: rows_in / 2,
            batches,
            guest_seconds,
            traps,
            ..MetricsSnapshot::default()
        }
    }

    #[test]
    fn points_are_rates_and_means_over_their_interval() {
        let mut history = MetricsHistory::default();
        history.record(10_000, None, counters(100, 1, 0.5, 0));
        assert!(
            history.points(None).is_empty(),
            "the first reading is a start"
        );
        history.record(15_000, None, counters(600, 5, 1.3, 2));
        let points = history.points(None);
        assert_eq!(
            points,
            [HistoryPoint {
                at_ms: 15_000,
                rows_per_second: 100.0,
                records_per_second: 50.0,
                lag_versions: 1,
                guest_seconds_per_batch: 0.2,
                guest_share: 0.16,
                errors: 2,
            }]
        );
    }

    #[test]
    fn counters_that_start_again_count_as_no_change() {
        let mut history = MetricsHistory::default();
        history.record(0, None, counters(1_000, 10, 5.0, 3));
        history.record(5_000, None, counters(10, 1, 0.1, 0));
        let point = &history.points(None)[0];
        assert_eq!(
            (point.rows_per_second, point.guest_share, point.errors),
            (0.0, 0.0, 0)
        );
    }

    #[test]
    fn a_run_of_idle_points_keeps_its_first_and_latest() {
        let mut history = MetricsHistory::default();
        for i in 0..100 {
            history.record(i * 5_000, None, counters(0, 0, 0.0, 0));
        }
        let times = |h: &MetricsHistory| -> Vec<u64> {
            h.points(None).iter().map(|p| p.at_ms / 5_000).collect()
        };
        assert_eq!(times(&history), [1, 99]);
        history.record(100 * 5_000, None, counters(500, 1, 0.1, 0));
        history.record(101 * 5_000, None, counters(500, 1, 0.1, 0));
        assert_eq!(times(&history), [1, 99, 100, 101]);
        assert_eq!(history.points(None)[2].rows_per_second, 100.0);
        assert_eq!(history.points(Some(1))[0].at_ms, 101 * 5_000);
    }

    #[test]
    fn counters_from_another_node_start_a_new_measure() {
        let mut history = MetricsHistory::default();
        let node = |name: &str| Some(name.to_string());
        history.record(0, node("a"), counters(1_000, 1, 0.0, 0));
        history.record(5_000, node("b"), counters(9_000, 9, 0.0, 0));
        assert!(history.points(None).is_empty(), "no point across nodes");
        history.record(10_000, node("b"), counters(9_500, 10, 0.0, 0));
        assert_eq!(history.points(None)[0].rows_per_second, 100.0);
    }

    #[test]
    fn points_older_than_an_hour_go() {
        let mut history = MetricsHistory::default();
        history.record(0, None, counters(0, 0, 0.0, 0));
        history.record(5_000, None, counters(10, 1, 0.0, 0));
        history.record(HISTORY_MS + 60_000, None, counters(20, 2, 0.0, 0));
        let points = history.points(None);
        assert_eq!(points.len(), 1, "{points:?}");
    }

    #[test]
    fn an_hour_of_points_is_kept() {
        let mut history = MetricsHistory::default();
        // Rates that differ from point to point, so no run is shortened.
        for i in 0..=(HISTORY_POINTS as u64 + 10) {
            history.record(i * 5_000, None, counters(i * i, i, 0.0, 0));
        }
        let points = history.points(None);
        assert_eq!(points.len(), HISTORY_POINTS);
        assert_eq!(points[0].at_ms, 11 * 5_000);
    }
}

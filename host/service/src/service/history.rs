//! A bounded history of each pipeline's figures over the last hour, kept in memory for
//! the console's charts (`GET .../history`).

use std::collections::VecDeque;
use std::time::Duration;

use serde::Serialize;
use sluice_pipeline::MetricsSnapshot;

/// How often a point is added.
pub const HISTORY_EVERY: Duration = Duration::from_secs(5);

/// Points kept per pipeline: an hour's worth.
const HISTORY_POINTS: usize = 720;

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
    /// Mean latency of a batch through the module, in seconds (0 without batches).
    pub batch_seconds: f32,
    /// Seconds spent in the module per second.
    pub guest_share: f32,
    /// Rows failed alone, rows failed with their batch, and traps, in the interval.
    pub errors: u64,
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
    pub pipelines: std::collections::BTreeMap<String, Vec<HistoryPoint>>,
}

/// The points of one pipeline and the counters the next point is measured from.
#[derive(Default)]
pub(super) struct MetricsHistory {
    points: VecDeque<HistoryPoint>,
    last: Option<(u64, MetricsSnapshot)>,
}

impl MetricsHistory {
    /// Adds the point that ends at `at_ms` with these counters; the first call only
    /// takes the counters to measure from.
    pub(super) fn record(&mut self, at_ms: u64, now: MetricsSnapshot) {
        if let Some((then_ms, then)) = &self.last {
            let seconds = at_ms.saturating_sub(*then_ms) as f64 / 1000.0;
            if seconds > 0.0 {
                if self.points.len() == HISTORY_POINTS {
                    self.points.pop_front();
                }
                self.points.push_back(point(at_ms, seconds, then, &now));
            }
        }
        self.last = Some((at_ms, now));
    }

    /// The last `last` points (all without a number), oldest first.
    pub(super) fn points(&self, last: Option<usize>) -> Vec<HistoryPoint> {
        let skip = last.map_or(0, |last| self.points.len().saturating_sub(last));
        self.points.iter().skip(skip).cloned().collect()
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
        batch_seconds: match batches {
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
        history.record(10_000, counters(100, 1, 0.5, 0));
        assert!(
            history.points(None).is_empty(),
            "the first reading is a start"
        );
        history.record(15_000, counters(600, 5, 1.3, 2));
        let points = history.points(None);
        assert_eq!(
            points,
            [HistoryPoint {
                at_ms: 15_000,
                rows_per_second: 100.0,
                records_per_second: 50.0,
                lag_versions: 1,
                batch_seconds: 0.2,
                guest_share: 0.16,
                errors: 2,
            }]
        );
    }

    #[test]
    fn counters_that_start_again_count_as_no_change() {
        let mut history = MetricsHistory::default();
        history.record(0, counters(1_000, 10, 5.0, 3));
        history.record(5_000, counters(10, 1, 0.1, 0));
        let point = &history.points(None)[0];
        assert_eq!(
            (point.rows_per_second, point.guest_share, point.errors),
            (0.0, 0.0, 0)
        );
    }

    #[test]
    fn an_hour_of_points_is_kept() {
        let mut history = MetricsHistory::default();
        for i in 0..=(HISTORY_POINTS as u64 + 10) {
            history.record(i * 5_000, counters(i * 10, i, 0.0, 0));
        }
        let points = history.points(None);
        assert_eq!(points.len(), HISTORY_POINTS);
        assert_eq!(points[0].at_ms, 11 * 5_000);
    }
}

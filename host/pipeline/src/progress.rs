//! Progress on long work: where a pipeline is in the range it is catching up on (or the
//! snapshot it is streaming), how fast it goes and how long is left. Kept in the
//! pipeline's metrics for status, Prometheus and the CLI's progress bar, and logged as a
//! sentence every little while when a range takes long.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_source::Position;

use crate::metrics::{PipelineMetrics, ProgressSnapshot};

/// How often a long range logs where it is.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// The progress of one run.
pub(crate) struct Progress {
    pipeline: String,
    metrics: Arc<PipelineMetrics>,
    log: bool,
    range: Option<Range>,
}

/// The range being delivered.
struct Range {
    from: Position,
    latest: u64,
    started: Instant,
    rows: u64,
    logged: Instant,
}

impl Progress {
    /// Progress for `pipeline`, kept in `metrics`, and logged when `log` is set.
    pub(crate) fn new(pipeline: &str, metrics: Arc<PipelineMetrics>, log: bool) -> Progress {
        Progress {
            pipeline: pipeline.to_string(),
            metrics,
            log,
            range: None,
        }
    }

    /// A range starts: from `from` through version `latest` (or `from`'s snapshot).
    pub(crate) fn range(&mut self, from: Position, latest: u64) {
        let now = Instant::now();
        self.range = Some(Range {
            from,
            latest,
            started: now,
            rows: 0,
            logged: now,
        });
        self.metrics
            .record_progress(figures(from, latest, from, 0, Duration::ZERO));
    }

    /// `rows` more change rows are committed, up to `position`.
    pub(crate) fn committed(&mut self, rows: u64, position: Position) {
        let Some(range) = &mut self.range else {
            return;
        };
        range.rows += rows;
        let figures = figures(
            range.from,
            range.latest,
            position,
            range.rows,
            range.started.elapsed(),
        );
        self.metrics.record_progress(figures);
        if self.log && range.logged.elapsed() >= LOG_EVERY {
            range.logged = Instant::now();
            tracing::info!(pipeline = self.pipeline, "{}", figures.sentence());
        }
    }
}

/// The figures at `position`, `rows` and `elapsed` into a range from `from` to `latest`.
fn figures(
    from: Position,
    latest: u64,
    position: Position,
    rows: u64,
    elapsed: Duration,
) -> ProgressSnapshot {
    let seconds = elapsed.as_secs_f64();
    let (versions_total, versions_done) = if from.snapshot {
        (1, u64::from(!position.snapshot))
    } else {
        let total = (latest + 1).saturating_sub(from.version);
        (
            total,
            position.version.saturating_sub(from.version).min(total),
        )
    };
    let rows_per_second = if seconds > 0.0 {
        rows as f64 / seconds
    } else {
        0.0
    };
    // Versions differ in size; the rate so far is the best guess there is.
    let seconds_left = (versions_done > 0 && !from.snapshot)
        .then(|| seconds * (versions_total - versions_done) as f64 / versions_done as f64);
    ProgressSnapshot {
        snapshot: from.snapshot,
        first_version: from.version,
        last_version: if from.snapshot { from.version } else { latest },
        versions_done,
        versions_total,
        rows_done: rows,
        rows_per_second,
        seconds_left,
    }
}

impl ProgressSnapshot {
    /// The figures as a log sentence.
    pub fn sentence(&self) -> String {
        let left = self
            .seconds_left
            .map(|s| format!(", about {} left", humanize(s)))
            .unwrap_or_default();
        if self.snapshot {
            format!(
                "Streaming the snapshot of version {}: {} rows so far, {:.0} rows/s.",
                self.first_version, self.rows_done, self.rows_per_second
            )
        } else {
            format!(
                "Catching up on versions {}..={}: {} of {} versions done ({:.0}%), {} rows, {:.0} rows/s{left}.",
                self.first_version,
                self.last_version,
                self.versions_done,
                self.versions_total,
                self.fraction() * 100.0,
                self.rows_done,
                self.rows_per_second
            )
        }
    }

    /// The share of the range done, from 0 to 1.
    pub fn fraction(&self) -> f64 {
        if self.versions_total == 0 {
            1.0
        } else {
            self.versions_done as f64 / self.versions_total as f64
        }
    }
}

fn humanize(seconds: f64) -> String {
    let seconds = seconds.round() as u64;
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3600 => format!("{} min {} s", seconds / 60, seconds % 60),
        _ => format!("{} h {} min", seconds / 3600, seconds % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halfway_through_the_versions_the_time_left_is_the_time_so_far() {
        let figures = figures(
            Position::at_version(10),
            19,
            Position::at_version(15),
            5000,
            Duration::from_secs(20),
        );
        assert_eq!((figures.versions_done, figures.versions_total), (5, 10));
        assert_eq!(figures.rows_per_second, 250.0);
        assert_eq!(figures.seconds_left, Some(20.0));
        assert_eq!(
            figures.sentence(),
            "Catching up on versions 10..=19: 5 of 10 versions done (50%), 5000 rows, 250 rows/s, about 20 s left."
        );
    }

    #[test]
    fn a_snapshot_counts_rows_and_has_no_estimate() {
        let from = Position::snapshot_at(3);
        let inside = Position {
            row_offset: 700,
            ..from
        };
        let figures = figures(from, 9, inside, 700, Duration::from_secs(7));
        assert_eq!((figures.versions_done, figures.versions_total), (0, 1));
        assert_eq!(figures.seconds_left, None);
        assert_eq!(
            figures.sentence(),
            "Streaming the snapshot of version 3: 700 rows so far, 100 rows/s."
        );
        let after = figures_at_end(from);
        assert_eq!(after.versions_done, 1);
    }

    fn figures_at_end(from: Position) -> ProgressSnapshot {
        figures(
            from,
            9,
            Position::at_version(4),
            1000,
            Duration::from_secs(10),
        )
    }

    #[test]
    fn long_waits_read_in_minutes_and_hours() {
        assert_eq!(humanize(59.4), "59 s");
        assert_eq!(humanize(125.0), "2 min 5 s");
        assert_eq!(humanize(7300.0), "2 h 1 min");
    }
}

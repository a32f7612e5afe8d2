//! `sluice run`'s progress bar: drawn on a terminal from the pipeline's own progress
//! figures, with log lines printed above it instead of through it.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sluice_pipeline::PipelineMetrics;

/// The bar, once one is drawn.
static BAR: OnceLock<ProgressBar> = OnceLock::new();

/// How often the bar is redrawn from the figures.
const REFRESH: Duration = Duration::from_millis(200);

/// Whether a bar is drawn: only for a person watching a terminal.
pub fn wanted() -> bool {
    std::io::stderr().is_terminal()
}

/// Draws the bar from `metrics` until the process ends.
pub fn draw(metrics: Arc<PipelineMetrics>) {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg}")
            .expect("the template is valid")
            .progress_chars("=> "),
    );
    let bar = BAR.get_or_init(|| bar).clone();
    tokio::spawn(async move {
        loop {
            let snapshot = metrics.snapshot();
            let figures = snapshot.progress;
            let restore = snapshot.state;
            if restore.restore_read < restore.restore_total {
                // The store is brought up to the changelog before any version is read.
                bar.set_length(restore.restore_total);
                bar.set_position(restore.restore_read);
                bar.set_prefix("restoring state");
                bar.set_message("changelog offsets read");
            } else if figures.versions_total > 0 {
                bar.set_length(figures.versions_total);
                bar.set_position(figures.versions_done);
                bar.set_prefix(if figures.snapshot {
                    format!("snapshot of version {}", figures.first_version)
                } else {
                    format!(
                        "versions {}..={}",
                        figures.first_version, figures.last_version
                    )
                });
                let left = figures
                    .seconds_left
                    .map(|s| format!(", {:.0} s left", s))
                    .unwrap_or_default();
                bar.set_message(match &snapshot.waiting {
                    // The pipeline stands still: say why instead of a rate of zero.
                    Some(waiting) => format!(
                        "versions; {}",
                        waiting.sentence(
                            SystemTime::now()
                                .duration_since(UNIX_EPOCH)
                                .map_or(0, |d| d.as_millis() as u64),
                        )
                    ),
                    None => format!(
                        "versions, {} rows, {:.0} rows/s{left}",
                        figures.rows_done, figures.rows_per_second
                    ),
                });
            }
            tokio::time::sleep(REFRESH).await;
        }
    });
}

/// Takes the bar off the terminal, if one is drawn.
pub fn clear() {
    if let Some(bar) = BAR.get() {
        bar.finish_and_clear();
    }
}

/// Standard error for log lines: above the bar when one is drawn.
pub struct Stderr;

impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match BAR.get() {
            Some(bar) => bar.suspend(|| std::io::stderr().write(buf)),
            None => std::io::stderr().write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

//! A pipeline's guest log: the last lines kept for `logs`, and a live stream for
//! `logs --follow`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use sluice_engine::{LogLevel, LogTap};
use tokio::sync::broadcast;

/// Lines kept per pipeline for callers who were not following.
const KEPT_LINES: usize = 200;

/// One message a module logged.
#[derive(Clone, Debug, Serialize)]
pub struct LogLine {
    /// When, in milliseconds since the epoch.
    pub at_ms: u64,
    /// `trace`, `debug`, `info`, `warn` or `error`.
    pub level: &'static str,
    /// Digest of the module that wrote it.
    pub module: String,
    /// The message (cut at 4 KiB by the engine).
    pub message: String,
}

/// The guest log of one pipeline.
pub struct PipelineLog {
    recent: Mutex<VecDeque<LogLine>>,
    live: broadcast::Sender<LogLine>,
}

impl Default for PipelineLog {
    fn default() -> PipelineLog {
        PipelineLog {
            recent: Mutex::new(VecDeque::with_capacity(KEPT_LINES)),
            live: broadcast::channel(1024).0,
        }
    }
}

impl PipelineLog {
    /// A tap for a module of this pipeline.
    pub fn tap(self: &Arc<PipelineLog>, digest: &str) -> LogTap {
        let log = self.clone();
        let module = digest.to_string();
        Arc::new(move |level: LogLevel, message: &str| {
            let line = LogLine {
                at_ms: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64),
                level: level.as_str(),
                module: module.clone(),
                message: message.to_string(),
            };
            let mut recent = log.recent.lock().unwrap_or_else(|e| e.into_inner());
            if recent.len() == KEPT_LINES {
                recent.pop_front();
            }
            recent.push_back(line.clone());
            // Nobody following is fine.
            let _ = log.live.send(line);
        })
    }

    /// The kept lines, oldest first, and a receiver for the lines after them.
    pub fn subscribe(&self) -> (Vec<LogLine>, broadcast::Receiver<LogLine>) {
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        (recent.iter().cloned().collect(), self.live.subscribe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_kept_and_streamed() {
        let log = Arc::new(PipelineLog::default());
        let tap = log.tap("abc");
        tap(LogLevel::Info, "first");
        let (kept, mut live) = log.subscribe();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].message, "first");
        tap(LogLevel::Warn, "second");
        let line = live.try_recv().unwrap();
        assert_eq!((line.level, line.message.as_str()), ("warn", "second"));
        for i in 0..300 {
            tap(LogLevel::Info, &i.to_string());
        }
        assert_eq!(log.subscribe().0.len(), KEPT_LINES);
    }
}

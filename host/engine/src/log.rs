//! Module log messages, rate-limited so a chatty or hostile module cannot flood the
//! pipeline's log.

use std::sync::Arc;
use std::time::Instant;

/// Longest message kept; longer ones are cut.
const MAX_MESSAGE_BYTES: usize = 4096;

/// A token bucket per instance: `rate` messages per second, bursts up to `burst`.
pub(crate) struct ModuleLog {
    module: String,
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
    dropped: u64,
    tap: Option<LogTap>,
}

/// How loud a module's message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    /// Detail for tracing a module's steps.
    Trace,
    /// Detail for debugging.
    Debug,
    /// Normal operation.
    Info,
    /// Something the operator should look at.
    Warn,
    /// A failure.
    Error,
}

impl LogLevel {
    /// The level's name in lower case.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }
}

/// Called with every log message a module writes that its rate limit lets through,
/// after it is logged: how a service streams one pipeline's guest logs.
pub type LogTap = Arc<dyn Fn(LogLevel, &str) + Send + Sync>;

impl ModuleLog {
    pub(crate) fn new(module: &str, rate_per_second: u32, tap: Option<LogTap>) -> ModuleLog {
        let rate = f64::from(rate_per_second.max(1));
        ModuleLog {
            module: module.to_string(),
            rate,
            burst: rate * 2.0,
            tokens: rate * 2.0,
            last: Instant::now(),
            dropped: 0,
            tap,
        }
    }

    /// Logs `message` unless the module is over its rate; the next message that gets
    /// through says how many were dropped.
    pub(crate) fn log(&mut self, level: LogLevel, message: &str) {
        let now = Instant::now();
        let refill = now.duration_since(self.last).as_secs_f64() * self.rate;
        self.tokens = (self.tokens + refill).min(self.burst);
        self.last = now;
        if self.tokens < 1.0 {
            self.dropped += 1;
            return;
        }
        self.tokens -= 1.0;
        let mut end = message.len().min(MAX_MESSAGE_BYTES);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let text = &message[..end];
        let dropped = std::mem::take(&mut self.dropped);
        let module = self.module.as_str();
        match level {
            LogLevel::Trace => tracing::trace!(module, dropped, "{text}"),
            LogLevel::Debug => tracing::debug!(module, dropped, "{text}"),
            LogLevel::Info => tracing::info!(module, dropped, "{text}"),
            LogLevel::Warn => tracing::warn!(module, dropped, "{text}"),
            LogLevel::Error => tracing::error!(module, dropped, "{text}"),
        }
        if let Some(tap) = &self.tap {
            tap(level, text);
        }
    }

    /// Messages dropped since the last one logged.
    #[cfg(test)]
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_past_the_rate_are_dropped_and_counted() {
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = seen.clone();
        let tap: LogTap = std::sync::Arc::new(move |_, _| {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        });
        let mut log = ModuleLog::new("m", 10, Some(tap));
        for _ in 0..100 {
            log.log(LogLevel::Info, "hello");
        }
        assert_eq!(log.dropped(), 80);
        assert_eq!(seen.load(std::sync::atomic::Ordering::Relaxed), 20);
    }
}

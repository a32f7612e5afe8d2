//! Module log messages, rate-limited so a chatty or hostile module cannot flood the
//! pipeline's log.

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
}

/// How loud a module's message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

impl ModuleLog {
    pub(crate) fn new(module: &str, rate_per_second: u32) -> ModuleLog {
        let rate = f64::from(rate_per_second.max(1));
        ModuleLog {
            module: module.to_string(),
            rate,
            burst: rate * 2.0,
            tokens: rate * 2.0,
            last: Instant::now(),
            dropped: 0,
        }
    }

    /// Logs `message` unless the module is over its rate; the next message that gets
    /// through says how many were dropped.
    pub(crate) fn log(&mut self, level: Level, message: &str) {
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
            Level::Trace => tracing::trace!(module, dropped, "{text}"),
            Level::Debug => tracing::debug!(module, dropped, "{text}"),
            Level::Info => tracing::info!(module, dropped, "{text}"),
            Level::Warn => tracing::warn!(module, dropped, "{text}"),
            Level::Error => tracing::error!(module, dropped, "{text}"),
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
        let mut log = ModuleLog::new("m", 10);
        for _ in 0..100 {
            log.log(Level::Info, "hello");
        }
        assert_eq!(log.dropped(), 80);
    }
}

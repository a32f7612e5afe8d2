//! The producer's delivery reports, counted as librdkafka hands them over: how many of
//! the records since the last commit are still unacknowledged, and the first that failed.

use std::sync::Mutex;

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::KafkaError;
use rdkafka::producer::{DeliveryResult, ProducerContext};
use tokio::sync::Notify;

use crate::watch::SecurityWatch;

/// Counts delivery reports. Each record is sent with its sequence number as the
/// delivery opaque, so reports of records from a rolled-back transaction, which
/// librdkafka may still hand over after the rollback, are told apart and ignored.
/// The producer's error callback goes to its security watch.
pub(crate) struct DeliveryTracker {
    state: Mutex<Deliveries>,
    /// Woken by every report: a sender waiting for room in librdkafka's queue.
    room: Notify,
    security: SecurityWatch,
}

#[derive(Default)]
struct Deliveries {
    /// Reports for records numbered below this are ignored.
    counted_from: usize,
    /// Records since `counted_from` without a report yet.
    outstanding: usize,
    /// The lowest-numbered failed record since `counted_from`, and why.
    failed: Option<(usize, KafkaError)>,
}

impl DeliveryTracker {
    /// A tracker whose producer reports security failures to `security`.
    pub(crate) fn new(security: SecurityWatch) -> DeliveryTracker {
        DeliveryTracker {
            state: Mutex::default(),
            room: Notify::new(),
            security,
        }
    }

    /// Where the producer's security failures go.
    pub(crate) fn security(&self) -> &SecurityWatch {
        &self.security
    }

    /// Counts a record handed to librdkafka under `sequence`.
    pub(crate) fn sent(&self) {
        self.lock().outstanding += 1;
    }

    /// Forgets every record sent so far; numbers from `next` on count.
    pub(crate) fn reset(&self, next: usize) {
        let mut state = self.lock();
        state.counted_from = next;
        state.outstanding = 0;
        state.failed = None;
    }

    /// The first failure among the records counted, if any (taken).
    pub(crate) fn take_failure(&self) -> Option<(usize, KafkaError)> {
        self.lock().failed.take()
    }

    /// Records counted and not yet reported.
    pub(crate) fn outstanding(&self) -> usize {
        self.lock().outstanding
    }

    /// Waits until a report arrives.
    pub(crate) async fn reported(&self) {
        self.room.notified().await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Deliveries> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl ClientContext for DeliveryTracker {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        self.security.log(level, facility, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.security.report(&error, reason, "producer");
    }
}

impl ProducerContext for DeliveryTracker {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, sequence: usize) {
        {
            let mut state = self.lock();
            if sequence >= state.counted_from {
                state.outstanding = state.outstanding.saturating_sub(1);
                if let Err((error, _)) = result
                    && state
                        .failed
                        .as_ref()
                        .is_none_or(|(first, _)| sequence < *first)
                {
                    state.failed = Some((sequence, error.clone()));
                }
            }
        }
        self.room.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_forgets_what_was_sent_before() {
        let tracker = DeliveryTracker::new(SecurityWatch::new(&Default::default()));
        tracker.sent();
        tracker.sent();
        assert_eq!(tracker.outstanding(), 2);
        tracker.reset(2);
        assert_eq!(tracker.outstanding(), 0);
        assert!(tracker.take_failure().is_none());
    }
}

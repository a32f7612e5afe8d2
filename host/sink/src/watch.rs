//! The security failures a Kafka client meets, collected from its error and log callbacks
//! for whoever waits on the client: a connection attempt that ends at the first wrong
//! password, a commit that stops instead of retrying past a revoked credential. The
//! callbacks also tell a fence from other problems, and report it once, as a move.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::KafkaError;

use crate::certificate;
use crate::failure::{SecurityFailure, SecurityProblem};
use crate::fence;
use crate::properties::redact_values;
use crate::security::SecuritySettings;

/// Collects a client's security failures; shared by the client's context and whoever
/// waits on the client. Cloning shares it.
#[derive(Clone)]
pub(crate) struct SecurityWatch {
    settings: Arc<SecuritySettings>,
    seen: Arc<Mutex<Option<Seen>>>,
    /// Whether the client's fence was logged.
    fenced: Arc<AtomicBool>,
}

/// The failure kept, and how often and how lately security failures were seen.
struct Seen {
    failure: SecurityFailure,
    times: u32,
    last: Instant,
}

impl SecurityWatch {
    /// A watch for a client with these librdkafka `properties`.
    pub(crate) fn new(properties: &BTreeMap<String, String>) -> SecurityWatch {
        SecurityWatch {
            settings: Arc::new(SecuritySettings::new(properties)),
            seen: Arc::default(),
            fenced: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Seen>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records an error callback's error; whether it was a security failure.
    pub(crate) fn record(&self, error: &KafkaError, reason: &str) -> bool {
        let failure = error
            .rdkafka_error_code()
            .and_then(|code| self.settings.classify(code, reason));
        self.keep(failure)
    }

    /// Keeps the first failure, unless it only follows from this one; either way notes
    /// that a security failure was seen now.
    fn keep(&self, failure: Option<SecurityFailure>) -> bool {
        let Some(failure) = failure else {
            return false;
        };
        let mut seen = self.lock();
        match seen.as_mut() {
            None => {
                *seen = Some(Seen {
                    failure,
                    times: 1,
                    last: Instant::now(),
                });
            }
            Some(kept) => {
                if !kept.failure.problem.is_cause() && failure.problem.is_cause() {
                    kept.failure = failure;
                    kept.times = 1;
                } else if kept.failure.problem == failure.problem {
                    kept.times += 1;
                }
                kept.last = Instant::now();
            }
        }
        true
    }

    /// Records an error callback's error, and logs it unless it is a security failure
    /// (which the client's user reports as an error of its own). A fence is logged once,
    /// as a move: the producer's user stops without taking it for a failure. `client`
    /// names the client in the log.
    pub(crate) fn report(&self, error: &KafkaError, reason: &str, client: &str) {
        let reason = redact_values(reason, self.settings.secrets());
        if fence::is_fenced(error, &reason) {
            // librdkafka reports a fence more than once (a fenced `sluice run` got it twice).
            if !self.fenced.swap(true, Ordering::Relaxed) {
                tracing::info!(
                    client,
                    reason,
                    "The Kafka producer was fenced: another instance of the pipeline took over (in a cluster, the pipeline moved to another node), unless its transaction ran past Kafka's transaction timeout. This instance stops without committing."
                );
            }
        } else if self.record(error, &reason) {
            tracing::debug!(client, reason, "The Kafka client met a security failure.");
        } else if matches!(
            error,
            KafkaError::Global(rdkafka::types::RDKafkaErrorCode::Fatal)
        ) {
            tracing::error!(client, %error, reason, "The Kafka client met a fatal error: this producer cannot go on; the pipeline redoes its work with a new one where that is safe, and stops otherwise.");
        } else {
            tracing::warn!(client, %error, reason, "The Kafka client reported a problem; it keeps retrying.");
        }
    }

    /// Logs a librdkafka log line as rdkafka does, without secrets, and records the
    /// security failures librdkafka only logs. Lines about a fence are debug lines: the
    /// error callback reports the fence, as a move.
    pub(crate) fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        self.keep(self.settings.classify_log(facility, message));
        let message = redact_values(message, self.settings.secrets());
        let level = match fence::is_fence_log(&message) {
            true => RDKafkaLogLevel::Debug,
            false => level,
        };
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => {
                tracing::error!(target: "librdkafka", "librdkafka: {facility} {message}")
            }
            RDKafkaLogLevel::Warning => {
                tracing::warn!(target: "librdkafka", "librdkafka: {facility} {message}")
            }
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                tracing::info!(target: "librdkafka", "librdkafka: {facility} {message}")
            }
            RDKafkaLogLevel::Debug => {
                tracing::debug!(target: "librdkafka", "librdkafka: {facility} {message}")
            }
        }
    }

    /// The failure kept, once it is certain: at once for most problems, on its second
    /// sighting for TLS handshakes a dropped connection can also break.
    fn settled(seen: &Seen) -> Option<SecurityFailure> {
        (seen.failure.problem.is_definite() || seen.times >= 2).then(|| seen.failure.clone())
    }

    /// The failure that ends a connection attempt, if any; a certificate that could not
    /// be verified is looked at to say why (blocking: a TLS handshake with the broker).
    pub(crate) fn explained_failure(&self) -> Option<SecurityFailure> {
        let failure = self.lock().as_ref().and_then(Self::settled)?;
        let SecurityProblem::CertificateUnverified { .. } = &failure.problem else {
            return Some(failure);
        };
        let Some(problem) = certificate::why_unverified(
            &failure.broker,
            self.settings.trusted_cas(),
            self.settings.verifies_hostname(),
        ) else {
            return Some(failure);
        };
        let explained = SecurityFailure {
            problem,
            ..failure.clone()
        };
        // Unless the watch moved on (cleared, or a cause came in) during the handshake.
        if let Some(kept) = self.lock().as_mut()
            && kept.failure == failure
        {
            kept.failure = explained.clone();
        }
        Some(explained)
    }

    /// The failure kept, if a security failure was seen within `within`: what explains a
    /// send or commit failing now. An older one healed, or the operation would not have
    /// got this far.
    pub(crate) fn recent_failure(&self, within: Duration) -> Option<SecurityFailure> {
        self.lock()
            .as_ref()
            .filter(|seen| seen.last.elapsed() <= within)
            .and_then(Self::settled)
    }

    /// Forgets the failures seen so far: the connection works.
    pub(crate) fn clear(&self) {
        *self.lock() = None;
    }
}

/// The context of a client whose callbacks need nothing but the watch (an admin client).
pub(crate) struct Watched {
    /// Where the client's security failures go.
    pub(crate) security: SecurityWatch,
    /// The client's name in the log.
    pub(crate) client: &'static str,
}

impl ClientContext for Watched {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        self.security.log(level, facility, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.security.report(&error, reason, self.client);
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::{OAUTH, properties};
    use rdkafka::types::RDKafkaErrorCode;

    use super::*;

    fn watch(pairs: &[(&str, &str)]) -> SecurityWatch {
        SecurityWatch::new(&properties(pairs))
    }

    const REJECTED: &str =
        "sasl_ssl://127.0.0.1:19098/1: SASL authentication error: {\"status\":\"invalid_token\"}";

    fn latest(watch: &SecurityWatch) -> Option<SecurityFailure> {
        watch.recent_failure(Duration::from_secs(60))
    }

    #[test]
    fn a_token_that_cannot_be_fetched_again_explains_the_rejections_after_it() {
        let watch = watch(OAUTH);
        let rejected = KafkaError::Global(RDKafkaErrorCode::Authentication);
        watch.record(&rejected, REJECTED);
        watch.log(
            RDKafkaLogLevel::Error,
            "OIDC",
            "[thrd:background]: Failed to retrieve OIDC token from \"http://127.0.0.1:19180/kafka/token\": Empty reply from server (-1)",
        );
        let failure = latest(&watch).unwrap();
        assert!(
            matches!(failure.problem, SecurityProblem::TokenUnavailable { .. }),
            "{failure}"
        );
        assert_eq!(
            failure.detail,
            "Failed to retrieve OIDC token from \"http://127.0.0.1:19180/kafka/token\": Empty reply from server (-1)"
        );
        watch.record(&rejected, REJECTED);
        assert!(matches!(
            latest(&watch).unwrap().problem,
            SecurityProblem::TokenUnavailable { .. }
        ));
    }

    #[test]
    fn the_watch_keeps_the_first_failure_until_cleared() {
        let watch = watch(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "PLAIN"),
        ]);
        let error = KafkaError::Global(RDKafkaErrorCode::Authentication);
        for broker in ["a:1", "b:2"] {
            assert!(watch.record(
                &error,
                &format!(
                    "sasl_ssl://{broker}/bootstrap: Authentication failed: Invalid username or password"
                )
            ));
        }
        assert_eq!(watch.explained_failure().unwrap().broker, "a:1");
        watch.clear();
        assert_eq!(latest(&watch), None);
        assert!(!watch.record(
            &KafkaError::Global(RDKafkaErrorCode::AllBrokersDown),
            "1/1 brokers are down"
        ));
        assert_eq!(watch.explained_failure(), None);
    }

    #[test]
    fn a_failure_long_gone_explains_nothing() {
        let watch = watch(OAUTH);
        watch.record(
            &KafkaError::Global(RDKafkaErrorCode::Authentication),
            REJECTED,
        );
        std::thread::sleep(Duration::from_millis(20));
        assert!(watch.recent_failure(Duration::from_millis(10)).is_none());
        assert!(watch.recent_failure(Duration::from_secs(10)).is_some());
    }

    #[test]
    fn a_tls_handshake_broken_once_is_not_yet_a_failure() {
        let watch = watch(&[("security.protocol", "SSL")]);
        let broken = KafkaError::Global(RDKafkaErrorCode::BrokerTransportFailure);
        let reason = "ssl://127.0.0.1:19092/bootstrap: SSL handshake failed: Disconnected: SSL connection closed by peer: connecting to a PLAINTEXT broker listener?";
        watch.record(&broken, reason);
        assert_eq!(watch.explained_failure(), None);
        watch.record(&broken, reason);
        assert_eq!(
            watch.explained_failure().unwrap().problem,
            SecurityProblem::NotTls
        );
    }
}

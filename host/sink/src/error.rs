//! Errors of producing to Kafka, each saying what to do.

use std::time::Duration;

use rdkafka::error::KafkaError;

use crate::failure::SecurityFailure;

/// Why records or positions could not be delivered.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// `bootstrap.servers` is not set.
    #[error(
        "The Kafka properties have no `bootstrap.servers`. Set it in [sink.kafka], for example \"bootstrap.servers\" = \"127.0.0.1:9092\"."
    )]
    MissingBootstrap,
    /// A property Sluice manages itself was set in `[sink.kafka]`.
    #[error("Kafka property `{property}` is managed by Sluice; {hint}")]
    ManagedProperty {
        /// The property.
        property: String,
        /// What to set instead.
        hint: String,
    },
    /// librdkafka refused the properties.
    #[error("Kafka property error: {0}. Check [sink.kafka]; names and values are librdkafka's.")]
    Config(String),
    /// No broker answered within the wait.
    #[error(
        "Kafka at {bootstrap} did not answer within {waited:?} ({detail}). Check that the broker is running and reachable, and `bootstrap.servers` and the security settings in [sink.kafka]."
    )]
    Unreachable {
        /// The configured `bootstrap.servers`.
        bootstrap: String,
        /// How long Sluice waited.
        waited: Duration,
        /// librdkafka's explanation.
        detail: String,
    },
    /// A broker refused to authenticate the client, or TLS with it failed, when
    /// connecting.
    #[error("{0}")]
    Security(Box<SecurityFailure>),
    /// A send or commit failed while the client met a security failure (a revoked
    /// credential, a token endpoint gone): the work is redone, and the pipeline stops if
    /// it goes on failing.
    #[error(
        "Delivery to Kafka stalled. {0} Nothing since the last commit was delivered; the work is redone from there, and the pipeline stops if this goes on."
    )]
    Stalled(Box<SecurityFailure>),
    /// The topic does not exist and the broker does not create it.
    #[error(
        "Kafka topic `{topic}` does not exist at {bootstrap}. Create it, or enable automatic topic creation on the broker."
    )]
    TopicMissing {
        /// The topic.
        topic: String,
        /// The configured `bootstrap.servers`.
        bootstrap: String,
    },
    /// The principal may not see the topic.
    #[error(
        "Kafka at {bootstrap} does not let this pipeline's principal see topic `{topic}` (topic authorization failed). Grant the principal DESCRIBE and WRITE on the topic, or check `sasl.username` in [sink.kafka]."
    )]
    TopicUnauthorized {
        /// The topic.
        topic: String,
        /// The configured `bootstrap.servers`.
        bootstrap: String,
    },
    /// A topic's latest records could not be read back.
    #[error("Cannot read topic `{topic}` at {bootstrap}: {detail}")]
    ReadTopic {
        /// The topic.
        topic: String,
        /// The configured `bootstrap.servers`.
        bootstrap: String,
        /// What went wrong.
        detail: String,
    },
    /// The position topic could not be created or read.
    #[error("Cannot use the position topic `{topic}` at {bootstrap}: {detail}")]
    PositionTopic {
        /// The topic.
        topic: String,
        /// The configured `bootstrap.servers`.
        bootstrap: String,
        /// What went wrong.
        detail: String,
    },
    /// The state changelog topic could not be created or read.
    #[error("Cannot use the state changelog topic `{topic}` at {bootstrap}: {detail}")]
    ChangelogTopic {
        /// The topic.
        topic: String,
        /// The configured `bootstrap.servers`.
        bootstrap: String,
        /// What went wrong.
        detail: String,
    },
    /// A stored position does not parse.
    #[error(
        "The stored position of pipeline `{pipeline}` in topic `{topic}` is corrupt ({detail}). Reset it with `sluice position reset`."
    )]
    CorruptPosition {
        /// The pipeline.
        pipeline: String,
        /// The position topic.
        topic: String,
        /// Why it does not parse.
        detail: String,
    },
    /// Another instance of the pipeline took over its transactional id.
    #[error(
        "Another instance of pipeline `{pipeline}` started with transactional.id `{transactional_id}` and fenced this one; this instance stops so that the two never both produce. Run one instance per pipeline."
    )]
    Fenced {
        /// The pipeline.
        pipeline: String,
        /// Its transactional id.
        transactional_id: String,
    },
    /// The broker refused transactions (for example a cluster without enough brokers for
    /// the transaction log, or an ACL).
    #[error(
        "Kafka at {bootstrap} refused to start transactions for transactional.id `{transactional_id}`: {error}. Check the cluster supports transactions, the principal may use the id, and [sink] transaction_timeout is at most half the broker's transaction.max.timeout.ms; or set delivery = \"at-least-once\"."
    )]
    Transactions {
        /// The configured `bootstrap.servers`.
        bootstrap: String,
        /// The transactional id.
        transactional_id: String,
        /// librdkafka's error.
        error: Box<KafkaError>,
    },
    /// A transaction was aborted; the pipeline redoes the batch from the last committed
    /// position, and stops after repeated aborts.
    #[error(
        "A Kafka transaction was aborted: {error}. Nothing was delivered from it; the batch is redone from the last committed position."
    )]
    Aborted {
        /// librdkafka's error.
        error: Box<KafkaError>,
    },
    /// Delivery failed in at-least-once mode; the pipeline redoes the work from the last
    /// stored position.
    #[error(
        "Delivery to Kafka failed: {error}. The work since the last stored position is redone; records Kafka already has may repeat (at-least-once)."
    )]
    Interrupted {
        /// librdkafka's error.
        error: Box<KafkaError>,
    },
    /// Kafka refused a record for good; redoing the work would meet the same refusal.
    #[error(
        "Pipeline {pipeline} stopped: Kafka at {bootstrap} refused the record made from change row {row} of table version {version} for topic `{topic}` ({bytes} bytes of key, value and headers): {error}. {hint} The position stays before that record."
    )]
    Rejected {
        /// The pipeline.
        pipeline: String,
        /// The record's topic.
        topic: String,
        /// The configured `bootstrap.servers`.
        bootstrap: String,
        /// The Delta version of the record's source row.
        version: u64,
        /// The source row's index among the version's change rows.
        row: u64,
        /// Size of the record's key, value and headers.
        bytes: usize,
        /// What to do.
        hint: &'static str,
        /// librdkafka's error.
        error: Box<KafkaError>,
    },
    /// The broker aborted a transaction that stayed open past Kafka's transaction timeout;
    /// the producer must be created anew, and the work redone.
    #[error(
        "A Kafka transaction stayed open {open_for:?}, longer than Kafka's transaction timeout ({limit:?}), so the broker aborted it; nothing from it was delivered. The pipeline reconnects and redoes the work from the last committed position. If this repeats, raise [sink] transaction_timeout, or lower commit_interval or batch_rows."
    )]
    TransactionTimedOut {
        /// How long the transaction was open.
        open_for: Duration,
        /// Kafka's `transaction.timeout.ms`.
        limit: Duration,
    },
    /// The producer was left in a transactional state it cannot leave (librdkafka's
    /// fatal `INVALID_TXN_STATE`, seen when every broker went away mid-commit): a new
    /// producer with the same transactional id aborts what was open, so the work is
    /// redone from the last committed position.
    #[error(
        "The Kafka producer for {bootstrap} was left unable to end its transaction ({reason}); nothing from that transaction was delivered. The pipeline starts a new producer and redoes the work from the last committed position."
    )]
    ProducerReset {
        /// The configured `bootstrap.servers`.
        bootstrap: String,
        /// librdkafka's explanation.
        reason: String,
    },
    /// The producer hit an error it cannot recover from.
    #[error(
        "The Kafka producer for {bootstrap} failed for good: {reason}. Nothing uncommitted was delivered; fix the cause and start the pipeline again."
    )]
    Fatal {
        /// The configured `bootstrap.servers`.
        bootstrap: String,
        /// librdkafka's explanation.
        reason: String,
    },
    /// A record could not be delivered.
    #[error("Kafka did not accept a record for topic `{topic}` ({bootstrap}): {error}")]
    Delivery {
        /// The record's topic.
        topic: String,
        /// The configured `bootstrap.servers`.
        bootstrap: String,
        /// librdkafka's error.
        error: Box<KafkaError>,
    },
}

impl SinkError {
    /// Whether redoing the work from the last committed position may succeed.
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            SinkError::Aborted { .. }
                | SinkError::Interrupted { .. }
                | SinkError::TransactionTimedOut { .. }
                | SinkError::ProducerReset { .. }
                | SinkError::Stalled(_)
        )
    }

    /// Whether the producer is unusable after this error, so that redoing the work needs
    /// a new connection.
    pub fn needs_reconnect(&self) -> bool {
        matches!(
            self,
            SinkError::TransactionTimedOut { .. } | SinkError::ProducerReset { .. }
        )
    }
}

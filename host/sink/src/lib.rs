//! Produces transformed records to Apache Kafka, and keeps the pipeline's source position
//! in a compacted Kafka topic.
//!
//! Exactly-once (the default): records are sent inside a Kafka transaction that commits
//! together with the position after them, under a `transactional.id` stable per pipeline, so
//! a read_committed consumer sees each batch once or not at all, and a second instance of
//! the same pipeline fences the first (KIP-618's pattern for source connectors).
//!
//! At-least-once: an idempotent producer; the position is written after Kafka
//! acknowledges the records before it, so a crash in between repeats them.
//!
//! The caller decides how much goes into one commit ([`KafkaSink::send`] then
//! [`KafkaSink::commit`]).
//!
//! librdkafka properties from the pipeline's config are passed through as given
//! (`bootstrap.servers`, `security.protocol`, `sasl.*`, `ssl.*`, ...); Spark's and Java's
//! spellings of them are translated. Authentication and TLS failures are told apart from
//! librdkafka's error callbacks and end a connection attempt at once.

mod certificate;
mod changelog;
mod error;
mod failure;
mod fence;
mod latest;
mod position;
mod producer;
mod properties;
mod security;
mod spelling;
#[cfg(test)]
mod test_support;
mod tracker;
mod watch;

pub use changelog::{
    CHANGELOG_DELETE_RETENTION, ChangelogChanges, ChangelogReader, delete_changelog_topic,
};
pub use error::SinkError;
pub use failure::{SecurityFailure, SecurityProblem};
pub use latest::{TopicRecord, read_latest};
pub use position::SourcePosition;
pub use producer::{
    DeliveryMode, KafkaSink, RecordOrigin, SinkConfig, SinkRecord, changelog_reader, check_topics,
    load_position,
};
pub use properties::{
    DEFAULTS as DEFAULT_PROPERTIES, client_properties, is_secret_property, translation_notes,
};
pub use security::connection_summary;

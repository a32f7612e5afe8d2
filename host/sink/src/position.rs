//! The source position record and the compacted topic that holds it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};

use sluice_position::Position;

use crate::error::SinkError;
use crate::properties::bootstrap_of;
use crate::watch::{SecurityWatch, Watched};

/// A pipeline's committed position together with what it belongs to: the table it is a
/// position in and the module that made the records up to it. Stored as JSON under the
/// pipeline's name (`table`, `version`, `row_offset`, `snapshot` when set, `module_digest`,
/// `starts_fresh` when set).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourcePosition {
    /// The table as configured.
    pub table: String,
    /// Where in the table's change feed.
    #[serde(flatten)]
    pub position: Position,
    /// SHA-256 of the transform module that produced the records up to here.
    pub module_digest: String,
    /// Whether the pipeline delivered nothing before this position (a configured start
    /// stored before its first records, or a position reset by hand): the schema of its
    /// version is the pipeline's first, not a change to check against earlier records.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub starts_fresh: bool,
}

/// A consumer context that does not log reaching the end of the partition as an
/// error (it is how reading a topic to its end finishes), and watches for security
/// failures.
pub(crate) struct TopicReader {
    pub(crate) security: SecurityWatch,
    /// What the reader is for, in the words of its error reports.
    pub(crate) role: &'static str,
}

impl ClientContext for TopicReader {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        self.security.log(level, facility, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if error.rdkafka_error_code() != Some(RDKafkaErrorCode::PartitionEOF) {
            self.security.report(&error, reason, self.role);
        }
    }
}

/// The security failure the reader met, if any: serves its error events first.
pub(crate) fn security_failure(consumer: &BaseConsumer<TopicReader>) -> Option<SinkError> {
    if let Some(Err(e)) = consumer.poll(Duration::ZERO) {
        tracing::debug!(error = %e, role = consumer.context().role, "A topic reader reported an error.");
    }
    let failure = consumer.context().security.explained_failure()?;
    Some(SinkError::Security(Box::new(failure)))
}

impl ConsumerContext for TopicReader {}

/// A client config holding exactly these properties.
pub(crate) fn client_config(properties: &BTreeMap<String, String>) -> ClientConfig {
    let mut config = ClientConfig::new();
    for (name, value) in properties {
        config.set(name, value);
    }
    config
}

fn topic_error(properties: &BTreeMap<String, String>, topic: &str, detail: String) -> SinkError {
    SinkError::PositionTopic {
        topic: topic.to_string(),
        bootstrap: bootstrap_of(properties),
        detail,
    }
}

/// Creates the compacted position topic if it does not exist.
pub async fn ensure_topic(
    properties: &BTreeMap<String, String>,
    topic: &str,
    wait: Duration,
) -> Result<(), SinkError> {
    ensure_compacted_topic(
        properties,
        topic,
        wait,
        &[("min.compaction.lag.ms", "60000")],
        |detail| topic_error(properties, topic, detail),
    )
    .await
}

/// Creates a compacted topic of one partition with `settings` if it does not exist.
pub(crate) async fn ensure_compacted_topic(
    properties: &BTreeMap<String, String>,
    topic: &str,
    wait: Duration,
    settings: &[(&str, &str)],
    fail: impl Fn(String) -> SinkError,
) -> Result<(), SinkError> {
    let config = client_config(properties);
    let admin: AdminClient<Watched> = config
        .create_with_context(Watched {
            security: SecurityWatch::new(properties),
            client: "position topic admin",
        })
        .map_err(|e| fail(e.to_string()))?;
    // Replication -1 takes the broker's default.replication.factor.
    let mut new_topic =
        NewTopic::new(topic, 1, TopicReplication::Fixed(-1)).set("cleanup.policy", "compact");
    for (name, value) in settings {
        new_topic = new_topic.set(name, value);
    }
    let results = admin
        .create_topics(
            [&new_topic],
            &AdminOptions::new().operation_timeout(Some(wait)),
        )
        .await
        .map_err(|e| fail(e.to_string()))?;
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((_, code)) => {
                return Err(fail(format!(
                    "creating it failed ({code}); create it yourself as a compacted topic with one partition"
                )));
            }
        }
    }
    Ok(())
}

/// Whether `topic` exists; a reader that only looks must not create it.
pub(crate) fn topic_exists(
    consumer: &BaseConsumer<TopicReader>,
    topic: &str,
    deadline: Instant,
    fail: impl Fn(String) -> SinkError,
) -> Result<bool, SinkError> {
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        match consumer.fetch_metadata(Some(topic), remaining.min(Duration::from_millis(500))) {
            Ok(metadata) => {
                return Ok(metadata.topics().iter().any(|t| {
                    t.name() == topic && t.error().is_none() && !t.partitions().is_empty()
                }));
            }
            Err(e) => {
                if let Some(failure) = security_failure(consumer) {
                    return Err(failure);
                }
                if Instant::now() >= deadline {
                    return Err(fail(format!("no broker answered ({e})")));
                }
            }
        }
    }
}

/// Where reading the position topic stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadEnd {
    /// The end of the partition: every transaction resolved. For an instance that has
    /// just fenced its predecessors, whose open transaction is being aborted.
    End,
    /// The last stable offset as of the start: what is decided now, without waiting for
    /// a running instance's open transaction.
    Stable,
}

/// Reads the last committed position stored under `pipeline`, as a read_committed
/// consumer; blocking.
pub fn read_position(
    consumer_properties: &BTreeMap<String, String>,
    topic: &str,
    pipeline: &str,
    wait: Duration,
    end: ReadEnd,
) -> Result<Option<SourcePosition>, SinkError> {
    let fail = |detail: String| topic_error(consumer_properties, topic, detail);
    let mut config = client_config(consumer_properties);
    let consumer: BaseConsumer<TopicReader> = config
        .set("group.id", format!("sluice-position-reader-{pipeline}"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true")
        // The end of the partition is how reading finishes: a fetch that finds nothing
        // new must answer at once, not after the default half second.
        .set("fetch.wait.max.ms", "10")
        .create_with_context(TopicReader {
            security: SecurityWatch::new(consumer_properties),
            role: "position reader",
        })
        .map_err(|e| fail(e.to_string()))?;
    let deadline = Instant::now() + wait;
    if end == ReadEnd::Stable && !topic_exists(&consumer, topic, deadline, fail)? {
        return Ok(None);
    }
    // A topic created a moment ago may not be in every broker's metadata yet.
    let (start, stable_end) = loop {
        match consumer.fetch_watermarks(topic, 0, Duration::from_secs(2).min(wait)) {
            Ok(watermarks) => break watermarks,
            Err(e) => {
                if let Some(failure) = security_failure(&consumer) {
                    return Err(failure);
                }
                if Instant::now() > deadline {
                    return Err(fail(e.to_string()));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    };
    if stable_end == 0 {
        // Nothing was ever written: no position, and nothing to wait for.
        return Ok(None);
    }
    // From the offset the watermarks give: a logical offset (`Beginning`) makes
    // librdkafka look it up first, which costs about half a second per start.
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Offset(start))
        .map_err(|e| fail(e.to_string()))?;
    consumer
        .assign(&assignment)
        .map_err(|e| fail(e.to_string()))?;
    let mut last = None;
    loop {
        let next = consumer
            .position()
            .ok()
            .and_then(|p| p.find_partition(topic, 0).map(|p| p.offset()));
        let at_stable_end =
            matches!(next, Some(Offset::Offset(n)) if n >= stable_end) || stable_end == 0;
        if end == ReadEnd::Stable && at_stable_end {
            break;
        }
        if Instant::now() > deadline {
            return Err(fail(format!(
                "it could not be read to offset {stable_end} within {wait:?}"
            )));
        }
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(_))) => break,
            Some(Err(e)) => return Err(fail(e.to_string())),
            Some(Ok(message)) if message.key() == Some(pipeline.as_bytes()) => {
                last = message.payload().map(<[u8]>::to_vec);
            }
            Some(Ok(_)) => {}
        }
    }
    last.map(|bytes| {
        serde_json::from_slice(&bytes).map_err(|e| SinkError::CorruptPosition {
            pipeline: pipeline.to_string(),
            topic: topic.to_string(),
            detail: e.to_string(),
        })
    })
    .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_json_keeps_its_fields() {
        let stored =
            r#"{"table":"/t","version":4,"row_offset":2,"module_digest":"ab","snapshot":true}"#;
        let position: SourcePosition = serde_json::from_str(stored).unwrap();
        assert_eq!(
            position.position,
            Position {
                version: 4,
                row_offset: 2,
                snapshot: true
            }
        );
        let written = serde_json::to_value(&position).unwrap();
        assert_eq!(
            written,
            serde_json::from_str::<serde_json::Value>(stored).unwrap()
        );
        let changes = r#"{"table":"/t","version":4,"row_offset":0,"module_digest":"ab"}"#;
        let position: SourcePosition = serde_json::from_str(changes).unwrap();
        assert_eq!(position.position, Position::at_version(4));
    }
}

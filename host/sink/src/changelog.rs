//! A pipeline's state changelog: the compacted topic its state changes are committed
//! to (one partition: one writer, changes in commit order), and reading it back.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use crate::error::SinkError;
use crate::position::{TopicReader, client_config, ensure_compacted_topic, security_failure};
use crate::properties::bootstrap_of;
use crate::watch::{SecurityWatch, Watched};

/// How long removals stay in the changelog before compaction drops them: a node whose
/// copy is older must rebuild it from the whole changelog.
pub const CHANGELOG_DELETE_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Changes read back: a key and its value, `None` when removed.
pub type ChangelogChanges = Vec<(Vec<u8>, Option<Vec<u8>>)>;

fn changelog_error(
    properties: &BTreeMap<String, String>,
    topic: &str,
    detail: String,
) -> SinkError {
    SinkError::ChangelogTopic {
        topic: topic.to_string(),
        bootstrap: bootstrap_of(properties),
        detail,
    }
}

/// Creates the changelog topic if it does not exist.
pub(crate) async fn ensure_changelog_topic(
    properties: &BTreeMap<String, String>,
    topic: &str,
    wait: Duration,
) -> Result<(), SinkError> {
    let retention = CHANGELOG_DELETE_RETENTION.as_millis().to_string();
    ensure_compacted_topic(
        properties,
        topic,
        wait,
        &[("delete.retention.ms", retention.as_str())],
        |detail| changelog_error(properties, topic, detail),
    )
    .await
}

/// Deletes a changelog topic (a pipeline deleted, or its state reset); a topic that
/// does not exist is not an error.
pub async fn delete_changelog_topic(
    properties: &BTreeMap<String, String>,
    topic: &str,
    wait: Duration,
) -> Result<(), SinkError> {
    let fail = |detail: String| changelog_error(properties, topic, detail);
    let admin: AdminClient<Watched> = client_config(properties)
        .create_with_context(Watched {
            security: SecurityWatch::new(properties),
            client: "state changelog admin",
        })
        .map_err(|e| fail(e.to_string()))?;
    let results = admin
        .delete_topics(&[topic], &AdminOptions::new().operation_timeout(Some(wait)))
        .await
        .map_err(|e| fail(e.to_string()))?;
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::UnknownTopicOrPartition)) => {}
            Err((_, code)) => {
                return Err(fail(format!(
                    "deleting it failed ({code}); delete it yourself, or give the pipeline's principal the right to delete it"
                )));
            }
        }
    }
    Ok(())
}

/// Reads a changelog topic as a read_committed consumer; blocking.
pub struct ChangelogReader {
    consumer: BaseConsumer<TopicReader>,
    properties: BTreeMap<String, String>,
    topic: String,
    wait: Duration,
}

/// Changes handed on at a time while reading.
const CHUNK: usize = 10_000;

impl ChangelogReader {
    /// A reader of `topic` with the connection settings of `consumer_properties`,
    /// waiting at most `wait` for the cluster.
    pub fn new(
        consumer_properties: &BTreeMap<String, String>,
        topic: &str,
        wait: Duration,
    ) -> Result<ChangelogReader, SinkError> {
        let fail = |detail: String| changelog_error(consumer_properties, topic, detail);
        let consumer: BaseConsumer<TopicReader> = client_config(consumer_properties)
            .set("group.id", format!("sluice-state-reader-{topic}"))
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_committed")
            .set("enable.partition.eof", "true")
            .set("fetch.wait.max.ms", "10")
            .create_with_context(TopicReader {
                security: crate::watch::SecurityWatch::new(consumer_properties),
                role: "state changelog reader",
            })
            .map_err(|e| fail(e.to_string()))?;
        Ok(ChangelogReader {
            consumer,
            properties: consumer_properties.clone(),
            topic: topic.to_string(),
            wait,
        })
    }

    /// The topic's name.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    fn fail(&self, detail: String) -> SinkError {
        changelog_error(&self.properties, &self.topic, detail)
    }

    /// The first offset in the topic and the offset after its last record.
    pub fn bounds(&self) -> Result<(u64, u64), SinkError> {
        let deadline = Instant::now() + self.wait;
        loop {
            match self.consumer.fetch_watermarks(
                &self.topic,
                0,
                Duration::from_secs(2).min(self.wait),
            ) {
                Ok((low, high)) => return Ok((low.max(0) as u64, high.max(0) as u64)),
                Err(e) => {
                    if let Some(failure) = security_failure(&self.consumer) {
                        return Err(failure);
                    }
                    if Instant::now() > deadline {
                        return Err(self.fail(e.to_string()));
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }

    /// Reads the committed changes from offset `from` until offset `end`, handing them
    /// to `apply` some at a time; waits (at most the reader's wait) for a transaction
    /// still open before `end` to end.
    pub fn read(
        &self,
        from: u64,
        end: u64,
        apply: &mut dyn FnMut(ChangelogChanges) -> Result<(), String>,
    ) -> Result<(), SinkError> {
        if from >= end {
            return Ok(());
        }
        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset(&self.topic, 0, Offset::Offset(from as i64))
            .map_err(|e| self.fail(e.to_string()))?;
        self.consumer
            .assign(&assignment)
            .map_err(|e| self.fail(e.to_string()))?;
        let mut chunk = Vec::new();
        let mut idle_since = Instant::now();
        // The consumer's position is asked only when no message is waiting: asking per
        // message costs more than reading it. Only the position tells that the reader
        // passed `end` when the last offsets are transaction markers, which read_committed
        // consumers never see.
        let passed_end = || {
            let next = self
                .consumer
                .position()
                .ok()
                .and_then(|p| p.find_partition(&self.topic, 0).map(|p| p.offset()));
            matches!(next, Some(Offset::Offset(n)) if n as u64 >= end)
        };
        loop {
            if idle_since.elapsed() > self.wait {
                return Err(self.fail(format!(
                    "it could not be read to offset {end} within {:?}; a transaction may be open on it",
                    self.wait
                )));
            }
            match self.consumer.poll(Duration::from_millis(100)) {
                None | Some(Err(KafkaError::PartitionEOF(_))) => {
                    if passed_end() {
                        break;
                    }
                }
                Some(Err(e)) => return Err(self.fail(e.to_string())),
                Some(Ok(message)) => {
                    idle_since = Instant::now();
                    if message.offset() as u64 >= end {
                        break;
                    }
                    let Some(key) = message.key() else { continue };
                    chunk.push((key.to_vec(), message.payload().map(<[u8]>::to_vec)));
                    if chunk.len() >= CHUNK {
                        apply(std::mem::take(&mut chunk)).map_err(|e| self.fail(e))?;
                    }
                    if message.offset() as u64 + 1 >= end {
                        break;
                    }
                }
            }
        }
        if !chunk.is_empty() {
            apply(chunk).map_err(|e| self.fail(e))?;
        }
        Ok(())
    }
}

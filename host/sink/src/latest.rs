//! Reads the latest records of a topic without joining a group or committing offsets:
//! how the service shows a pipeline's dead letters.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Message, Timestamp};
use rdkafka::{Offset, TopicPartitionList};

use crate::error::SinkError;
use crate::position::{TopicReader, client_config, security_failure};
use crate::properties::{bootstrap_of, client_properties, consumer_properties};
use crate::watch::SecurityWatch;

/// One record read back from a topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicRecord {
    /// Its partition.
    pub partition: i32,
    /// Its offset in the partition.
    pub offset: i64,
    /// Its timestamp, in milliseconds since the epoch, when it has one.
    pub timestamp_ms: Option<i64>,
    /// Its key.
    pub key: Option<Vec<u8>>,
    /// Its value; `None` for a tombstone.
    pub value: Option<Vec<u8>>,
}

/// Reads up to `limit` of the latest committed records of `topic` (the last `limit` of
/// each partition, then the newest `limit` of those by timestamp), newest first, as a
/// read_committed consumer; blocking. A topic that does not exist has no records.
pub fn read_latest(
    properties: &BTreeMap<String, String>,
    topic: &str,
    limit: usize,
    wait: Duration,
) -> Result<Vec<TopicRecord>, SinkError> {
    let properties = consumer_properties(&client_properties(properties)?);
    let fail = |detail: String| SinkError::ReadTopic {
        topic: topic.to_string(),
        bootstrap: bootstrap_of(&properties),
        detail,
    };
    let consumer: BaseConsumer<TopicReader> = client_config(&properties)
        .set("group.id", "sluice-topic-reader")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true")
        .set("fetch.wait.max.ms", "10")
        .create_with_context(TopicReader {
            security: SecurityWatch::new(&properties),
            role: "topic reader",
        })
        .map_err(|e| fail(e.to_string()))?;
    let deadline = Instant::now() + wait;
    let metadata = match consumer.fetch_metadata(Some(topic), wait) {
        Ok(metadata) => metadata,
        Err(e) => {
            return Err(security_failure(&consumer)
                .unwrap_or_else(|| fail(format!("no broker answered ({e})"))));
        }
    };
    let Some(partitions) = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic && t.error().is_none())
        .map(|t| t.partitions().iter().map(|p| p.id()).collect::<Vec<_>>())
    else {
        return Ok(Vec::new());
    };
    let mut assignment = TopicPartitionList::new();
    let mut unread = 0;
    for partition in partitions {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let (low, high) = consumer
            .fetch_watermarks(topic, partition, remaining)
            .map_err(|e| fail(e.to_string()))?;
        if high > low {
            // Transaction markers take offsets too, so a few more letters than `limit`
            // may be left unread; the newest are always read.
            let from = low.max(high - limit as i64);
            assignment
                .add_partition_offset(topic, partition, Offset::Offset(from))
                .map_err(|e| fail(e.to_string()))?;
            unread += 1;
        }
    }
    if unread == 0 {
        return Ok(Vec::new());
    }
    consumer
        .assign(&assignment)
        .map_err(|e| fail(e.to_string()))?;
    let mut records = Vec::new();
    // A partition reports its end again after more records arrive: count each once.
    let mut ended = std::collections::HashSet::new();
    while ended.len() < unread {
        if Instant::now() > deadline {
            return Err(fail(format!(
                "its latest records could not be read within {wait:?}"
            )));
        }
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(partition))) => {
                ended.insert(partition);
            }
            Some(Err(e)) => return Err(fail(e.to_string())),
            Some(Ok(message)) => records.push(TopicRecord {
                partition: message.partition(),
                offset: message.offset(),
                timestamp_ms: match message.timestamp() {
                    Timestamp::NotAvailable => None,
                    Timestamp::CreateTime(t) | Timestamp::LogAppendTime(t) => Some(t),
                },
                key: message.key().map(<[u8]>::to_vec),
                value: message.payload().map(<[u8]>::to_vec),
            }),
        }
    }
    Ok(newest(records, limit))
}

/// The newest `limit` records, newest first: by timestamp, then by offset.
fn newest(mut records: Vec<TopicRecord>, limit: usize) -> Vec<TopicRecord> {
    records.sort_by(|a, b| {
        (b.timestamp_ms, b.offset, b.partition).cmp(&(a.timestamp_ms, a.offset, a.partition))
    });
    records.truncate(limit);
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(partition: i32, offset: i64, timestamp_ms: i64) -> TopicRecord {
        TopicRecord {
            partition,
            offset,
            timestamp_ms: Some(timestamp_ms),
            key: None,
            value: None,
        }
    }

    #[test]
    fn the_newest_records_come_first_across_partitions() {
        let records = vec![
            record(0, 7, 100),
            record(1, 3, 300),
            record(0, 8, 200),
            record(1, 4, 300),
        ];
        let kept: Vec<(i32, i64)> = newest(records, 3)
            .iter()
            .map(|r| (r.partition, r.offset))
            .collect();
        assert_eq!(kept, [(1, 4), (1, 3), (0, 8)]);
    }
}

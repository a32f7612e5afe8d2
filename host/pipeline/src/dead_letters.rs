//! A pipeline's latest dead letters, read back from its dead-letter topic.
//!
//! Only letters of the pipeline's own table are shown: a tenant may name any topic as
//! its dead-letter topic, and without `topic_prefix` or Kafka ACLs that could be
//! another tenant's; what is shown is then never more than the tenant's own pipeline
//! may read from the table itself.

use std::time::Duration;

use serde::Serialize;
use sluice_sink::{SinkError, TopicRecord};

use crate::config::{ErrorPolicy, PipelineConfig};
use crate::destination::Destination;

/// Most letters one read returns.
pub const MAX_LETTERS: usize = 500;

/// Longest reading the letters may take.
const READ_WAIT: Duration = Duration::from_secs(15);

/// A pipeline's latest dead letters.
#[derive(Clone, Debug, Serialize)]
pub struct DeadLetters {
    /// Its dead-letter topic; unset when the pipeline sends no dead letters.
    pub topic: Option<String>,
    /// Newest first.
    pub letters: Vec<DeadLetter>,
    /// Records read from the topic that are not letters of this pipeline's table.
    pub skipped: usize,
}

/// One dead letter: where it is in the topic, and what it says.
#[derive(Clone, Debug, Serialize)]
pub struct DeadLetter {
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// When it was produced, in milliseconds since the epoch.
    pub timestamp_ms: Option<i64>,
    /// Its key (`<table>@<version>#<row>`), as text.
    pub key: Option<String>,
    /// The letter as Sluice writes it: table, version, row, change type, commit time,
    /// module, error and the row's data.
    pub letter: serde_json::Value,
}

/// Up to `limit` (at most [`MAX_LETTERS`]) of the pipeline's latest dead letters from
/// `destination`. Blocking: it opens a consumer.
pub fn read_dead_letters(
    destination: &dyn Destination,
    config: &PipelineConfig,
    limit: usize,
) -> Result<DeadLetters, SinkError> {
    let topic = match (
        &config.transform.on_error,
        &config.transform.dead_letter_topic,
    ) {
        (ErrorPolicy::DeadLetter, Some(topic)) => topic.clone(),
        _ => {
            return Ok(DeadLetters {
                topic: None,
                letters: Vec::new(),
                skipped: 0,
            });
        }
    };
    let limit = limit.clamp(1, MAX_LETTERS);
    let records = destination.latest_records(config, &topic, limit, READ_WAIT)?;
    let (letters, skipped) = letters_of(records, &config.source.table);
    Ok(DeadLetters {
        topic: Some(topic),
        letters,
        skipped,
    })
}

/// The records that are Sluice's letters for `table`, and how many others there were.
fn letters_of(records: Vec<TopicRecord>, table: &str) -> (Vec<DeadLetter>, usize) {
    let mut letters = Vec::new();
    let mut skipped = 0;
    for record in records {
        let letter: Option<serde_json::Value> = record
            .value
            .as_deref()
            .and_then(|value| serde_json::from_slice(value).ok());
        match letter.filter(|l| l["table"] == table) {
            Some(letter) => letters.push(DeadLetter {
                partition: record.partition,
                offset: record.offset,
                timestamp_ms: record.timestamp_ms,
                key: record.key.map(|k| String::from_utf8_lossy(&k).into_owned()),
                letter,
            }),
            None => skipped += 1,
        }
    }
    (letters, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(offset: i64, value: Option<&str>) -> TopicRecord {
        TopicRecord {
            partition: 0,
            offset,
            timestamp_ms: Some(1),
            key: Some(b"/data/deals@3#17".to_vec()),
            value: value.map(|v| v.as_bytes().to_vec()),
        }
    }

    #[test]
    fn only_letters_of_the_pipelines_table_are_shown() {
        let records = vec![
            record(
                0,
                Some(r#"{"table":"/data/deals","version":3,"row":17,"error":"x"}"#),
            ),
            record(1, Some(r#"{"table":"/data/other","version":1,"row":2}"#)),
            record(2, Some("not json")),
            record(3, None),
            record(4, Some(r#"["/data/deals"]"#)),
        ];
        let (letters, skipped) = letters_of(records, "/data/deals");
        assert_eq!(skipped, 4);
        assert_eq!(letters.len(), 1);
        assert_eq!(letters[0].offset, 0);
        assert_eq!(letters[0].letter["row"], 17);
        assert_eq!(letters[0].key.as_deref(), Some("/data/deals@3#17"));
    }
}

//! A pipeline's latest dead letters, read back from its dead-letter topic.

use std::time::Duration;

use serde::Serialize;

use super::Service;
use crate::auth::Caller;
use crate::error::ServiceError;

/// Most letters one request reads.
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
    /// The letter (table, version, row, change type, error, the row's data) when it is
    /// JSON, as Sluice writes it.
    pub letter: Option<serde_json::Value>,
    /// The value as text when it is not JSON.
    pub raw: Option<String>,
}

impl Service {
    /// Up to `limit` (at most [`MAX_LETTERS`]) of the pipeline's latest dead letters.
    pub async fn dead_letters(
        &self,
        caller: &Caller,
        tenant: &str,
        name: &str,
        limit: usize,
    ) -> Result<DeadLetters, ServiceError> {
        caller.may_act_for(tenant)?;
        let entry = self.found(|| self.entry(tenant, name)).await?;
        let definition = entry.definition();
        let config = self.pipeline_config(tenant, name, &definition.config, &definition.module)?;
        let Some(topic) = config.transform.dead_letter_topic.clone() else {
            return Ok(DeadLetters {
                topic: None,
                letters: Vec::new(),
            });
        };
        let properties = config.kafka_properties();
        let limit = limit.clamp(1, MAX_LETTERS);
        let read = topic.clone();
        let records = tokio::task::spawn_blocking(move || {
            sluice_sink::read_latest(&properties, &read, limit, READ_WAIT)
        })
        .await
        .expect("reading dead letters does not panic")
        .map_err(|e| {
            ServiceError::KafkaUnavailable(format!(
                "The dead letters of pipeline {name} could not be read: {e}"
            ))
        })?;
        let letters = records
            .into_iter()
            .map(|record| {
                let value = record.value.unwrap_or_default();
                let letter = serde_json::from_slice(&value).ok();
                DeadLetter {
                    partition: record.partition,
                    offset: record.offset,
                    timestamp_ms: record.timestamp_ms,
                    key: record.key.map(|k| String::from_utf8_lossy(&k).into_owned()),
                    raw: letter
                        .is_none()
                        .then(|| String::from_utf8_lossy(&value).into_owned()),
                    letter,
                }
            })
            .collect();
        Ok(DeadLetters {
            topic: Some(topic),
            letters,
        })
    }
}

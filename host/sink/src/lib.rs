//! Produces transformed records to Apache Kafka.
//!
//! librdkafka properties from the pipeline's config are passed through as given
//! (`bootstrap.servers`, `security.protocol`, `sasl.*`, `ssl.*`, ...). The producer is
//! idempotent with `acks=all` unless the config says otherwise.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer};

/// Properties Sluice sets unless the config sets them.
const DEFAULTS: &[(&str, &str)] = &[
    ("enable.idempotence", "true"),
    ("acks", "all"),
    ("linger.ms", "20"),
    ("compression.type", "lz4"),
];

/// Property names whose values are secrets and never appear in messages.
const SECRET_PROPERTIES: &[&str] = &[
    "sasl.password",
    "sasl.jaas.config",
    "ssl.key.password",
    "ssl.keystore.password",
];

/// A record to produce.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SinkRecord {
    /// Topic; the sink's topic when absent.
    pub topic: Option<String>,
    /// Key bytes.
    pub key: Option<Vec<u8>>,
    /// Value bytes; absent makes a tombstone.
    pub value: Option<Vec<u8>>,
    /// Headers, in order.
    pub headers: Vec<(String, Vec<u8>)>,
}

/// Why records could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// `bootstrap.servers` is not set.
    #[error(
        "The Kafka properties have no `bootstrap.servers`. Set it in [sink.kafka], for example \"bootstrap.servers\" = \"127.0.0.1:9092\"."
    )]
    MissingBootstrap,
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
    /// A record could not be delivered.
    #[error("Kafka did not accept a record for topic `{topic}` ({bootstrap}): {error}")]
    Delivery {
        /// The record's topic.
        topic: String,
        /// The configured `bootstrap.servers`.
        bootstrap: String,
        /// librdkafka's error.
        error: KafkaError,
    },
}

/// A Kafka producer for one pipeline.
pub struct KafkaSink {
    producer: FutureProducer,
    topic: String,
    bootstrap: String,
}

impl KafkaSink {
    /// Creates the producer and waits up to `wait` for the cluster to answer with the
    /// topic's metadata.
    pub async fn connect(
        properties: &BTreeMap<String, String>,
        topic: &str,
        wait: Duration,
    ) -> Result<KafkaSink, SinkError> {
        let bootstrap = properties
            .get("bootstrap.servers")
            .cloned()
            .ok_or(SinkError::MissingBootstrap)?;
        let mut config = ClientConfig::new();
        for (name, value) in DEFAULTS {
            config.set(*name, *value);
        }
        for (name, value) in properties {
            config.set(name, value);
        }
        let producer: FutureProducer = config
            .create()
            .map_err(|e| SinkError::Config(redact(&e.to_string(), properties)))?;
        let probe = producer.clone();
        let probe_topic = topic.to_string();
        let found = tokio::task::spawn_blocking(move || topic_ready(&probe, &probe_topic, wait))
            .await
            .expect("the metadata probe does not panic");
        match found {
            Ok(true) => {}
            Ok(false) => {
                return Err(SinkError::TopicMissing {
                    topic: topic.to_string(),
                    bootstrap,
                });
            }
            Err(detail) => {
                return Err(SinkError::Unreachable {
                    bootstrap,
                    waited: wait,
                    detail,
                });
            }
        }
        tracing::info!(%bootstrap, topic, "Connected to Kafka.");
        Ok(KafkaSink {
            producer,
            topic: topic.to_string(),
            bootstrap,
        })
    }

    /// The default topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Produces `records` in order and waits until Kafka has acknowledged every one.
    pub async fn send_all(&self, records: &[SinkRecord]) -> Result<(), SinkError> {
        let mut deliveries: Vec<(&str, DeliveryFuture)> = Vec::with_capacity(records.len());
        for record in records {
            let topic = record.topic.as_deref().unwrap_or(&self.topic);
            deliveries.push((topic, self.enqueue(topic, record).await?));
        }
        for (topic, delivery) in deliveries {
            let outcome = delivery
                .await
                .map_err(|_| self.delivery_error(topic, KafkaError::Canceled))?;
            outcome.map_err(|(error, _)| self.delivery_error(topic, error))?;
        }
        Ok(())
    }

    async fn enqueue(&self, topic: &str, record: &SinkRecord) -> Result<DeliveryFuture, SinkError> {
        let headers = record
            .headers
            .iter()
            .fold(OwnedHeaders::new(), |headers, (key, value)| {
                headers.insert(Header {
                    key,
                    value: Some(value),
                })
            });
        let mut future_record: FutureRecord<'_, [u8], [u8]> =
            FutureRecord::to(topic).headers(headers);
        if let Some(key) = &record.key {
            future_record = future_record.key(key);
        }
        if let Some(value) = &record.value {
            future_record = future_record.payload(value);
        }
        loop {
            match self.producer.send_result(future_record) {
                Ok(delivery) => return Ok(delivery),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    future_record = back;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err((error, _)) => return Err(self.delivery_error(topic, error)),
            }
        }
    }

    fn delivery_error(&self, topic: &str, error: KafkaError) -> SinkError {
        SinkError::Delivery {
            topic: topic.to_string(),
            bootstrap: self.bootstrap.clone(),
            error,
        }
    }
}

/// Waits up to `wait` for metadata that shows `topic` with partitions: `Ok(false)` if
/// brokers answer but the topic never appears (a producer's metadata request creates it
/// where the broker allows), `Err` if no broker answers.
fn topic_ready(producer: &FutureProducer, topic: &str, wait: Duration) -> Result<bool, String> {
    let deadline = std::time::Instant::now() + wait;
    let mut brokers_answered = false;
    loop {
        let remaining = deadline.saturating_duration_since(std::time::Instant::now());
        match producer
            .client()
            .fetch_metadata(Some(topic), remaining.max(Duration::from_millis(100)))
        {
            Ok(metadata) => {
                brokers_answered |= !metadata.brokers().is_empty();
                let ready = metadata.topics().iter().any(|t| {
                    t.name() == topic && t.error().is_none() && !t.partitions().is_empty()
                });
                if ready {
                    return Ok(true);
                }
            }
            Err(e) if !brokers_answered && std::time::Instant::now() >= deadline => {
                return Err(e.to_string());
            }
            Err(_) => {}
        }
        if std::time::Instant::now() >= deadline {
            return if brokers_answered {
                Ok(false)
            } else {
                Err("no broker answered".to_string())
            };
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Removes secret property values from a message.
fn redact(message: &str, properties: &BTreeMap<String, String>) -> String {
    SECRET_PROPERTIES
        .iter()
        .filter_map(|name| properties.get(*name))
        .filter(|secret| !secret.is_empty())
        .fold(message.to_string(), |text, secret| {
            text.replace(secret.as_str(), "***")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_from_messages() {
        let properties = BTreeMap::from([("sasl.password".to_string(), "hunter2".to_string())]);
        assert_eq!(redact("bad value hunter2", &properties), "bad value ***");
    }

    #[tokio::test]
    async fn missing_bootstrap_servers_is_named() {
        let err = KafkaSink::connect(&BTreeMap::new(), "t", Duration::from_secs(1))
            .await
            .err()
            .unwrap();
        assert!(matches!(err, SinkError::MissingBootstrap), "{err}");
    }

    #[tokio::test]
    async fn an_unreachable_broker_is_named_after_a_bounded_wait() {
        let properties =
            BTreeMap::from([("bootstrap.servers".to_string(), "127.0.0.1:1".to_string())]);
        let err = KafkaSink::connect(&properties, "t", Duration::from_secs(2))
            .await
            .err()
            .unwrap();
        assert!(err.to_string().contains("127.0.0.1:1"), "{err}");
        assert!(matches!(err, SinkError::Unreachable { .. }), "{err}");
    }
}

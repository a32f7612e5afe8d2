//! The pipeline's Kafka producer: batches of records with their source position.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer};

use crate::error::SinkError;
use crate::position::{self, ReadEnd, SourcePosition};
use crate::properties::{DEFAULTS, consumer_properties, redact};

/// Delivery errors that redoing the batch cannot cure; every other delivery error in a
/// transaction aborts it, and the batch is redone.
const PERMANENT: &[RDKafkaErrorCode] = &[
    RDKafkaErrorCode::MessageSizeTooLarge,
    RDKafkaErrorCode::InvalidMessageSize,
    RDKafkaErrorCode::InvalidMessage,
    RDKafkaErrorCode::InvalidRecord,
    RDKafkaErrorCode::TopicAuthorizationFailed,
    RDKafkaErrorCode::ClusterAuthorizationFailed,
    RDKafkaErrorCode::TransactionalIdAuthorizationFailed,
    RDKafkaErrorCode::UnknownTopic,
];

fn is_permanent(error: &KafkaError) -> bool {
    error
        .rdkafka_error_code()
        .is_some_and(|code| PERMANENT.contains(&code))
}

/// How records reach Kafka.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Records and position in one transaction per batch.
    ExactlyOnce,
    /// Idempotent producer; the position follows the acknowledged records.
    AtLeastOnce,
}

/// A pipeline's Kafka settings.
#[derive(Clone, Debug)]
pub struct SinkConfig {
    /// The pipeline's name: the position's key and the base of its transactional id.
    pub pipeline: String,
    /// librdkafka properties, as configured.
    pub properties: BTreeMap<String, String>,
    /// Topic for records that name none.
    pub topic: String,
    /// The compacted topic holding positions.
    pub position_topic: String,
    /// Exactly-once or at-least-once.
    pub delivery: Delivery,
    /// How long to wait for the cluster at start-up.
    pub connect_timeout: Duration,
    /// Longest a commit (or an acknowledgement wait) may take.
    pub transaction_timeout: Duration,
}

impl SinkConfig {
    /// The transactional id used in exactly-once mode.
    pub fn transactional_id(&self) -> String {
        format!("sluice-{}", self.pipeline)
    }
}

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

/// A Kafka producer for one pipeline.
pub struct KafkaSink {
    producer: FutureProducer,
    config: SinkConfig,
    bootstrap: String,
}

impl KafkaSink {
    /// Creates the producer, waits up to `connect_timeout` for the cluster, makes sure
    /// the position topic exists, and in exactly-once mode initialises transactions,
    /// which fences any older instance of the same pipeline.
    pub async fn connect(config: SinkConfig) -> Result<KafkaSink, SinkError> {
        let bootstrap = config
            .properties
            .get("bootstrap.servers")
            .cloned()
            .ok_or(SinkError::MissingBootstrap)?;
        if config.properties.contains_key("transactional.id") {
            return Err(SinkError::ManagedProperty {
                property: "transactional.id".into(),
                hint: format!(
                    "it is `{}` for this pipeline (derived from [pipeline] name).",
                    config.transactional_id()
                ),
            });
        }
        let mut client = ClientConfig::new();
        for (name, value) in DEFAULTS {
            client.set(*name, *value);
        }
        for (name, value) in &config.properties {
            client.set(name, value);
        }
        if config.delivery == Delivery::ExactlyOnce {
            client
                .set("transactional.id", config.transactional_id())
                .set(
                    "transaction.timeout.ms",
                    (config.transaction_timeout.as_millis() * 2).to_string(),
                );
        }
        let producer: FutureProducer = client
            .create()
            .map_err(|e| SinkError::Config(redact(&e.to_string(), &config.properties)))?;

        let probe = producer.clone();
        let topic = config.topic.clone();
        let wait = config.connect_timeout;
        let found = tokio::task::spawn_blocking(move || topic_ready(&probe, &topic, wait))
            .await
            .expect("the metadata probe does not panic");
        match found {
            Ok(true) => {}
            Ok(false) => {
                return Err(SinkError::TopicMissing {
                    topic: config.topic.clone(),
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
        position::ensure_topic(&config.properties, &config.position_topic, wait).await?;

        if config.delivery == Delivery::ExactlyOnce {
            let init = producer.clone();
            tokio::task::spawn_blocking(move || init.init_transactions(wait))
                .await
                .expect("init_transactions does not panic")
                .map_err(|error| SinkError::Transactions {
                    bootstrap: bootstrap.clone(),
                    transactional_id: config.transactional_id(),
                    error: Box::new(error),
                })?;
        }
        tracing::info!(%bootstrap, topic = %config.topic, delivery = ?config.delivery, "Connected to Kafka.");
        Ok(KafkaSink {
            producer,
            config,
            bootstrap,
        })
    }

    /// The pipeline's last committed position, if any. [`KafkaSink::connect`] has
    /// fenced older instances, so the topic is read to its end: their open transaction
    /// is being aborted, and nothing else writes there.
    pub async fn load_position(&self) -> Result<Option<SourcePosition>, SinkError> {
        read_stored_position(&self.config, ReadEnd::End).await
    }

    /// Delivers `records` and then `position`: in exactly-once mode in one transaction,
    /// otherwise the position after every record is acknowledged.
    pub async fn deliver(
        &self,
        records: &[SinkRecord],
        position: &SourcePosition,
    ) -> Result<(), SinkError> {
        match self.config.delivery {
            Delivery::AtLeastOnce => {
                self.send_and_wait(records, position, false).await?;
                Ok(())
            }
            Delivery::ExactlyOnce => {
                self.producer
                    .begin_transaction()
                    .map_err(|e| self.transaction_error(e))?;
                if let Err(e) = self.send_and_wait(records, position, true).await {
                    self.abort().await;
                    return Err(e);
                }
                self.commit().await
            }
        }
    }

    async fn send_and_wait(
        &self,
        records: &[SinkRecord],
        position: &SourcePosition,
        in_transaction: bool,
    ) -> Result<(), SinkError> {
        let mut deliveries: Vec<(&str, DeliveryFuture)> = Vec::with_capacity(records.len() + 1);
        for record in records {
            let topic = record.topic.as_deref().unwrap_or(&self.config.topic);
            deliveries.push((topic, self.enqueue(topic, record).await?));
        }
        let position_record = SinkRecord {
            key: Some(self.config.pipeline.as_bytes().to_vec()),
            value: Some(serde_json::to_vec(position).expect("a position serializes")),
            ..SinkRecord::default()
        };
        if in_transaction {
            deliveries.push((
                &self.config.position_topic,
                self.enqueue(&self.config.position_topic, &position_record)
                    .await?,
            ));
        }
        self.await_all(deliveries).await?;
        if !in_transaction {
            let delivery = self
                .enqueue(&self.config.position_topic, &position_record)
                .await?;
            self.await_all(vec![(&self.config.position_topic, delivery)])
                .await?;
        }
        Ok(())
    }

    async fn await_all(&self, deliveries: Vec<(&str, DeliveryFuture)>) -> Result<(), SinkError> {
        for (topic, delivery) in deliveries {
            let outcome = delivery
                .await
                .map_err(|_| self.delivery_error(topic, KafkaError::Canceled))?;
            outcome.map_err(|(error, _)| self.delivery_error(topic, error))?;
        }
        Ok(())
    }

    async fn commit(&self) -> Result<(), SinkError> {
        let producer = self.producer.clone();
        let timeout = self.config.transaction_timeout;
        loop {
            let producer = producer.clone();
            let result = tokio::task::spawn_blocking(move || producer.commit_transaction(timeout))
                .await
                .expect("commit_transaction does not panic");
            match result {
                Ok(()) => return Ok(()),
                Err(KafkaError::Transaction(e)) if e.is_retriable() && !e.txn_requires_abort() => {
                    tracing::warn!(error = %e, "Committing a Kafka transaction failed; retrying.");
                }
                Err(KafkaError::Flush(_)) => {
                    tracing::warn!("Committing a Kafka transaction timed out; retrying.");
                }
                Err(e) => {
                    let error = self.transaction_error(e);
                    if error.is_retriable() {
                        self.abort().await;
                    }
                    return Err(error);
                }
            }
        }
    }

    async fn abort(&self) {
        let producer = self.producer.clone();
        let timeout = self.config.transaction_timeout;
        let result = tokio::task::spawn_blocking(move || producer.abort_transaction(timeout))
            .await
            .expect("abort_transaction does not panic");
        if let Err(e) = result {
            tracing::warn!(error = %e, "Aborting a Kafka transaction failed.");
        }
    }

    fn transaction_error(&self, error: KafkaError) -> SinkError {
        let fenced = matches!(
            error.rdkafka_error_code(),
            Some(
                RDKafkaErrorCode::Fenced
                    | RDKafkaErrorCode::ProducerFenced
                    | RDKafkaErrorCode::InvalidProducerEpoch
            )
        );
        match &error {
            _ if fenced => SinkError::Fenced {
                pipeline: self.config.pipeline.clone(),
                transactional_id: self.config.transactional_id(),
            },
            KafkaError::Transaction(e) if e.txn_requires_abort() => SinkError::Aborted {
                error: Box::new(error),
            },
            _ => SinkError::Delivery {
                topic: self.config.topic.clone(),
                bootstrap: self.bootstrap.clone(),
                error: Box::new(error),
            },
        }
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
                Err((error, _)) => return Err(self.produce_error(topic, error)),
            }
        }
    }

    fn produce_error(&self, topic: &str, error: KafkaError) -> SinkError {
        match error.rdkafka_error_code() {
            Some(
                RDKafkaErrorCode::Fenced
                | RDKafkaErrorCode::ProducerFenced
                | RDKafkaErrorCode::InvalidProducerEpoch,
            ) => self.transaction_error(error),
            _ => self.delivery_error(topic, error),
        }
    }

    fn delivery_error(&self, topic: &str, error: KafkaError) -> SinkError {
        if self.config.delivery == Delivery::ExactlyOnce && !is_permanent(&error) {
            return match self.transaction_error(error) {
                SinkError::Delivery { error, .. } => SinkError::Aborted { error },
                other => other,
            };
        }
        SinkError::Delivery {
            topic: topic.to_string(),
            bootstrap: self.bootstrap.clone(),
            error: Box::new(error),
        }
    }
}

/// Reads a pipeline's last committed position without producing anything, so a running
/// instance is neither disturbed nor waited for.
pub async fn load_position(config: &SinkConfig) -> Result<Option<SourcePosition>, SinkError> {
    read_stored_position(config, ReadEnd::Stable).await
}

async fn read_stored_position(
    config: &SinkConfig,
    end: ReadEnd,
) -> Result<Option<SourcePosition>, SinkError> {
    let properties = consumer_properties(&config.properties);
    let (topic, pipeline, wait) = (
        config.position_topic.clone(),
        config.pipeline.clone(),
        config.connect_timeout,
    );
    tokio::task::spawn_blocking(move || {
        position::read_position(&properties, &topic, &pipeline, wait, end)
    })
    .await
    .expect("reading the position does not panic")
}

/// Waits up to `wait` for metadata that shows `topic` with partitions: `Ok(false)` if
/// brokers answer but the topic never appears (a producer's metadata request creates it
/// where the broker allows), `Err` if no broker answers.
fn topic_ready(producer: &FutureProducer, topic: &str, wait: Duration) -> Result<bool, String> {
    let deadline = std::time::Instant::now() + wait;
    let mut brokers_answered = false;
    let mut last_error = String::from("no broker answered");
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
            Err(e) => last_error = e.to_string(),
        }
        if std::time::Instant::now() >= deadline {
            return if brokers_answered {
                Ok(false)
            } else {
                Err(last_error)
            };
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(properties: &[(&str, &str)]) -> SinkConfig {
        SinkConfig {
            pipeline: "p".into(),
            properties: properties
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            topic: "t".into(),
            position_topic: "positions".into(),
            delivery: Delivery::ExactlyOnce,
            connect_timeout: Duration::from_secs(2),
            transaction_timeout: Duration::from_secs(10),
        }
    }

    #[test]
    fn oversized_records_and_authorization_failures_are_not_retried() {
        let produce = |code| KafkaError::MessageProduction(code);
        assert!(is_permanent(&produce(
            RDKafkaErrorCode::MessageSizeTooLarge
        )));
        assert!(is_permanent(&produce(
            RDKafkaErrorCode::TopicAuthorizationFailed
        )));
        assert!(!is_permanent(&produce(RDKafkaErrorCode::RequestTimedOut)));
        assert!(!is_permanent(&produce(
            RDKafkaErrorCode::NotLeaderForPartition
        )));
    }

    #[tokio::test]
    async fn missing_bootstrap_servers_is_named() {
        let err = KafkaSink::connect(config(&[])).await.err().unwrap();
        assert!(matches!(err, SinkError::MissingBootstrap), "{err}");
    }

    #[tokio::test]
    async fn a_configured_transactional_id_is_refused() {
        let err = KafkaSink::connect(config(&[
            ("bootstrap.servers", "x:1"),
            ("transactional.id", "mine"),
        ]))
        .await
        .err()
        .unwrap();
        assert!(err.to_string().contains("sluice-p"), "{err}");
    }

    #[tokio::test]
    async fn an_unreachable_broker_is_named_after_a_bounded_wait() {
        let err = KafkaSink::connect(config(&[("bootstrap.servers", "127.0.0.1:1")]))
            .await
            .err()
            .unwrap();
        assert!(err.to_string().contains("127.0.0.1:1"), "{err}");
        assert!(matches!(err, SinkError::Unreachable { .. }), "{err}");
    }
}

//! The pipeline's Kafka producer: batches of records with their source position.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer};

use crate::error::SinkError;
use crate::position::{self, ReadEnd, SourcePosition};
use crate::properties::{DEFAULTS, client_properties, consumer_properties, redact};

/// Delivery errors that redoing the work cannot cure; any other delivery error makes the
/// pipeline redo the work since its last commit.
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

fn is_permanent(code: RDKafkaErrorCode) -> bool {
    PERMANENT.contains(&code)
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
    /// Kafka's `transaction.timeout.ms`: the broker aborts a transaction open longer.
    /// Twice the commit wait, so a commit that waits its longest still ends in time.
    pub fn kafka_transaction_timeout(&self) -> Duration {
        self.transaction_timeout * 2
    }

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
    /// Partition; librdkafka's partitioner (by key) when absent.
    pub partition: Option<i32>,
    /// Key bytes.
    pub key: Option<Vec<u8>>,
    /// Value bytes; absent makes a tombstone.
    pub value: Option<Vec<u8>>,
    /// Headers, in order.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The change row the record was made from, named in errors about the record.
    pub origin: Option<RecordOrigin>,
}

/// A change row's coordinates in the table's change feed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordOrigin {
    /// The Delta version.
    pub version: u64,
    /// The row's index among the version's change rows.
    pub row: u64,
}

/// A Kafka producer for one pipeline.
pub struct KafkaSink {
    producer: FutureProducer,
    config: SinkConfig,
    bootstrap: String,
    in_flight: Vec<InFlight>,
    /// When the open transaction began, if one is open.
    transaction_began: Option<Instant>,
}

impl KafkaSink {
    /// Creates the producer, waits up to `connect_timeout` for the cluster, makes sure
    /// the position topic exists, and in exactly-once mode initialises transactions,
    /// which fences any older instance of the same pipeline.
    pub async fn connect(mut config: SinkConfig) -> Result<KafkaSink, SinkError> {
        config.properties = client_properties(&config.properties)?;
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
                    config.kafka_transaction_timeout().as_millis().to_string(),
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
        if let Some(error) = topic_error(found, &config.topic, &bootstrap, wait) {
            return Err(error);
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
            in_flight: Vec::new(),
            transaction_began: None,
        })
    }

    /// The pipeline's last committed position, if any. [`KafkaSink::connect`] has
    /// fenced older instances, so the topic is read to its end: their open transaction
    /// is being aborted, and nothing else writes there.
    pub async fn load_position(&self) -> Result<Option<SourcePosition>, SinkError> {
        read_stored_position(&self.config, ReadEnd::End).await
    }

    /// Hands `records` to Kafka. In exactly-once mode they join the open transaction
    /// (one begins if none is open); nothing is visible to read_committed consumers until
    /// [`KafkaSink::commit`]. On error the open transaction is aborted and every record
    /// sent since the last commit is forgotten.
    pub async fn send(&mut self, records: Vec<SinkRecord>) -> Result<(), SinkError> {
        let result = self.try_send(records).await;
        if let Err(error) = &result {
            self.abandon(error).await;
        }
        result
    }

    /// Makes everything sent since the last commit durable together with `position`: in
    /// exactly-once mode the position joins the transaction and the transaction commits;
    /// in at-least-once mode the position is written once Kafka has acknowledged every
    /// record. On error nothing of it counts, and the work is redone from the previous
    /// position.
    pub async fn commit(&mut self, position: &SourcePosition) -> Result<(), SinkError> {
        let result = self.try_commit(position).await;
        if let Err(error) = &result {
            self.abandon(error).await;
        }
        result
    }

    /// Forgets everything sent since the last commit; in exactly-once mode the open
    /// transaction is aborted, so none of it becomes visible.
    pub async fn rollback(&mut self) {
        self.in_flight.clear();
        if self.transaction_began.is_some() {
            self.abort().await;
        }
    }

    async fn try_send(&mut self, records: Vec<SinkRecord>) -> Result<(), SinkError> {
        self.begin()?;
        self.in_flight.reserve(records.len());
        for record in records {
            let delivery = self.enqueue(&record).await?;
            self.in_flight.push(delivery);
        }
        Ok(())
    }

    async fn try_commit(&mut self, position: &SourcePosition) -> Result<(), SinkError> {
        let position_record = SinkRecord {
            topic: Some(self.config.position_topic.clone()),
            key: Some(self.config.pipeline.as_bytes().to_vec()),
            value: Some(serde_json::to_vec(position).expect("a position serializes")),
            ..SinkRecord::default()
        };
        match self.config.delivery {
            Delivery::AtLeastOnce => {
                self.await_in_flight().await?;
                let delivery = self.enqueue(&position_record).await?;
                self.in_flight.push(delivery);
                self.await_in_flight().await
            }
            Delivery::ExactlyOnce => {
                self.begin()?;
                let delivery = self.enqueue(&position_record).await?;
                self.in_flight.push(delivery);
                self.await_in_flight().await?;
                self.commit_transaction().await?;
                self.transaction_began = None;
                Ok(())
            }
        }
    }

    fn begin(&mut self) -> Result<(), SinkError> {
        if self.config.delivery == Delivery::ExactlyOnce && self.transaction_began.is_none() {
            self.producer
                .begin_transaction()
                .map_err(|e| self.transaction_error(e))?;
            self.transaction_began = Some(Instant::now());
        }
        Ok(())
    }

    /// Forgets the uncommitted work after `error`, aborting the open transaction unless
    /// the producer was fenced (then it can no longer abort).
    async fn abandon(&mut self, error: &SinkError) {
        match error {
            // The producer can no longer abort; the broker already did.
            SinkError::Fenced { .. } | SinkError::TransactionTimedOut { .. } => {
                self.in_flight.clear();
                self.transaction_began = None;
            }
            _ => self.rollback().await,
        }
    }

    async fn abort(&mut self) {
        let producer = self.producer.clone();
        let timeout = self.config.transaction_timeout;
        let result = tokio::task::spawn_blocking(move || producer.abort_transaction(timeout))
            .await
            .expect("abort_transaction does not panic");
        if let Err(e) = result {
            tracing::warn!(error = %e, "Aborting a Kafka transaction failed.");
        }
        self.transaction_began = None;
    }

    async fn await_in_flight(&mut self) -> Result<(), SinkError> {
        for sent in std::mem::take(&mut self.in_flight) {
            let mut error = match sent.delivery.await {
                Ok(Ok(_)) => continue,
                Ok(Err((error, _))) => error,
                Err(_) => KafkaError::Canceled,
            };
            if matches!(
                error.rdkafka_error_code(),
                Some(RDKafkaErrorCode::PurgeQueue | RDKafkaErrorCode::PurgeInflight)
            ) && let Some(cause) = self.transaction_failure().await
            {
                error = cause;
            }
            return Err(self.delivery_error(&sent.topic, sent.origin, sent.bytes, error));
        }
        Ok(())
    }

    /// Why the open transaction failed, when librdkafka purged its records: a failed
    /// transaction reports its cause (for example an authorization failure when adding a
    /// partition) to the next transactional call, not to the records.
    async fn transaction_failure(&self) -> Option<KafkaError> {
        self.transaction_began?;
        let producer = self.producer.clone();
        let result = tokio::task::spawn_blocking(move || {
            producer.commit_transaction(Duration::from_secs(1))
        })
        .await
        .expect("commit_transaction does not panic");
        match result {
            Err(error @ KafkaError::Transaction(_)) => Some(error),
            _ => None,
        }
    }

    async fn commit_transaction(&self) -> Result<(), SinkError> {
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
                Err(e) => return Err(self.transaction_error(e)),
            }
        }
    }

    fn transaction_error(&self, error: KafkaError) -> SinkError {
        if let Some(fatal) = self.fatal_error() {
            return fatal;
        }
        match &error {
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

    /// The producer's fatal error, if it has one: being fenced by a newer instance, or
    /// anything else that makes the producer unusable.
    fn fatal_error(&self) -> Option<SinkError> {
        let (code, reason) = self.producer.client().fatal_error()?;
        let open_for = self.transaction_began.map(|began| began.elapsed());
        let limit = self.config.kafka_transaction_timeout();
        Some(match code {
            // The broker aborts a transaction open past its timeout by bumping the
            // producer's epoch, which the producer cannot tell from being fenced.
            RDKafkaErrorCode::Fenced
            | RDKafkaErrorCode::ProducerFenced
            | RDKafkaErrorCode::InvalidProducerEpoch
                if open_for.is_some_and(|open_for| open_for >= limit) =>
            {
                SinkError::TransactionTimedOut {
                    open_for: open_for.unwrap_or_default(),
                    limit,
                }
            }
            RDKafkaErrorCode::Fenced
            | RDKafkaErrorCode::ProducerFenced
            | RDKafkaErrorCode::InvalidProducerEpoch => SinkError::Fenced {
                pipeline: self.config.pipeline.clone(),
                transactional_id: self.config.transactional_id(),
            },
            _ => SinkError::Fatal {
                bootstrap: self.bootstrap.clone(),
                reason,
            },
        })
    }

    async fn enqueue(&self, record: &SinkRecord) -> Result<InFlight, SinkError> {
        let topic = record.topic.as_deref().unwrap_or(&self.config.topic);
        let headers = record
            .headers
            .iter()
            .fold(OwnedHeaders::new(), |headers, (key, value)| {
                headers.insert(Header {
                    key,
                    value: Some(value),
                })
            });
        let bytes = record.key.as_ref().map_or(0, Vec::len)
            + record.value.as_ref().map_or(0, Vec::len)
            + record
                .headers
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>();
        let mut future_record: FutureRecord<'_, [u8], [u8]> =
            FutureRecord::to(topic).headers(headers);
        if let Some(key) = &record.key {
            future_record = future_record.key(key);
        }
        if let Some(value) = &record.value {
            future_record = future_record.payload(value);
        }
        if let Some(partition) = record.partition {
            future_record = future_record.partition(partition);
        }
        loop {
            match self.producer.send_result(future_record) {
                Ok(delivery) => {
                    return Ok(InFlight {
                        topic: topic.to_string(),
                        origin: record.origin,
                        bytes,
                        delivery,
                    });
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    future_record = back;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err((error, _)) => {
                    return Err(self.delivery_error(topic, record.origin, bytes, error));
                }
            }
        }
    }

    /// A refused record: permanent refusals name the record's source row and stop the
    /// pipeline; any other failure makes the work since the last commit be redone.
    fn delivery_error(
        &self,
        topic: &str,
        origin: Option<RecordOrigin>,
        bytes: usize,
        error: KafkaError,
    ) -> SinkError {
        match error.rdkafka_error_code() {
            Some(code) if is_permanent(code) => {
                return match origin {
                    Some(origin) => SinkError::Rejected {
                        pipeline: self.config.pipeline.clone(),
                        topic: topic.to_string(),
                        bootstrap: self.bootstrap.clone(),
                        version: origin.version,
                        row: origin.row,
                        bytes,
                        hint: rejection_hint(code),
                        error: Box::new(error),
                    },
                    None => SinkError::Delivery {
                        topic: topic.to_string(),
                        bootstrap: self.bootstrap.clone(),
                        error: Box::new(error),
                    },
                };
            }
            _ => {}
        }
        if let Some(fatal) = self.fatal_error() {
            return fatal;
        }
        match self.config.delivery {
            Delivery::ExactlyOnce => SinkError::Aborted {
                error: Box::new(error),
            },
            Delivery::AtLeastOnce => SinkError::Interrupted {
                error: Box::new(error),
            },
        }
    }
}

/// What to do about a record Kafka refuses for good.
fn rejection_hint(code: RDKafkaErrorCode) -> &'static str {
    match code {
        RDKafkaErrorCode::MessageSizeTooLarge | RDKafkaErrorCode::InvalidMessageSize => {
            "Raise `message.max.bytes` in [sink.kafka] and the topic's `max.message.bytes` on the broker, or make the transform emit smaller records."
        }
        RDKafkaErrorCode::TopicAuthorizationFailed => {
            "Grant the pipeline's principal WRITE and DESCRIBE on the topic, or send the record to a topic it may write."
        }
        RDKafkaErrorCode::ClusterAuthorizationFailed
        | RDKafkaErrorCode::TransactionalIdAuthorizationFailed => {
            "Grant the pipeline's principal WRITE on its transactional id (IDEMPOTENT_WRITE on the cluster for at-least-once)."
        }
        RDKafkaErrorCode::UnknownTopic => {
            "Create the topic, or make the transform name an existing one."
        }
        _ => "Kafka will refuse it again; fix the record or the topic's settings.",
    }
}

/// A record handed to librdkafka and not yet acknowledged.
struct InFlight {
    topic: String,
    origin: Option<RecordOrigin>,
    bytes: usize,
    delivery: DeliveryFuture,
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
    let properties = consumer_properties(&client_properties(&config.properties)?);
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

/// Checks, without a transaction or any write, that the brokers answer and that
/// each of `topics` exists and may be seen: what `sluice check` reports. Returns one
/// error per problem.
pub async fn check_topics(config: &SinkConfig, topics: &[String]) -> Vec<SinkError> {
    let properties = match client_properties(&config.properties) {
        Ok(properties) => properties,
        Err(e) => return vec![e],
    };
    let Some(bootstrap) = properties.get("bootstrap.servers").cloned() else {
        return vec![SinkError::MissingBootstrap];
    };
    let mut client = ClientConfig::new();
    for (name, value) in DEFAULTS {
        client.set(*name, *value);
    }
    for (name, value) in &properties {
        client.set(name, value);
    }
    let producer: FutureProducer = match client.create() {
        Ok(producer) => producer,
        Err(e) => return vec![SinkError::Config(redact(&e.to_string(), &properties))],
    };
    let mut problems = Vec::new();
    for topic in topics {
        let (probe, name, wait) = (producer.clone(), topic.clone(), config.connect_timeout);
        let found = tokio::task::spawn_blocking(move || topic_ready(&probe, &name, wait))
            .await
            .expect("the metadata probe does not panic");
        let unreachable = found.is_err();
        if let Some(error) = topic_error(found, topic, &bootstrap, wait) {
            problems.push(error);
        }
        if unreachable {
            break;
        }
    }
    problems
}

/// The error for a topic probe's answer, if it is a problem.
fn topic_error(
    found: Result<TopicState, String>,
    topic: &str,
    bootstrap: &str,
    wait: Duration,
) -> Option<SinkError> {
    let (topic, bootstrap) = (topic.to_string(), bootstrap.to_string());
    match found {
        Ok(TopicState::Ready) => None,
        Ok(TopicState::Missing) => Some(SinkError::TopicMissing { topic, bootstrap }),
        Ok(TopicState::Unauthorized) => Some(SinkError::TopicUnauthorized { topic, bootstrap }),
        Err(detail) => Some(SinkError::Unreachable {
            bootstrap,
            waited: wait,
            detail,
        }),
    }
}

/// What the cluster says about the sink's topic.
enum TopicState {
    Ready,
    Missing,
    Unauthorized,
}

/// Waits up to `wait` for metadata that shows `topic` with partitions: `Missing` if
/// brokers answer but the topic never appears (a producer's metadata request creates it
/// where the broker allows), `Err` if no broker answers.
fn topic_ready(
    producer: &FutureProducer,
    topic: &str,
    wait: Duration,
) -> Result<TopicState, String> {
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
                for t in metadata.topics().iter().filter(|t| t.name() == topic) {
                    match t.error().map(RDKafkaErrorCode::from) {
                        None if !t.partitions().is_empty() => return Ok(TopicState::Ready),
                        Some(RDKafkaErrorCode::TopicAuthorizationFailed) => {
                            return Ok(TopicState::Unauthorized);
                        }
                        _ => {}
                    }
                }
            }
            Err(e) => last_error = e.to_string(),
        }
        if std::time::Instant::now() >= deadline {
            return if brokers_answered {
                Ok(TopicState::Missing)
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
        assert!(is_permanent(RDKafkaErrorCode::MessageSizeTooLarge));
        assert!(is_permanent(RDKafkaErrorCode::TopicAuthorizationFailed));
        assert!(!is_permanent(RDKafkaErrorCode::RequestTimedOut));
        assert!(!is_permanent(RDKafkaErrorCode::NotLeaderForPartition));
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

//! The pipeline's Kafka producer: batches of records with their source position.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use std::sync::Arc;

use rdkafka::ClientConfig;
use rdkafka::client::{Client, ClientContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};

use crate::changelog::{self, ChangelogReader};
use crate::error::SinkError;
use crate::failure::SecurityFailure;
use crate::fence;
use crate::position::{self, ReadEnd, SourcePosition};
use crate::properties::{DEFAULTS, client_properties, consumer_properties, redact};
use crate::tracker::DeliveryTracker;
use crate::watch::SecurityWatch;

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

/// How records reach Kafka: `delivery` in a pipeline's `[sink]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeliveryMode {
    /// Records and position in one transaction per batch.
    #[default]
    ExactlyOnce,
    /// Idempotent producer; the position is written after the records are acknowledged.
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
    /// The compacted topic holding the pipeline's state changes, for a pipeline that
    /// keeps state (exactly-once only): created at connect when missing.
    pub changelog_topic: Option<String>,
    /// Exactly-once or at-least-once.
    pub delivery: DeliveryMode,
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
    producer: Arc<ThreadedProducer<DeliveryTracker>>,
    config: SinkConfig,
    bootstrap: String,
    /// The records sent since the last commit, by sequence number from `first_sequence`:
    /// what an error about one of them names.
    sent: Vec<SentRecord>,
    /// Sequence number of `sent[0]`.
    first_sequence: usize,
    /// When the open transaction began, if one is open.
    transaction_began: Option<Instant>,
}

/// A record handed to librdkafka and not yet committed: what an error about it names.
struct SentRecord {
    topic: Option<String>,
    origin: Option<RecordOrigin>,
    bytes: usize,
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
        let mut client = producer_config(&config.properties);
        if config.delivery == DeliveryMode::ExactlyOnce {
            client
                .set("transactional.id", config.transactional_id())
                .set(
                    "transaction.timeout.ms",
                    config.kafka_transaction_timeout().as_millis().to_string(),
                );
        }
        let producer: ThreadedProducer<DeliveryTracker> = client
            .create_with_context(DeliveryTracker::new(SecurityWatch::new(&config.properties)))
            .map_err(|e| SinkError::Config(redact(&e.to_string(), &config.properties)))?;
        let producer = Arc::new(producer);

        let probe = producer.clone();
        let topic = config.topic.clone();
        let wait = config.connect_timeout;
        let probe = async {
            let found = tokio::task::spawn_blocking(move || {
                topic_ready(probe.client(), probe.context().security(), &topic, wait)
            })
            .await
            .expect("the metadata probe does not panic");
            match topic_error(found, &config.topic, &bootstrap, wait) {
                Some(error) => Err(error),
                None => Ok(()),
            }
        };
        // The position topic is made sure of while the sink's topic is probed; the
        // probe's error (an unreachable broker) ends both at once.
        let position_topic =
            position::ensure_topic(&config.properties, &config.position_topic, wait);
        let changelog_topic = async {
            match &config.changelog_topic {
                Some(topic) => {
                    changelog::ensure_changelog_topic(&config.properties, topic, wait).await
                }
                None => Ok(()),
            }
        };
        tokio::try_join!(probe, position_topic, changelog_topic)?;

        if config.delivery == DeliveryMode::ExactlyOnce {
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
            sent: Vec::new(),
            first_sequence: 0,
            transaction_began: None,
        })
    }

    /// The pipeline's last committed position, if any. [`KafkaSink::connect`] has
    /// fenced older instances, so the topic is read to its end: their open transaction
    /// is being aborted, and nothing else writes there.
    pub async fn load_position(&self) -> Result<Option<SourcePosition>, SinkError> {
        read_stored_position(&self.config, ReadEnd::End).await
    }

    /// A reader of a changelog topic, with the sink's connection settings.
    pub fn changelog_reader(&self, topic: &str) -> Result<ChangelogReader, SinkError> {
        changelog_reader(&self.config, topic)
    }

    /// Hands `records` to Kafka. In exactly-once mode they join the open transaction
    /// (one begins if none is open); nothing is visible to read_committed consumers until
    /// [`KafkaSink::commit`]. On error the open transaction is aborted and every record
    /// sent since the last commit is forgotten.
    pub async fn send(&mut self, records: Vec<SinkRecord>) -> Result<(), SinkError> {
        let result = self.try_send(records).await.map_err(|e| self.explained(e));
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
        let result = self
            .try_commit(position)
            .await
            .map_err(|e| self.explained(e));
        match &result {
            // What failed before has recovered (a token endpoint back after a blip).
            Ok(()) => self.producer.context().security().clear(),
            Err(error) => self.abandon(error).await,
        }
        result
    }

    /// Forgets everything sent since the last commit; in exactly-once mode the open
    /// transaction is aborted, so none of it becomes visible.
    pub async fn rollback(&mut self) {
        self.forget_sent();
        if self.transaction_began.is_some() {
            self.abort().await;
        }
    }

    async fn try_send(&mut self, records: Vec<SinkRecord>) -> Result<(), SinkError> {
        self.begin()?;
        self.sent.reserve(records.len());
        for record in records {
            self.enqueue(record).await?;
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
            DeliveryMode::AtLeastOnce => {
                self.flush().await?;
                self.enqueue(position_record).await?;
                self.flush().await?;
            }
            DeliveryMode::ExactlyOnce => {
                self.begin()?;
                self.enqueue(position_record).await?;
                // The flush names a refused record itself.
                self.flush().await?;
                if let Err(error) = self.commit_transaction().await {
                    return Err(self.failed_delivery().await.unwrap_or(error));
                }
                self.transaction_began = None;
            }
        }
        self.forget_sent();
        Ok(())
    }

    fn begin(&mut self) -> Result<(), SinkError> {
        if self.config.delivery == DeliveryMode::ExactlyOnce && self.transaction_began.is_none() {
            self.producer
                .begin_transaction()
                .map_err(|e| self.transaction_error(e))?;
            self.transaction_began = Some(Instant::now());
        }
        Ok(())
    }

    /// Starts counting delivery reports afresh from the next record.
    fn forget_sent(&mut self) {
        self.first_sequence += self.sent.len();
        self.sent.clear();
        self.producer.context().reset(self.first_sequence);
    }

    /// Forgets the uncommitted work after `error`, aborting the open transaction unless
    /// the producer was fenced (then it can no longer abort).
    async fn abandon(&mut self, error: &SinkError) {
        match error {
            // The producer can no longer abort; the broker already did.
            SinkError::Fenced { .. } | SinkError::TransactionTimedOut { .. } => {
                self.forget_sent();
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

    /// Sends what librdkafka holds now, without waiting out `linger.ms`, and waits for
    /// every acknowledgement.
    async fn flush(&mut self) -> Result<(), SinkError> {
        let producer = self.producer.clone();
        let timeout = self.config.transaction_timeout;
        let flushed = tokio::task::spawn_blocking(move || flush_now(&producer, timeout))
            .await
            .expect("flush does not panic");
        if let Some(error) = self.failed_delivery().await {
            return Err(error);
        }
        flushed.map_err(|code| self.delivery_error(None, None, 0, KafkaError::Flush(code)))
    }

    /// The error of the first record Kafka refused since the last commit, once every
    /// report has arrived (they follow a flush or commit by a moment).
    async fn failed_delivery(&self) -> Option<SinkError> {
        let tracker = self.producer.context();
        let deadline = Instant::now() + Duration::from_secs(1);
        while tracker.outstanding() > 0 && Instant::now() < deadline {
            let _ = tokio::time::timeout(Duration::from_millis(10), tracker.reported()).await;
        }
        let (sequence, mut error) = tracker.take_failure()?;
        let sent = self.sent.get(sequence.checked_sub(self.first_sequence)?)?;
        if matches!(
            error.rdkafka_error_code(),
            Some(RDKafkaErrorCode::PurgeQueue | RDKafkaErrorCode::PurgeInflight)
        ) && let Some(cause) = self.transaction_failure().await
        {
            error = cause;
        }
        Some(self.delivery_error(sent.topic.as_deref(), sent.origin, sent.bytes, error))
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
        let timeout = self.config.transaction_timeout;
        loop {
            let producer = self.producer.clone();
            let result = tokio::task::spawn_blocking(move || producer.commit_transaction(timeout))
                .await
                .expect("commit_transaction does not panic");
            let error = match result {
                Ok(()) => return Ok(()),
                Err(KafkaError::Transaction(e)) if e.is_retriable() && !e.txn_requires_abort() => {
                    KafkaError::Transaction(e)
                }
                Err(error @ KafkaError::Flush(_)) => error,
                Err(e) => return Err(self.transaction_error(e)),
            };
            // Retried here, a commit stalled by a lasting security failure (credentials
            // revoked, a token that can no longer be fetched) would wait for ever: the
            // pipeline redoes the work instead, and gives up in the end. Being fenced or
            // timed out says more, so it comes first.
            if let Some(fatal) = self.fatal_error() {
                return Err(fatal);
            }
            if let Some(stalled) = self.security_failure() {
                return Err(stalled);
            }
            tracing::warn!(%error, "Committing a Kafka transaction failed; retrying.");
        }
    }

    /// A failure to deliver that would be redone, as the security failure behind it if
    /// the producer meets one now: what the pipeline reports while it redoes the work.
    fn explained(&self, error: SinkError) -> SinkError {
        if error.is_retriable() && !error.needs_reconnect() {
            self.security_failure().unwrap_or(error)
        } else {
            error
        }
    }

    /// The security failure the producer meets now (credentials revoked, a token that
    /// can no longer be fetched): why its work stalls. Now is within the longest a commit
    /// waits, and at least half a minute: librdkafka retries a token or a connection at
    /// least every ten seconds, so a failure that lasts is seen again within it.
    fn security_failure(&self) -> Option<SinkError> {
        let within = self.config.transaction_timeout.max(Duration::from_secs(30));
        let failure = self.producer.context().security().recent_failure(within)?;
        Some(SinkError::Stalled(Box::new(failure)))
    }

    fn transaction_error(&self, error: KafkaError) -> SinkError {
        if let Some(fatal) = self.fatal_error() {
            return fatal;
        }
        // Whatever a transaction call fails with while the client meets a security
        // failure (an abort still in progress, a non-abortable state) follows from it.
        if let Some(stalled) = self.security_failure() {
            return stalled;
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
            code if fence::is_fencing(code)
                && open_for.is_some_and(|open_for| open_for >= limit) =>
            {
                SinkError::TransactionTimedOut {
                    open_for: open_for.unwrap_or_default(),
                    limit,
                }
            }
            code if fence::is_fencing(code) => SinkError::Fenced {
                pipeline: self.config.pipeline.clone(),
                transactional_id: self.config.transactional_id(),
            },
            RDKafkaErrorCode::InvalidTransactionalState => SinkError::ProducerReset {
                bootstrap: self.bootstrap.clone(),
                reason,
            },
            _ => SinkError::Fatal {
                bootstrap: self.bootstrap.clone(),
                reason,
            },
        })
    }

    /// Hands one record to librdkafka, waiting for room in its queue when it is full.
    async fn enqueue(&mut self, record: SinkRecord) -> Result<(), SinkError> {
        let sequence = self.first_sequence + self.sent.len();
        let bytes = record.key.as_ref().map_or(0, Vec::len)
            + record.value.as_ref().map_or(0, Vec::len)
            + record
                .headers
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>();
        let topic = record.topic.as_deref().unwrap_or(&self.config.topic);
        let mut base: BaseRecord<'_, [u8], [u8], usize> =
            BaseRecord::with_opaque_to(topic, sequence);
        if !record.headers.is_empty() {
            let headers = record.headers.iter().fold(
                OwnedHeaders::new_with_capacity(record.headers.len()),
                |headers, (key, value)| {
                    headers.insert(Header {
                        key,
                        value: Some(value),
                    })
                },
            );
            base = base.headers(headers);
        }
        if let Some(key) = &record.key {
            base = base.key(key);
        }
        if let Some(value) = &record.value {
            base = base.payload(value);
        }
        if let Some(partition) = record.partition {
            base = base.partition(partition);
        }
        // Counted before it is sent: its report may come before `send` returns.
        self.producer.context().sent();
        loop {
            match self.producer.send(base) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    base = back;
                    // Room comes with the next delivery report.
                    let reported = self.producer.context().reported();
                    let _ = tokio::time::timeout(Duration::from_millis(100), reported).await;
                }
                Err((error, _)) => {
                    return Err(self.delivery_error(Some(topic), record.origin, bytes, error));
                }
            }
        }
        self.sent.push(SentRecord {
            topic: record.topic,
            origin: record.origin,
            bytes,
        });
        Ok(())
    }

    /// A refused record: permanent refusals name the record's source row and stop the
    /// pipeline; any other failure makes the work since the last commit be redone.
    fn delivery_error(
        &self,
        topic: Option<&str>,
        origin: Option<RecordOrigin>,
        bytes: usize,
        error: KafkaError,
    ) -> SinkError {
        let topic = topic.unwrap_or(&self.config.topic).to_string();
        if let Some(code) = error.rdkafka_error_code()
            && is_permanent(code)
        {
            return match origin {
                Some(origin) => SinkError::Rejected {
                    pipeline: self.config.pipeline.clone(),
                    topic,
                    bootstrap: self.bootstrap.clone(),
                    version: origin.version,
                    row: origin.row,
                    bytes,
                    hint: rejection_hint(code),
                    error: Box::new(error),
                },
                None => SinkError::Delivery {
                    topic,
                    bootstrap: self.bootstrap.clone(),
                    error: Box::new(error),
                },
            };
        }
        if let Some(fatal) = self.fatal_error() {
            return fatal;
        }
        match self.config.delivery {
            DeliveryMode::ExactlyOnce => SinkError::Aborted {
                error: Box::new(error),
            },
            DeliveryMode::AtLeastOnce => SinkError::Interrupted {
                error: Box::new(error),
            },
        }
    }
}

/// librdkafka's flush: sends what the producer holds at once, without waiting out
/// `linger.ms`, and waits up to `timeout` until every record is acknowledged or failed.
/// rdkafka's own `flush` (which its `commit_transaction` calls first) checks in steps of
/// up to 100 ms of polling, and the producer's poll thread takes the events it polls
/// for: every commit would wait 100 ms.
fn flush_now(
    producer: &ThreadedProducer<DeliveryTracker>,
    timeout: Duration,
) -> Result<(), RDKafkaErrorCode> {
    let millis = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: the handle belongs to `producer`, which outlives the call, and
    // `rd_kafka_flush` may be called from any thread.
    let code = RDKafkaErrorCode::from(unsafe {
        rdkafka::bindings::rd_kafka_flush(producer.client().native_ptr(), millis)
    });
    match code {
        RDKafkaErrorCode::NoError => Ok(()),
        code => Err(code),
    }
}

/// The client settings of a producer: Sluice's defaults, then the configured properties.
fn producer_config(properties: &BTreeMap<String, String>) -> ClientConfig {
    let mut client = ClientConfig::new();
    for (name, value) in DEFAULTS {
        client.set(*name, *value);
    }
    for (name, value) in properties {
        client.set(name, value);
    }
    client
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

/// A reader of a changelog topic with `config`'s connection settings and no producer,
/// so a running instance of the pipeline is not disturbed.
pub fn changelog_reader(config: &SinkConfig, topic: &str) -> Result<ChangelogReader, SinkError> {
    let properties = consumer_properties(&client_properties(&config.properties)?);
    ChangelogReader::new(&properties, topic, config.connect_timeout)
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
    let security = SecurityWatch::new(&properties);
    let producer: ThreadedProducer<DeliveryTracker> =
        match producer_config(&properties).create_with_context(DeliveryTracker::new(security)) {
            Ok(producer) => producer,
            Err(e) => return vec![SinkError::Config(redact(&e.to_string(), &properties))],
        };
    let producer = Arc::new(producer);
    let mut problems = Vec::new();
    for topic in topics {
        let (probe, name, wait) = (producer.clone(), topic.clone(), config.connect_timeout);
        let found = tokio::task::spawn_blocking(move || {
            topic_ready(probe.client(), probe.context().security(), &name, wait)
        })
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
    found: Result<TopicState, ProbeFailure>,
    topic: &str,
    bootstrap: &str,
    wait: Duration,
) -> Option<SinkError> {
    let (topic, bootstrap) = (topic.to_string(), bootstrap.to_string());
    match found {
        Ok(TopicState::Ready) => None,
        Ok(TopicState::Missing) => Some(SinkError::TopicMissing { topic, bootstrap }),
        Ok(TopicState::Unauthorized) => Some(SinkError::TopicUnauthorized { topic, bootstrap }),
        Err(ProbeFailure::Unanswered(detail)) => Some(SinkError::Unreachable {
            bootstrap,
            waited: wait,
            detail,
        }),
        Err(ProbeFailure::Security(failure)) => Some(SinkError::Security(failure)),
    }
}

/// What the cluster says about the sink's topic.
enum TopicState {
    Ready,
    Missing,
    Unauthorized,
}

/// Why a probe of the cluster found nothing.
enum ProbeFailure {
    /// No broker answered; librdkafka's last error.
    Unanswered(String),
    /// A broker refused the client's credentials or TLS.
    Security(Box<SecurityFailure>),
}

/// Waits up to `wait` for metadata that shows `topic` with partitions: `Missing` if
/// brokers answer but the topic never appears (a producer's metadata request creates it
/// where the broker allows), an error if no broker answers, at once if one refuses the
/// client's credentials or TLS.
fn topic_ready<C: ClientContext>(
    client: &Client<C>,
    security: &SecurityWatch,
    topic: &str,
    wait: Duration,
) -> Result<TopicState, ProbeFailure> {
    // Short requests, so that a security failure ends the wait soon after it happens.
    const ASK_FOR: Duration = Duration::from_millis(500);
    let deadline = std::time::Instant::now() + wait;
    let mut brokers_answered = false;
    let mut last_error = String::from("no broker answered");
    loop {
        let remaining = deadline.saturating_duration_since(std::time::Instant::now());
        match client.fetch_metadata(
            Some(topic),
            remaining.clamp(Duration::from_millis(100), ASK_FOR),
        ) {
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
        if !brokers_answered && let Some(failure) = security.explained_failure() {
            return Err(ProbeFailure::Security(Box::new(failure)));
        }
        if std::time::Instant::now() >= deadline {
            return if brokers_answered {
                Ok(TopicState::Missing)
            } else {
                Err(ProbeFailure::Unanswered(last_error))
            };
        }
        std::thread::sleep(Duration::from_millis(100));
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
            changelog_topic: None,
            delivery: DeliveryMode::ExactlyOnce,
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

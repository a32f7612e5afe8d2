//! The shared state: a compacted topic with one partition that every node reads from
//! the beginning and writes through. Records are keyed; an empty value removes a key.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer as _};
use rdkafka::util::Timeout;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use tokio::sync::mpsc;

use crate::config::ClusterConfig;
use crate::error::ClusterError;

/// Longest the cluster's topics take to answer before a start-up gives up.
const ANSWER_WAIT: Duration = Duration::from_secs(30);

/// One record of the shared state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateRecord {
    /// What it is about (`pipeline/<tenant>/<name>`, `blob/...`, ...).
    pub key: String,
    /// Its value; `None` removes the key.
    pub value: Option<Vec<u8>>,
    /// Its offset in the topic: records are applied in this order on every node.
    pub offset: i64,
}

/// Which of the cluster's shared topics a [`StateLog`] reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SharedTopic {
    /// What the operator and tenants asked for: tenants, modules, pipeline definitions.
    State,
    /// What the nodes report: which node runs each pipeline, where it is, how fast.
    Status,
}

impl SharedTopic {
    /// The topic's part in its name, and its name in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            SharedTopic::State => "state",
            SharedTopic::Status => "status",
        }
    }
}

/// One of the cluster's compacted topics: writes go to Kafka, and every record anyone
/// writes comes back, in topic order, through the receiver [`StateLog::open`] returns.
pub struct StateLog {
    producer: FutureProducer,
    what: &'static str,
    topic: String,
    bootstrap: String,
    replay_end: i64,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
}

fn client_config(config: &ClusterConfig) -> ClientConfig {
    let mut client = ClientConfig::new();
    for (name, value) in &config.kafka {
        client.set(name, value);
    }
    client
}

impl StateLog {
    /// Opens one of the shared topics (creating it, compacted, when missing) and starts
    /// reading it from the beginning: the receiver gets every record ever kept, then
    /// each new one. [`StateLog::replay_end`] says where the records written before the
    /// opening end.
    pub async fn open(
        config: &ClusterConfig,
        node: &str,
        shared: SharedTopic,
    ) -> Result<(StateLog, mpsc::UnboundedReceiver<StateRecord>), ClusterError> {
        let what = shared.name();
        let topic = config.shared_topic(shared);
        let bootstrap = config.bootstrap();
        let fail = |detail: String| ClusterError::Topic {
            what,
            topic: topic.clone(),
            bootstrap: bootstrap.clone(),
            detail,
        };
        create_topic(config, &topic, 1, &[("cleanup.policy", "compact")])
            .await
            .map_err(fail)?;
        let producer: FutureProducer = client_config(config)
            .set("client.id", format!("sluice-cluster-{node}"))
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "5")
            .create()
            .map_err(|e| fail(e.to_string()))?;
        let consumer: BaseConsumer = client_config(config)
            .set("client.id", format!("sluice-cluster-{node}"))
            .set(
                "group.id",
                format!("{}-{what}-reader-{node}", config.group()),
            )
            .set("enable.auto.commit", "false")
            .set("fetch.wait.max.ms", "50")
            .create()
            .map_err(|e| fail(e.to_string()))?;
        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset(&topic, 0, Offset::Beginning)
            .map_err(|e| fail(e.to_string()))?;
        consumer
            .assign(&assignment)
            .map_err(|e| fail(e.to_string()))?;
        let replay_end = high_watermark(&consumer, &topic).map_err(fail)?;
        let (records, received) = mpsc::unbounded_channel();
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (stop, topic) = (stop.clone(), topic.clone());
            std::thread::Builder::new()
                .name(format!("cluster-{what}"))
                .spawn(move || read(&consumer, &topic, &records, &stop))
                .map_err(|e| fail(e.to_string()))?
        };
        let log = StateLog {
            producer,
            what,
            topic,
            bootstrap,
            replay_end,
            stop,
            reader: Some(reader),
        };
        Ok((log, received))
    }

    /// The offset the records written before the opening end at: a node has caught up
    /// once it has applied the record before it.
    pub fn replay_end(&self) -> i64 {
        self.replay_end
    }

    /// The offset the records written so far end at (the next record's offset).
    pub async fn end_offset(&self) -> Result<i64, ClusterError> {
        let (producer, topic) = (self.producer.clone(), self.topic.clone());
        let high = tokio::task::spawn_blocking(move || {
            producer
                .client()
                .fetch_watermarks(&topic, 0, ANSWER_WAIT)
                .map(|(_, high)| high)
        })
        .await
        .expect("reading watermarks does not panic");
        high.map_err(|e| ClusterError::Topic {
            what: self.what,
            topic: self.topic.clone(),
            bootstrap: self.bootstrap.clone(),
            detail: format!("its end could not be read: {e}"),
        })
    }

    /// Writes a record (`None` removes the key) and returns its offset once Kafka has
    /// it; the record then comes back through the receiver on every node.
    pub async fn write(&self, key: &str, value: Option<&[u8]>) -> Result<i64, ClusterError> {
        let mut record = FutureRecord::<str, [u8]>::to(&self.topic).key(key);
        if let Some(value) = value {
            record = record.payload(value);
        }
        match self
            .producer
            .send(record, Timeout::After(ANSWER_WAIT))
            .await
        {
            Ok(delivered) => Ok(delivered.offset),
            Err((e, _)) => Err(ClusterError::Topic {
                what: self.what,
                topic: self.topic.clone(),
                bootstrap: self.bootstrap.clone(),
                detail: format!("writing `{key}` failed: {e}"),
            }),
        }
    }
}

impl Drop for StateLog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// Hands every record of the partition to `records`, in order, until told to stop or
/// nobody listens.
fn read(
    consumer: &BaseConsumer,
    topic: &str,
    records: &mpsc::UnboundedSender<StateRecord>,
    stop: &AtomicBool,
) {
    // librdkafka retries by itself; an outage is said once, not at every poll.
    let mut failing = false;
    while !stop.load(Ordering::Relaxed) && !records.is_closed() {
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Ok(message)) => {
                failing = false;
                let record = StateRecord {
                    key: String::from_utf8_lossy(message.key().unwrap_or_default()).into_owned(),
                    value: message.payload().map(<[u8]>::to_vec),
                    offset: message.offset(),
                };
                if records.send(record).is_err() {
                    return;
                }
            }
            Some(Err(error)) if !failing => {
                tracing::warn!(topic, %error, "Reading a topic of the cluster's failed; retrying.");
                failing = true;
            }
            Some(Err(_)) => {}
        }
    }
}

/// The partition's end offset, waiting for a topic created a moment ago to appear.
fn high_watermark(consumer: &BaseConsumer, topic: &str) -> Result<i64, String> {
    let deadline = Instant::now() + ANSWER_WAIT;
    loop {
        match consumer.fetch_watermarks(topic, 0, Duration::from_secs(2)) {
            Ok((_, high)) => return Ok(high),
            Err(e) if Instant::now() > deadline => {
                return Err(format!(
                    "it did not answer within {ANSWER_WAIT:?} ({e}); check that the brokers are up"
                ));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Creates `topic` with `partitions` partitions unless it exists; an existing topic
/// with another partition count is refused.
pub(crate) async fn create_topic(
    config: &ClusterConfig,
    topic: &str,
    partitions: i32,
    settings: &[(&str, &str)],
) -> Result<(), String> {
    let admin: AdminClient<DefaultClientContext> =
        client_config(config).create().map_err(|e| e.to_string())?;
    let replication = TopicReplication::Fixed(config.replication_factor.unwrap_or(-1));
    let mut new_topic = NewTopic::new(topic, partitions, replication);
    for (name, value) in settings {
        new_topic = new_topic.set(name, value);
    }
    let options = AdminOptions::new().operation_timeout(Some(ANSWER_WAIT));
    let results = admin
        .create_topics([&new_topic], &options)
        .await
        .map_err(|e| format!("creating it failed: {e}"))?;
    for result in results {
        match result {
            Ok(_) => {}
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {
                let metadata = admin
                    .inner()
                    .fetch_metadata(Some(topic), ANSWER_WAIT)
                    .map_err(|e| e.to_string())?;
                let found = metadata
                    .topics()
                    .iter()
                    .find(|t| t.name() == topic)
                    .map_or(0, |t| t.partitions().len());
                if found != partitions as usize {
                    return Err(format!(
                        "it has {found} partitions where the cluster needs {partitions}; the number of slots is fixed once the cluster exists"
                    ));
                }
            }
            Err((_, code)) => {
                return Err(format!(
                    "creating it failed ({code}); create it yourself with {partitions} partition(s)"
                ));
            }
        }
    }
    Ok(())
}

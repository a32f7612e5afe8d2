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
use crate::topic::SharedTopic;

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
        create_topic(
            config,
            &topic,
            Partitions::One,
            &[("cleanup.policy", "compact")],
        )
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

/// How many partitions a cluster topic has, which also says what to do when a topic
/// of that name exists with another count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Partitions {
    /// One partition: a shared topic, whose records every node applies in one order.
    One,
    /// One partition per slot: the slots topic.
    Slots(u32),
}

impl Partitions {
    fn count(self) -> usize {
        match self {
            Partitions::One => 1,
            Partitions::Slots(slots) => slots as usize,
        }
    }

    /// What an existing topic with `found` partitions means, and what to do about it.
    fn mismatch(self, found: usize) -> String {
        let needed = self.count();
        match self {
            Partitions::One => format!(
                "it has {found} partitions where the cluster needs {needed}, so that every node applies its records in one order; it was not made by a Sluice node: delete it if nothing else uses it, or give the cluster another name"
            ),
            Partitions::Slots(_) => format!(
                "it has {found} partitions where the cluster needs {needed}; the number of slots is fixed once the cluster exists: set [cluster] slots = {found}, or give the cluster another name"
            ),
        }
    }
}

/// What the metadata of a topic that creation found already there says.
#[derive(Debug, PartialEq, Eq)]
enum Existing {
    /// It has the partitions the cluster needs.
    Fits,
    /// Another node created it a moment ago and the brokers do not show its partitions
    /// yet: ask again.
    Appearing,
    /// It has another number of partitions.
    Differs(usize),
    /// The brokers refuse to describe it.
    Refused(RDKafkaErrorCode),
}

/// Judges a topic's metadata: `error` is the topic's error in it (a topic missing from
/// the answer counts as unknown), `found` its partition count.
fn judge(error: Option<RDKafkaErrorCode>, found: usize, needed: Partitions) -> Existing {
    match error {
        // A topic another node has just created is not in every broker's metadata yet:
        // the brokers answer that it is unknown or has no leader, or show no partitions.
        Some(
            RDKafkaErrorCode::UnknownTopicOrPartition
            | RDKafkaErrorCode::UnknownTopic
            | RDKafkaErrorCode::LeaderNotAvailable,
        ) => Existing::Appearing,
        Some(code) => Existing::Refused(code),
        None if found == 0 => Existing::Appearing,
        // The brokers write a topic and all its partitions at once, so a count other
        // than zero is the topic's count.
        None if found == needed.count() => Existing::Fits,
        None => Existing::Differs(found),
    }
}

/// Creates `topic` with the `partitions` it needs unless it exists; an existing topic is
/// waited for until the brokers show its partitions (a node starting at the same moment
/// may have created it a moment ago), and refused with another partition count.
pub(crate) async fn create_topic(
    config: &ClusterConfig,
    topic: &str,
    partitions: Partitions,
    settings: &[(&str, &str)],
) -> Result<(), String> {
    let admin: AdminClient<DefaultClientContext> =
        client_config(config).create().map_err(|e| e.to_string())?;
    let replication = TopicReplication::Fixed(config.replication_factor.unwrap_or(-1));
    let count = partitions.count();
    // At most 10,000 slots (the config is validated).
    let mut new_topic = NewTopic::new(topic, count as i32, replication);
    for (name, value) in settings {
        new_topic = new_topic.set(name, value);
    }
    let options = AdminOptions::new().operation_timeout(Some(ANSWER_WAIT));
    let results = admin
        .create_topics([&new_topic], &options)
        .await
        .map_err(|e| format!("creating it failed: {e}"))?;
    let mut exists = false;
    for result in results {
        match result {
            Ok(_) => {}
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => exists = true,
            Err((_, code)) => {
                return Err(format!(
                    "creating it failed ({code}); create it yourself with {count} partition(s)"
                ));
            }
        }
    }
    if !exists {
        return Ok(());
    }
    let topic = topic.to_string();
    tokio::task::spawn_blocking(move || wait_for_partitions(&admin, &topic, partitions))
        .await
        .expect("reading metadata does not panic")
}

/// Reads an existing topic's metadata until it shows the topic's partitions, for up to
/// [`ANSWER_WAIT`]; blocks.
fn wait_for_partitions(
    admin: &AdminClient<DefaultClientContext>,
    topic: &str,
    partitions: Partitions,
) -> Result<(), String> {
    let deadline = Instant::now() + ANSWER_WAIT;
    let mut waiting = false;
    loop {
        let last = match admin
            .inner()
            .fetch_metadata(Some(topic), Duration::from_secs(2))
        {
            Ok(metadata) => {
                let (error, found) = metadata
                    .topics()
                    .iter()
                    .find(|t| t.name() == topic)
                    .map_or((Some(RDKafkaErrorCode::UnknownTopicOrPartition), 0), |t| {
                        (t.error().map(RDKafkaErrorCode::from), t.partitions().len())
                    });
                match judge(error, found, partitions) {
                    Existing::Fits => return Ok(()),
                    Existing::Differs(found) => return Err(partitions.mismatch(found)),
                    Existing::Refused(code) => {
                        return Err(format!(
                            "it exists, but its metadata could not be read ({code})"
                        ));
                    }
                    Existing::Appearing => match error {
                        Some(code) => format!("the brokers answered {code}"),
                        None => "the brokers showed no partitions".to_string(),
                    },
                }
            }
            Err(e) => format!("reading its metadata failed: {e}"),
        };
        if !waiting {
            tracing::info!(
                topic,
                "The brokers do not show the partitions of a cluster topic that another node has just created yet; the node waits for them."
            );
            waiting = true;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "it was there when this node tried to create it, but the brokers did not show its {} partition(s) within {ANSWER_WAIT:?} ({last}); check that the brokers are up",
                partitions.count()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topic_another_node_just_created_is_waited_for() {
        for error in [
            Some(RDKafkaErrorCode::UnknownTopicOrPartition),
            Some(RDKafkaErrorCode::UnknownTopic),
            Some(RDKafkaErrorCode::LeaderNotAvailable),
            None,
        ] {
            assert_eq!(judge(error, 0, Partitions::One), Existing::Appearing);
            assert_eq!(judge(error, 0, Partitions::Slots(8)), Existing::Appearing);
        }
    }

    #[test]
    fn a_topic_with_its_partitions_fits_and_another_count_differs() {
        assert_eq!(judge(None, 1, Partitions::One), Existing::Fits);
        assert_eq!(judge(None, 8, Partitions::Slots(8)), Existing::Fits);
        assert_eq!(judge(None, 3, Partitions::One), Existing::Differs(3));
        assert_eq!(judge(None, 1, Partitions::Slots(8)), Existing::Differs(1));
    }

    #[test]
    fn a_topic_the_brokers_refuse_to_describe_is_refused() {
        assert_eq!(
            judge(
                Some(RDKafkaErrorCode::TopicAuthorizationFailed),
                0,
                Partitions::One
            ),
            Existing::Refused(RDKafkaErrorCode::TopicAuthorizationFailed)
        );
    }

    #[test]
    fn only_the_slots_topic_blames_the_slot_count() {
        let slots = Partitions::Slots(8).mismatch(4);
        assert!(
            slots.contains("has 4 partitions where the cluster needs 8"),
            "{slots}"
        );
        assert!(slots.contains("set [cluster] slots = 4"), "{slots}");
        let shared = Partitions::One.mismatch(3);
        assert!(
            shared.contains("has 3 partitions where the cluster needs 1"),
            "{shared}"
        );
        assert!(!shared.contains("slots"), "{shared}");
    }
}

//! An in-memory [`Sink`] for unit tests of the loop and of its supervisors: it keeps
//! committed transactions and injects, at a chosen call, each failure the Kafka sink
//! reports.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use sluice_sink::{SinkError, SinkRecord, SourcePosition, TopicRecord};
use sluice_state::{Changelog, ChangelogEntry, StoreError};

use crate::sink::Sink;

/// A failure the Kafka sink reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The transaction was aborted (retriable).
    Abort,
    /// Another instance took over the transactional id (fatal).
    Fence,
    /// The broker timed the transaction out: retriable, after a reconnect.
    TransactionTimeout,
    /// Kafka refused a record for good (names the record's row).
    Refuse,
    /// No broker answers: each call fails (retriable) until the broker is back.
    BrokerDown,
}

/// Which call fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Call {
    /// The n-th `send`, counting from 1.
    Send(usize),
    /// The n-th `commit`, counting from 1.
    Commit(usize),
}

/// A committed transaction: its records and the position stored with them.
#[derive(Clone, Debug)]
pub struct Transaction {
    /// The records, in the order they were sent.
    pub records: Vec<SinkRecord>,
    /// The position committed with them.
    pub position: SourcePosition,
}

/// What the sink saw; shared between the test and the sink the pipeline owns.
#[derive(Debug, Default)]
pub struct Seen {
    /// Committed transactions, in order.
    pub committed: Vec<Transaction>,
    /// Transactions rolled back, by the pipeline or by an injected failure.
    pub rollbacks: usize,
    /// Connections made.
    pub connects: usize,
    /// Connections the pipeline dropped.
    pub released: usize,
    sends: usize,
    commits: usize,
    pending: Vec<SinkRecord>,
    failures: BTreeMap<Call, Failure>,
    /// Calls that still fail because the broker is down.
    down_for: usize,
    /// Unusable until reconnected (after a transaction timeout).
    broken: bool,
    /// How long each send takes.
    send_delay: Duration,
}

impl Seen {
    /// The committed records' origins, in commit order; a state changelog's records
    /// (the only ones made of no row) are left out.
    pub fn origins(&self) -> Vec<(u64, u64)> {
        self.committed
            .iter()
            .flat_map(|t| &t.records)
            .filter_map(|r| r.origin.map(|o| (o.version, o.row)))
            .collect()
    }

    /// The position the last commit stored.
    pub fn stored(&self) -> Option<&SourcePosition> {
        self.committed.last().map(|t| &t.position)
    }
}

/// The sink; clones share what they saw.
#[derive(Clone, Debug, Default)]
pub struct MemorySink {
    seen: Arc<Mutex<Seen>>,
    /// Held only to count, when dropped with the last clone, as released.
    _connection: Option<Arc<Connection>>,
}

/// One connection; counted as released when the pipeline drops it.
#[derive(Debug)]
struct Connection(Arc<Mutex<Seen>>);

impl Drop for Connection {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).released += 1;
    }
}

impl MemorySink {
    /// A new connection to the same sink, as the loop makes one.
    pub async fn connect(&self) -> Result<MemorySink, SinkError> {
        let mut seen = self.seen();
        seen.connects += 1;
        seen.broken = false;
        Ok(MemorySink {
            seen: self.seen.clone(),
            _connection: Some(Arc::new(Connection(self.seen.clone()))),
        })
    }

    /// Up to `limit` of the committed records of `topic` (records naming no topic go to
    /// `default_topic`), newest first, their offsets counted from the topic's first.
    pub fn latest_records(
        &self,
        default_topic: &str,
        topic: &str,
        limit: usize,
    ) -> Vec<TopicRecord> {
        let seen = self.seen();
        let in_topic: Vec<&SinkRecord> = seen
            .committed
            .iter()
            .flat_map(|t| &t.records)
            .filter(|r| r.topic.as_deref().unwrap_or(default_topic) == topic)
            .collect();
        in_topic
            .iter()
            .enumerate()
            .rev()
            .take(limit)
            .map(|(offset, record)| TopicRecord {
                partition: 0,
                offset: offset as i64,
                timestamp_ms: None,
                key: record.key.clone(),
                value: record.value.clone(),
            })
            .collect()
    }

    /// Makes `call` fail with `failure`.
    pub fn fail(&self, call: Call, failure: Failure) -> &Self {
        self.seen().failures.insert(call, failure);
        self
    }

    /// Deletes a topic: its committed records are gone.
    pub fn delete_topic(&self, topic: &str) {
        for transaction in &mut self.seen().committed {
            transaction
                .records
                .retain(|record| record.topic.as_deref() != Some(topic));
        }
    }

    /// Makes each send take `delay`, so the loop's stages get ahead of it.
    pub fn slow_sends(&self, delay: Duration) -> &Self {
        self.seen().send_delay = delay;
        self
    }

    /// What the sink saw so far.
    pub fn seen(&self) -> MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The error for `failure`, about `record` when there is one.
    fn error(failure: Failure, record: Option<&SinkRecord>) -> SinkError {
        let kafka = |code| Box::new(KafkaError::MessageProduction(code));
        match failure {
            Failure::Abort => SinkError::Aborted {
                error: kafka(RDKafkaErrorCode::InvalidTransactionalState),
            },
            Failure::Fence => SinkError::Fenced {
                pipeline: "memory".into(),
                transactional_id: "sluice-memory".into(),
            },
            Failure::TransactionTimeout => SinkError::TransactionTimedOut {
                open_for: Duration::from_secs(120),
                limit: Duration::from_secs(60),
            },
            Failure::Refuse => {
                let origin = record
                    .and_then(|r| r.origin)
                    .expect("a refused record has a row");
                SinkError::Rejected {
                    pipeline: "memory".into(),
                    topic: "t".into(),
                    bootstrap: "memory".into(),
                    version: origin.version,
                    row: origin.row,
                    bytes: 0,
                    hint: "test",
                    error: kafka(RDKafkaErrorCode::MessageSizeTooLarge),
                }
            }
            Failure::BrokerDown => SinkError::Aborted {
                error: kafka(RDKafkaErrorCode::AllBrokersDown),
            },
        }
    }

    /// The failure of the call about to be made, if any; forgets the pending records
    /// when there is one, as the real sink does.
    fn check(seen: &mut Seen, call: Call, record: Option<&SinkRecord>) -> Result<(), SinkError> {
        if seen.broken {
            seen.pending.clear();
            return Err(SinkError::Fatal {
                bootstrap: "memory".into(),
                reason: "the producer was not reconnected after a transaction timeout".into(),
            });
        }
        let failure = match seen.failures.remove(&call) {
            Some(Failure::BrokerDown) => {
                seen.down_for = 2;
                Some(Failure::BrokerDown)
            }
            Some(failure) => Some(failure),
            None if seen.down_for > 0 => {
                seen.down_for -= 1;
                Some(Failure::BrokerDown)
            }
            None => None,
        };
        let Some(failure) = failure else {
            return Ok(());
        };
        seen.pending.clear();
        seen.rollbacks += 1;
        seen.broken = failure == Failure::TransactionTimeout;
        Err(Self::error(failure, record))
    }
}

impl Sink for MemorySink {
    async fn send(&mut self, records: Vec<SinkRecord>) -> Result<(), SinkError> {
        let delay = self.seen().send_delay;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let mut seen = self.seen();
        seen.sends += 1;
        let call = Call::Send(seen.sends);
        Self::check(&mut seen, call, records.first())?;
        seen.pending.extend(records);
        Ok(())
    }

    async fn commit(&mut self, position: &SourcePosition) -> Result<(), SinkError> {
        let mut seen = self.seen();
        seen.commits += 1;
        let call = Call::Commit(seen.commits);
        let first = seen.pending.first().cloned();
        Self::check(&mut seen, call, first.as_ref())?;
        let records = std::mem::take(&mut seen.pending);
        seen.committed.push(Transaction {
            records,
            position: position.clone(),
        });
        Ok(())
    }

    async fn rollback(&mut self) {
        let mut seen = self.seen();
        if !seen.pending.is_empty() {
            seen.rollbacks += 1;
        }
        seen.pending.clear();
    }

    async fn stored_position(&self) -> Result<Option<SourcePosition>, SinkError> {
        Ok(self.seen().stored().cloned())
    }

    fn changelog(&self, topic: &str) -> Result<Box<dyn Changelog>, SinkError> {
        Ok(Box::new(CommittedChangelog {
            seen: self.seen.clone(),
            topic: topic.to_string(),
        }))
    }
}

/// The committed records of a changelog topic, one offset per record.
struct CommittedChangelog {
    seen: Arc<Mutex<Seen>>,
    topic: String,
}

impl CommittedChangelog {
    fn entries(&self) -> Vec<ChangelogEntry> {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.committed
            .iter()
            .flat_map(|t| &t.records)
            .filter(|r| r.topic.as_deref() == Some(self.topic.as_str()))
            .map(|r| (r.key.clone().unwrap_or_default(), r.value.clone()))
            .collect()
    }
}

impl Changelog for CommittedChangelog {
    fn bounds(&self) -> Result<(u64, u64), StoreError> {
        Ok((0, self.entries().len() as u64))
    }

    fn read(
        &self,
        from: u64,
        end: u64,
        apply: &mut dyn FnMut(Vec<ChangelogEntry>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let entries = self.entries();
        let end = (end as usize).min(entries.len());
        apply(entries[(from as usize).min(end)..end].to_vec())
    }
}

//! An in-memory [`Delivery`] for the loop's unit tests: it keeps committed transactions
//! and injects, at a chosen call, each failure the Kafka sink reports.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use sluice_sink::{SinkError, SinkRecord, SourcePosition};

use crate::delivery::Delivery;

/// A failure the Kafka sink reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
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
pub(crate) enum Call {
    /// The n-th `send`, counting from 1.
    Send(usize),
    /// The n-th `commit`, counting from 1.
    Commit(usize),
}

/// A committed transaction: its records and the position stored with them.
#[derive(Clone, Debug)]
pub(crate) struct Transaction {
    pub records: Vec<SinkRecord>,
    pub position: SourcePosition,
}

/// What the sink saw; shared between the test and the sink the pipeline owns.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    pub committed: Vec<Transaction>,
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
}

impl Seen {
    /// The committed records' origins, in commit order.
    pub(crate) fn origins(&self) -> Vec<(u64, u64)> {
        self.committed
            .iter()
            .flat_map(|t| &t.records)
            .map(|r| {
                r.origin
                    .map(|o| (o.version, o.row))
                    .expect("records name their row")
            })
            .collect()
    }

    /// The position the last commit stored.
    pub(crate) fn stored(&self) -> Option<&SourcePosition> {
        self.committed.last().map(|t| &t.position)
    }
}

/// The sink; clones share what they saw.
#[derive(Clone, Debug, Default)]
pub(crate) struct MemoryDelivery {
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

impl MemoryDelivery {
    /// A new connection to the same sink, as the loop makes one.
    pub(crate) async fn connect(&self) -> Result<MemoryDelivery, SinkError> {
        let mut seen = self.seen();
        seen.connects += 1;
        seen.broken = false;
        Ok(MemoryDelivery {
            seen: self.seen.clone(),
            _connection: Some(Arc::new(Connection(self.seen.clone()))),
        })
    }

    /// Makes `call` fail with `failure`.
    pub(crate) fn fail(&self, call: Call, failure: Failure) -> &Self {
        self.seen().failures.insert(call, failure);
        self
    }

    /// What the sink saw so far.
    pub(crate) fn seen(&self) -> MutexGuard<'_, Seen> {
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

impl Delivery for MemoryDelivery {
    async fn send(&mut self, records: Vec<SinkRecord>) -> Result<(), SinkError> {
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
}

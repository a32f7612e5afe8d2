//! The seam between the pipeline loop and Kafka: send records, commit them with the
//! position after them, roll back. The loop connects one through a [`ConnectSink`], and
//! drops it to start afresh (after an error that left it unusable, or while idle).
//! [`KafkaSink`] in production; an in-memory sink (feature `memory`) that injects every
//! failure the real one reports in the loop's and the service's unit tests.

use std::future::Future;

use sluice_sink::{ChangelogReader, KafkaSink, SinkError, SinkRecord, SourcePosition};
use sluice_state::{Changelog, ChangelogEntry, StoreError};

/// Where a pipeline delivers its records and stores its position.
pub trait Sink: Send {
    /// Hands `records` over; nothing of them counts until [`Sink::commit`]. On
    /// error everything since the last commit is forgotten.
    fn send(
        &mut self,
        records: Vec<SinkRecord>,
    ) -> impl Future<Output = Result<(), SinkError>> + Send;

    /// Makes everything sent since the last commit durable together with `position`.
    /// On error nothing of it counts.
    fn commit(
        &mut self,
        position: &SourcePosition,
    ) -> impl Future<Output = Result<(), SinkError>> + Send;

    /// Forgets everything sent since the last commit.
    fn rollback(&mut self) -> impl Future<Output = ()> + Send;

    /// The position the last commit stored, if any.
    fn stored_position(
        &self,
    ) -> impl Future<Output = Result<Option<SourcePosition>, SinkError>> + Send;

    /// The committed records of `topic`, a stateful pipeline's changelog, to read back.
    fn changelog(&self, topic: &str) -> Result<Box<dyn Changelog>, SinkError>;
}

/// Makes a connected [`Sink`]; called at start-up and whenever the loop dropped
/// the last one.
pub trait ConnectSink<D>: Send + Sync {
    /// A new connection.
    fn connect(&self) -> impl Future<Output = Result<D, SinkError>> + Send;
}

impl<D, F, Fut> ConnectSink<D> for F
where
    F: Fn() -> Fut + Send + Sync,
    Fut: Future<Output = Result<D, SinkError>> + Send,
{
    fn connect(&self) -> impl Future<Output = Result<D, SinkError>> + Send {
        self()
    }
}

impl Sink for KafkaSink {
    async fn send(&mut self, records: Vec<SinkRecord>) -> Result<(), SinkError> {
        KafkaSink::send(self, records).await
    }

    async fn commit(&mut self, position: &SourcePosition) -> Result<(), SinkError> {
        KafkaSink::commit(self, position).await
    }

    async fn rollback(&mut self) {
        KafkaSink::rollback(self).await;
    }

    async fn stored_position(&self) -> Result<Option<SourcePosition>, SinkError> {
        self.load_position().await
    }

    fn changelog(&self, topic: &str) -> Result<Box<dyn Changelog>, SinkError> {
        Ok(Box::new(KafkaChangelog(self.changelog_reader(topic)?)))
    }
}

/// A changelog topic, through the sink's reader: what a restore reads.
pub struct KafkaChangelog(pub ChangelogReader);

impl KafkaChangelog {
    fn error(&self, error: impl std::fmt::Display) -> StoreError {
        StoreError::Changelog {
            topic: self.0.topic().to_string(),
            detail: error.to_string(),
        }
    }
}

impl Changelog for KafkaChangelog {
    fn bounds(&self) -> Result<(u64, u64), StoreError> {
        self.0.bounds().map_err(|e| self.error(e))
    }

    fn read(
        &self,
        from: u64,
        end: u64,
        apply: &mut dyn FnMut(Vec<ChangelogEntry>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.0
            .read(from, end, &mut |changes| {
                apply(changes).map_err(|e| e.to_string())
            })
            .map_err(|e| self.error(e))
    }
}

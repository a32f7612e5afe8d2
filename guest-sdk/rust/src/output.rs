//! Records a transform emits, and the errors it reports.

use crate::batch::Row;
use crate::bindings::sluice::transform::types as wit;

/// A Kafka record to produce.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Record {
    topic: Option<String>,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Vec<u8>)>,
}

impl Record {
    /// A record with no key, no value (a tombstone) and no headers.
    pub fn new() -> Record {
        Record::default()
    }

    /// Sets the key; Kafka partitions by it.
    pub fn key(mut self, key: impl Into<Vec<u8>>) -> Record {
        self.key = Some(key.into());
        self
    }

    /// Sets the value; a record without one is a tombstone.
    pub fn value(mut self, value: impl Into<Vec<u8>>) -> Record {
        self.value = Some(value.into());
        self
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: impl Into<Vec<u8>>) -> Record {
        self.headers.push((name.to_string(), value.into()));
        self
    }

    /// Sends the record to `topic` instead of the pipeline's topic.
    pub fn topic(mut self, topic: &str) -> Record {
        self.topic = Some(topic.to_string());
        self
    }
}

/// The records a transform emits for one batch, in order.
#[derive(Default)]
pub struct Output {
    records: Vec<(u32, Record)>,
}

impl Output {
    /// Emits a record made from `row`.
    pub fn emit(&mut self, row: &Row<'_>, record: Record) {
        self.records.push((row.index(), record));
    }

    /// The records emitted so far with their source row indexes (for unit tests).
    pub fn records(&self) -> &[(u32, Record)] {
        &self.records
    }

    pub(crate) fn into_wit(self) -> Vec<wit::OutputRecord> {
        self.records
            .into_iter()
            .map(|(source_row, r)| wit::OutputRecord {
                source_row,
                topic: r.topic,
                key: r.key,
                value: r.value,
                headers: r
                    .headers
                    .into_iter()
                    .map(|(key, value)| wit::Header { key, value })
                    .collect(),
            })
            .collect()
    }
}

/// A failure a transform reports: one row, or the whole batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// One row could not be transformed.
    Row {
        /// Index of the row within the batch.
        row: u32,
        /// Why, in a sentence.
        message: String,
    },
    /// The batch as a whole could not be transformed.
    Batch(String),
}

impl Error {
    /// An error about one row.
    pub fn row(row: u32, message: impl Into<String>) -> Error {
        Error::Row {
            row,
            message: message.into(),
        }
    }

    pub(crate) fn into_wit(self) -> wit::TransformError {
        match self {
            Error::Row { row, message } => wit::TransformError::Row(wit::RowError { row, message }),
            Error::Batch(message) => wit::TransformError::Batch(message),
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Row { row, message } => write!(f, "row {row}: {message}"),
            Error::Batch(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {}

//! The errors a transform reports. The batch, the output and the host calls all
//! return them, so they sit in a leaf of their own.

use sluice_model::helpers::HelperError;

/// A failure a transform reports: one row, or the whole batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// One row could not be transformed; the batch's records are discarded. Use
    /// [`Output::reject`](crate::Output::reject) to fail a row and keep the others.
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

pub(crate) fn helpers_error(e: HelperError) -> Error {
    Error::Batch(e.0)
}

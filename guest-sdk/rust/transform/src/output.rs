//! Records a transform emits, rows it rejects, and the errors it reports.

use std::collections::HashSet;

use sluice_model::helpers::HelperError;
use sluice_model::{PackedRecords, Record};

use crate::EncodeSpec;
use crate::batch::{Batch, Row};

/// The records a transform emits for one batch, in order, and the rows it rejected.
///
/// Records are packed as they are emitted, so a batch's output crosses the Wasm
/// boundary as a few flat lists.
#[derive(Default)]
pub struct Output {
    packed: PackedRecords,
    rejected: Vec<(u32, String)>,
    rejected_rows: HashSet<u32>,
    guest: bool,
}

impl Output {
    pub(crate) fn for_guest() -> Output {
        Output {
            guest: true,
            ..Output::default()
        }
    }

    /// Emits a record made from `row`.
    pub fn emit(&mut self, row: &Row<'_>, record: Record) {
        self.packed.push(&Record {
            source_row: row.index(),
            ..record
        });
    }

    /// Emits a record to the pipeline's topic without headers, from borrowed bytes:
    /// the fastest way to emit (no allocation per record).
    pub fn emit_bytes(&mut self, row: u32, key: Option<&[u8]>, value: Option<&[u8]>) {
        self.packed.push_parts(row, key, value);
    }

    /// Marks `row` as failed with why; the pipeline's error policy decides what
    /// happens to it (stop, skip, or dead-letter), and the other rows carry on. A row
    /// is rejected once: later rejections of it are ignored, as the host does.
    pub fn reject(&mut self, row: &Row<'_>, message: impl Into<String>) {
        self.reject_row(row.index(), message);
    }

    /// [`Output::reject`] by row index.
    pub fn reject_row(&mut self, row: u32, message: impl Into<String>) {
        if self.rejected_rows.insert(row) {
            self.rejected.push((row, message.into()));
        }
    }

    /// Has the host make one record per selected row natively (see
    /// [`EncodeSpec`]); returns how many. Natively the same code runs in-process.
    pub fn encode(&mut self, batch: &Batch, spec: &EncodeSpec) -> Result<u32, Error> {
        match (batch.guest(), batch.native()) {
            (Some(handle), _) => {
                // Keep the records in emission order: what was packed so far goes first.
                handle.emit_packed(std::mem::take(&mut self.packed));
                handle.emit_encoded(spec)
            }
            (None, Some(arrow)) => {
                sluice_model::helpers::encode(arrow, spec, &mut self.packed).map_err(helpers_error)
            }
            (None, None) => Err(Error::Batch("The batch has no data.".into())),
        }
    }

    /// The records emitted so far, for unit tests. In a module, records handed to the
    /// host by [`Output::encode`] are no longer here.
    pub fn records(&self) -> Vec<Record> {
        debug_assert!(!self.guest, "records() is for native unit tests");
        self.packed
            .clone()
            .unpack(u32::MAX)
            .expect("the SDK packs records consistently")
    }

    /// The rows rejected so far, with why.
    pub fn rejected(&self) -> &[(u32, String)] {
        &self.rejected
    }

    pub(crate) fn into_parts(self) -> (PackedRecords, Vec<(u32, String)>) {
        (self.packed, self.rejected)
    }
}

/// A failure a transform reports: one row, or the whole batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// One row could not be transformed; the batch's records are discarded. Use
    /// [`Output::reject`] to fail a row and keep the others.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_rejected_once_with_its_first_reason() {
        let mut out = Output::default();
        out.reject_row(3, "first");
        out.reject_row(3, "second");
        out.reject_row(4, "other");
        assert_eq!(
            out.rejected(),
            &[(3, "first".to_string()), (4, "other".to_string())]
        );
    }
}

//! Reading a range of the change feed: the kernel's change rows cut into batches with
//! positions, in parts of one schema each, with every schema change checked where the
//! read meets it.

use std::collections::VecDeque;
use std::sync::Arc;

use delta_kernel::arrow::array::{Array, AsArray, RecordBatch};
use delta_kernel::arrow::compute::cast;
use delta_kernel::arrow::datatypes::{DataType, Int64Type};
use delta_kernel::engine::arrow_data::ArrowEngineData;
use delta_kernel::schema::SchemaRef;
use delta_kernel::table_changes::TableChanges;
use delta_kernel::{Engine, EngineData, KernelError};
use url::Url;

use crate::batch::ChangeBatch;
use crate::coalesce::coalesce;
use crate::error::{SourceError, kernel_error};
use crate::schema_change::{SharedSchemaMemory, check_schema_change, table_columns};
use sluice_position::Position;

/// What a read of the change feed needs of its table.
pub(crate) struct Reading {
    /// The table as configured, for errors.
    pub(crate) table: String,
    /// Its root.
    pub(crate) url: Url,
    /// The kernel engine that reads it.
    pub(crate) engine: Arc<dyn Engine>,
    /// Where the schemas met are remembered for the next read.
    pub(crate) memory: SharedSchemaMemory,
    /// Most rows in one batch.
    pub(crate) batch_rows: usize,
}

impl Reading {
    /// Reads from `from` through version `to`; `before` is the schema of the rows
    /// delivered before `from`, if a change at `from.version` must be checked.
    pub(crate) fn start(
        self,
        from: Position,
        to: u64,
        before: Option<SchemaRef>,
    ) -> impl Iterator<Item = Result<ChangeBatch, SourceError>> + Send + 'static {
        let batch_rows = self.batch_rows;
        let mut range = RangeRead {
            cursor: Cursor::new(self.table.clone(), from, batch_rows),
            reading: self,
            to,
            windows: VecDeque::from([(from.version, to)]),
            split: false,
            schema: before,
            batches: None,
            window: (from.version, to),
            pending: Vec::new().into_iter(),
            ended: false,
        };
        coalesce(std::iter::from_fn(move || range.next_piece()), batch_rows)
    }
}

/// A read in progress: the windows of versions still to read, the kernel's batches of
/// the current one, and the schema of the rows handed out so far.
struct RangeRead {
    reading: Reading,
    cursor: Cursor,
    to: u64,
    /// Windows of versions still to read, first to last.
    windows: VecDeque<(u64, u64)>,
    /// Whether the windows were cut at every schema change (the whole range at first,
    /// which the kernel reads in one go when nothing in it changes the schema).
    split: bool,
    /// The schema of the rows before the next window, checked against its schema.
    schema: Option<SchemaRef>,
    batches: Option<KernelBatches>,
    /// The window being read.
    window: (u64, u64),
    pending: std::vec::IntoIter<ChangeBatch>,
    /// After an error nothing more comes.
    ended: bool,
}

impl RangeRead {
    fn next_piece(&mut self) -> Option<Result<ChangeBatch, SourceError>> {
        let result = self.advance();
        if matches!(result, Some(Err(_))) {
            self.ended = true;
        }
        result
    }

    fn advance(&mut self) -> Option<Result<ChangeBatch, SourceError>> {
        loop {
            if let Some(next) = self.pending.next() {
                return Some(Ok(next));
            }
            if self.ended {
                return None;
            }
            let Some(batches) = self.batches.as_mut() else {
                match self.open_window() {
                    Ok(true) => continue,
                    Ok(false) => return None,
                    Err(e) => return Some(Err(e)),
                }
            };
            let (first, last) = self.window;
            let table = &self.reading.table;
            match batches.next() {
                None => self.batches = None,
                Some(Err(e)) if schemas_differ(&e) && !self.split => {
                    // A version inside the window changed the schema: read on from
                    // where the rows got to, a window per schema.
                    let version = self.cursor.rewind();
                    if let Err(e) = self.split_from(version) {
                        return Some(Err(e));
                    }
                }
                Some(Err(e)) => return Some(Err(classify(table, first, last, e))),
                Some(Ok(data)) => {
                    let batch = match ArrowEngineData::try_from_engine_data(data) {
                        Ok(data) => RecordBatch::from(data),
                        Err(e) => return Some(Err(classify(table, first, last, e))),
                    };
                    match self.cursor.split(batch) {
                        Ok(split) => self.pending = split.into_iter(),
                        Err(e) => return Some(Err(e)),
                    }
                }
            }
        }
    }

    /// Starts reading the next window; `false` when none is left.
    fn open_window(&mut self) -> Result<bool, SourceError> {
        let Some((first, last)) = self.windows.pop_front() else {
            return Ok(false);
        };
        let reading = &self.reading;
        let changes = match TableChanges::try_new(
            reading.url.clone(),
            reading.engine.as_ref(),
            first,
            Some(last),
        ) {
            Ok(changes) => changes,
            Err(e) if schemas_differ(&e) && !self.split => {
                self.split_from(first)?;
                return Ok(true);
            }
            Err(e) => return Err(classify(&reading.table, first, last, e)),
        };
        let schema = Arc::new(table_columns(changes.schema()));
        if let Some(before) = &self.schema {
            check_schema_change(&reading.table, first, before, &schema)?;
        }
        reading.memory.remember(first..=last, schema.clone());
        self.schema = Some(schema);
        let scan = changes
            .into_scan_builder()
            .build()
            .and_then(|scan| scan.execute(reading.engine.clone()))
            .map_err(|e| classify(&reading.table, first, last, e))?;
        self.window = (first, last);
        self.batches = Some(Box::new(scan));
        Ok(true)
    }

    /// Replaces the windows left with ones from `version` through the end, cut at
    /// every version whose commit carries new metadata.
    fn split_from(&mut self, version: u64) -> Result<(), SourceError> {
        let reading = &self.reading;
        let mut bounds = vec![version];
        if version < self.to {
            bounds.extend(metadata_versions(
                &reading.table,
                &reading.url,
                reading.engine.as_ref(),
                version + 1,
                self.to,
            )?);
        }
        bounds.push(self.to + 1);
        self.windows = bounds.windows(2).map(|w| (w[0], w[1] - 1)).collect();
        self.split = true;
        self.batches = None;
        Ok(())
    }
}

/// Whether the kernel refused a range because its start and end schemas differ (it says
/// so in a typed error or, from `TableChanges::try_new`, in a generic one).
fn schemas_differ(error: &KernelError) -> bool {
    matches!(error, KernelError::ChangeDataFeedIncompatibleSchema(..))
        || error.to_string().contains("schemas are different")
}

/// Versions in `start..=end` whose commit carries a `metaData` action, the only
/// place a schema changes.
fn metadata_versions(
    table: &str,
    url: &Url,
    engine: &dyn Engine,
    start: u64,
    end: u64,
) -> Result<Vec<u64>, SourceError> {
    let fail = |e| kernel_error(table, "looking for schema changes", e);
    let files = (start..=end)
        .map(|v| {
            url.join(&format!("_delta_log/{v:020}.json"))
                .map(|url| (url, None))
                .map_err(|e| fail(KernelError::InvalidUrl(e)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let commits = engine.storage_handler().read_files(files).map_err(fail)?;
    let mut versions = Vec::new();
    for (version, commit) in (start..=end).zip(commits) {
        let commit = commit.map_err(fail)?;
        let has_metadata = commit.split(|&b| b == b'\n').any(|line| {
            serde_json::from_slice::<serde_json::Value>(line)
                .is_ok_and(|action| action.get("metaData").is_some())
        });
        if has_metadata {
            versions.push(version);
        }
    }
    Ok(versions)
}

/// The kernel's change rows of one part of a range.
type KernelBatches = Box<dyn Iterator<Item = Result<Box<dyn EngineData>, KernelError>> + Send>;

/// Tracks the position across the kernel's batches and cuts them into output batches.
struct Cursor {
    table: String,
    skip_until: Position,
    at: Position,
    batch_rows: usize,
}

impl Cursor {
    fn new(table: String, from: Position, batch_rows: usize) -> Cursor {
        Cursor {
            table,
            skip_until: from,
            at: Position::at_version(from.version),
            batch_rows,
        }
    }

    /// Prepares to read again from the start of the version the rows got to, skipping
    /// the rows already handed out; returns that version.
    fn rewind(&mut self) -> u64 {
        self.skip_until = self.skip_until.max(self.at);
        self.at = Position::at_version(self.at.version);
        self.at.version
    }

    fn split(&mut self, batch: RecordBatch) -> Result<Vec<ChangeBatch>, SourceError> {
        let versions = commit_versions(&self.table, &batch)?;
        let mut out = Vec::new();
        let mut start = 0;
        while start < versions.len() {
            let version = versions[start];
            if version < self.at.version {
                return Err(SourceError::OutOfOrder {
                    table: self.table.clone(),
                    previous: self.at.version,
                    found: version,
                });
            }
            if version > self.at.version {
                self.at = Position::at_version(version);
            }
            let run_end = versions[start..]
                .iter()
                .position(|&v| v != version)
                .map_or(versions.len(), |n| start + n);
            let mut row = start;
            if version == self.skip_until.version && self.at.row_offset < self.skip_until.row_offset
            {
                let skip =
                    (self.skip_until.row_offset - self.at.row_offset).min((run_end - row) as u64);
                self.at.row_offset += skip;
                row += skip as usize;
            }
            while row < run_end {
                let len = (run_end - row).min(self.batch_rows);
                self.at.row_offset += len as u64;
                out.push(ChangeBatch {
                    batch: batch.slice(row, len),
                    end: self.at,
                });
                row += len;
            }
            start = run_end;
        }
        Ok(out)
    }
}

fn commit_versions(table: &str, batch: &RecordBatch) -> Result<Vec<u64>, SourceError> {
    let missing = || SourceError::Kernel {
        table: table.to_string(),
        context: "reading _commit_version".to_string(),
        source: Box::new(KernelError::MissingColumn("_commit_version".to_string())),
    };
    let column = batch
        .column_by_name("_commit_version")
        .ok_or_else(missing)?;
    let column = cast(column, &DataType::Int64).map_err(|_| missing())?;
    let column = column.as_primitive::<Int64Type>();
    if column.null_count() > 0 {
        return Err(missing());
    }
    Ok(column.values().iter().map(|&v| v as u64).collect())
}

fn classify(table: &str, start: u64, end: u64, error: KernelError) -> SourceError {
    let table_s = table.to_string();
    match error {
        KernelError::ChangeDataFeedUnsupported(version) => SourceError::CdfDisabledInRange {
            table: table_s,
            version,
        },
        // An earlier version is there, so this one was cleaned up by nothing: the store's
        // listing was cut short.
        KernelError::StartVersionNotFound {
            requested,
            earliest,
        } if earliest <= requested => SourceError::LogListingIncomplete {
            table: table_s,
            version: requested,
        },
        KernelError::StartVersionNotFound {
            requested,
            earliest,
        } => SourceError::VersionUnavailable {
            table: table_s,
            requested,
            earliest,
        },
        e if schemas_differ(&e) => SourceError::SchemaChanged {
            table: table_s,
            version: start,
            detail: e.to_string(),
        },
        KernelError::FileNotFound(_) => SourceError::FileMissing {
            table: table_s,
            start,
            end,
            detail: error.to_string(),
        },
        e if e.to_string().contains("not found") => SourceError::FileMissing {
            table: table_s,
            start,
            end,
            detail: e.to_string(),
        },
        e => kernel_error(
            table,
            &format!("reading changes of versions {start}..={end}"),
            e,
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use delta_kernel::arrow::array::{Int64Array, RecordBatch};
    use delta_kernel::arrow::datatypes::{Field, Schema};

    use super::*;

    fn versions(v: &[i64]) -> RecordBatch {
        let schema = Schema::new(vec![Field::new("_commit_version", DataType::Int64, false)]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![Arc::new(Int64Array::from(v.to_vec()))],
        )
        .unwrap()
    }

    fn shape(batches: &[ChangeBatch]) -> Vec<(usize, Position)> {
        batches
            .iter()
            .map(|b| (b.batch.num_rows(), b.end))
            .collect()
    }

    #[test]
    fn batches_never_span_versions_and_respect_the_row_cap() {
        let mut cursor = Cursor::new("t".into(), Position::at_version(1), 2);
        let out = cursor.split(versions(&[1, 1, 1, 2])).unwrap();
        let p = |version, row_offset| Position {
            row_offset,
            ..Position::at_version(version)
        };
        assert_eq!(shape(&out), [(2, p(1, 2)), (1, p(1, 3)), (1, p(2, 1))]);
        let out = cursor.split(versions(&[2, 4])).unwrap();
        assert_eq!(shape(&out), [(1, p(2, 2)), (1, p(4, 1))]);
    }

    #[test]
    fn resuming_inside_a_version_skips_delivered_rows_across_kernel_batches() {
        let from = Position {
            row_offset: 3,
            ..Position::at_version(3)
        };
        let mut cursor = Cursor::new("t".into(), from, 10);
        assert!(cursor.split(versions(&[3, 3])).unwrap().is_empty());
        let out = cursor.split(versions(&[3, 3, 4])).unwrap();
        let p = |version, row_offset| Position {
            row_offset,
            ..Position::at_version(version)
        };
        assert_eq!(shape(&out), [(1, p(3, 4)), (1, p(4, 1))]);
    }

    #[test]
    fn rows_out_of_commit_order_are_an_error() {
        let mut cursor = Cursor::new("t".into(), Position::at_version(0), 10);
        cursor.split(versions(&[5])).unwrap();
        assert!(matches!(
            cursor.split(versions(&[4])),
            Err(SourceError::OutOfOrder { .. })
        ));
    }
}

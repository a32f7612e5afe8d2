//! The table as of one version, every row as an insert: what a pipeline that starts
//! with a snapshot delivers before the changes after that version.

use std::sync::Arc;

use delta_kernel::arrow::array::TimestampMicrosecondArray;
use delta_kernel::arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use delta_kernel::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use delta_kernel::engine::arrow_data::ArrowEngineData;
use delta_kernel::scan::state::{ScanFile, transform_to_logical};
use delta_kernel::{Engine, FileMeta, KernelError, Snapshot};

use crate::batch::ChangeBatch;
use crate::coalesce::coalesce;
use crate::error::SourceError;
use crate::error::kernel_error;
use crate::feed::ChangeFeed;
use sluice_position::Position;

impl ChangeFeed {
    /// Reads the table as of `from.version` as insert rows, skipping the first
    /// `from.row_offset` of them, in batches of at most `batch_rows`. Files are read in
    /// path order, so the offset names the same rows even after a checkpoint changes
    /// how the log is replayed. Each row carries `_change_type = insert`, the version
    /// and the version's commit timestamp, like Spark's initial snapshot.
    pub fn read_snapshot(
        &self,
        from: Position,
    ) -> Result<impl Iterator<Item = Result<ChangeBatch, SourceError>> + Send + 'static, SourceError>
    {
        let version = from.version;
        let table = self.table.clone();
        let fail = {
            let table = table.clone();
            move |e: KernelError| {
                kernel_error(
                    &table,
                    &format!("reading its snapshot at version {version}"),
                    e,
                )
            }
        };
        let snapshot = Snapshot::builder_for(self.url.as_str())
            .at_version(version)
            .build(self.engine.as_ref())
            .map_err(&fail)?;
        // The changes after a snapshot are checked against its schema.
        self.schemas.remember(version..=version, snapshot.schema());
        let timestamp_micros = snapshot
            .get_timestamp(self.engine.as_ref())
            .map_err(&fail)?
            * 1000;
        let scan = snapshot.clone().scan_builder().build().map_err(&fail)?;
        let mut files: Vec<ScanFile> = Vec::new();
        for metadata in scan.scan_metadata(self.engine.as_ref()).map_err(&fail)? {
            files = metadata
                .map_err(&fail)?
                .visit_scan_files(files, |files: &mut Vec<ScanFile>, file| files.push(file))
                .map_err(&fail)?;
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let reader = FileReader {
            engine: self.engine.clone(),
            table_root: snapshot.table_root().clone(),
            physical_schema: scan.physical_schema().clone(),
            logical_schema: scan.logical_schema().clone(),
        };
        let mut slicer = Slicer {
            version,
            timestamp_micros,
            skip: from.row_offset,
            at: Position::snapshot_at(version),
            batch_rows: self.options.batch_rows.max(1),
        };
        let mut pending: std::vec::IntoIter<ChangeBatch> = Vec::new().into_iter();
        let mut files = files.into_iter();
        let batch_rows = self.options.batch_rows.max(1);
        let pieces = std::iter::from_fn(move || {
            loop {
                if let Some(next) = pending.next() {
                    return Some(Ok(next));
                }
                let file = files.next()?;
                match reader.read(&file) {
                    Ok(batches) => {
                        pending = batches
                            .into_iter()
                            .flat_map(|batch| slicer.split(batch))
                            .collect::<Vec<_>>()
                            .into_iter();
                    }
                    Err(e) => return Some(Err(fail(e))),
                }
            }
        });
        Ok(coalesce(pieces, batch_rows))
    }
}

/// Reads one data file as logical rows with its deletion vector applied.
struct FileReader {
    engine: Arc<dyn Engine>,
    table_root: url::Url,
    physical_schema: delta_kernel::schema::SchemaRef,
    logical_schema: delta_kernel::schema::SchemaRef,
}

impl FileReader {
    fn read(&self, file: &ScanFile) -> Result<Vec<RecordBatch>, KernelError> {
        let engine = self.engine.as_ref();
        let mut selection = file
            .dv_info
            .get_selection_vector(engine, &self.table_root)?;
        let meta = FileMeta {
            last_modified: file.modification_time,
            size: file.size.try_into().unwrap_or_default(),
            location: self.table_root.join(&file.path)?,
        };
        let mut batches = Vec::new();
        for data in engine.parquet_handler().read_parquet_files(
            &[meta],
            self.physical_schema.clone(),
            None,
        )? {
            let logical = transform_to_logical(
                engine,
                data?,
                &self.physical_schema,
                &self.logical_schema,
                file.transform.clone(),
            )?;
            let rows = logical.len();
            let logical = match selection.as_mut() {
                Some(keep) => {
                    // The vector covers the whole file; this part covers `rows` rows, and
                    // a short vector keeps every row past its end.
                    let rest = keep.split_off(rows.min(keep.len()));
                    let mut part = std::mem::replace(keep, rest);
                    part.resize(rows, true);
                    logical.apply_selection_vector(part)?
                }
                None => logical,
            };
            batches.push(RecordBatch::from(ArrowEngineData::try_from_engine_data(
                logical,
            )?));
        }
        Ok(batches)
    }
}

/// Adds the change columns and cuts rows into batches, skipping delivered ones.
struct Slicer {
    version: u64,
    timestamp_micros: i64,
    skip: u64,
    at: Position,
    batch_rows: usize,
}

impl Slicer {
    fn split(&mut self, batch: RecordBatch) -> Vec<ChangeBatch> {
        let skip = self.skip.min(batch.num_rows() as u64) as usize;
        self.skip -= skip as u64;
        self.at.row_offset += skip as u64;
        let mut out = Vec::new();
        let mut row = skip;
        while row < batch.num_rows() {
            let len = (batch.num_rows() - row).min(self.batch_rows);
            self.at.row_offset += len as u64;
            out.push(ChangeBatch {
                batch: self.with_change_columns(&batch.slice(row, len)),
                end: self.at,
            });
            row += len;
        }
        out
    }

    fn with_change_columns(&self, batch: &RecordBatch) -> RecordBatch {
        let rows = batch.num_rows();
        let mut fields: Vec<Field> = batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        let timestamp = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
        fields.push(Field::new("_change_type", DataType::Utf8, false));
        fields.push(Field::new("_commit_version", DataType::Int64, false));
        fields.push(Field::new("_commit_timestamp", timestamp, false));
        let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
        columns.push(Arc::new(StringArray::from(vec!["insert"; rows])));
        columns.push(Arc::new(Int64Array::from(vec![self.version as i64; rows])));
        columns.push(Arc::new(
            TimestampMicrosecondArray::from(vec![self.timestamp_micros; rows]).with_timezone("UTC"),
        ));
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
            .expect("the change columns have the batch's length")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n: i64) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from_iter_values(0..n))]).unwrap()
    }

    #[test]
    fn snapshot_rows_are_inserts_of_the_version_cut_and_resumable() {
        let mut slicer = Slicer {
            version: 7,
            timestamp_micros: 1_000,
            skip: 3,
            at: Position::snapshot_at(7),
            batch_rows: 2,
        };
        assert!(slicer.split(rows(2)).is_empty());
        let out = slicer.split(rows(4));
        let ends: Vec<_> = out
            .iter()
            .map(|b| (b.batch.num_rows(), b.end.row_offset))
            .collect();
        assert_eq!(ends, [(2, 5), (1, 6)]);
        assert!(out.iter().all(|b| b.end.snapshot && b.end.version == 7));
        let first = &out[0].batch;
        assert_eq!(first.num_columns(), 4);
        assert_eq!(first.schema().field(1).name(), "_change_type");
    }
}

//! The change feed reader.

use std::path::Path;
use std::sync::{Arc, Mutex};

use delta_kernel::arrow::array::{Array, AsArray, RecordBatch};
use delta_kernel::arrow::compute::cast;
use delta_kernel::arrow::datatypes::{DataType, Int64Type};
use delta_kernel::engine::arrow_data::ArrowEngineData;
use delta_kernel::history_manager::timestamp_range_to_versions;
use delta_kernel::object_store::path::Path as ObjectPath;
use delta_kernel::object_store::{self, DynObjectStore, GetOptions};
use delta_kernel::schema::StructType;
use delta_kernel::table_changes::TableChanges;
use delta_kernel::{Engine, EngineData, KernelError, Snapshot, SnapshotRef};
use delta_kernel_default_engine::DefaultEngineBuilder;
use delta_kernel_default_engine::executor::TaskExecutor;
use delta_kernel_default_engine::executor::tokio::TokioMultiThreadExecutor;
use url::Url;

use crate::coalesce::coalesce;
use crate::error::{SourceError, kernel_error};
use crate::storage::{StorageMetrics, StoreKind, open_store, store_kind};
use crate::vended::VendedCredentials;
use sluice_catalog::{Catalog, TableName};
use sluice_position::Position;

/// How to read a table.
#[derive(Clone, Debug)]
pub struct SourceOptions {
    /// Most rows in one batch.
    pub batch_rows: usize,
    /// Options for the object store (for example `aws_endpoint`); a key the table's
    /// store does not know is an error.
    pub storage_options: Vec<(String, String)>,
    /// Where the table's storage requests are counted.
    pub storage_metrics: Arc<StorageMetrics>,
    /// The catalog that names the table: when set, the table is named
    /// `catalog.schema.table` and its location and read credentials come from it.
    pub catalog: Option<Arc<dyn Catalog>>,
}

impl Default for SourceOptions {
    fn default() -> SourceOptions {
        SourceOptions {
            batch_rows: 10_000,
            storage_options: Vec::new(),
            storage_metrics: Arc::default(),
            catalog: None,
        }
    }
}

/// What reading a table's storage directly found: the log listed and one commit read.
#[derive(Clone, Debug)]
pub struct StorageAccess {
    /// The kind of store.
    pub kind: StoreKind,
    /// Where its credentials come from, in words.
    pub credentials: String,
    /// Files in `_delta_log/`.
    pub log_files: usize,
    /// The newest commit file, read whole.
    pub read: String,
    /// Its size in bytes.
    pub bytes: usize,
}

/// A batch of change rows and the position right after its last row.
#[derive(Debug)]
pub struct ChangeBatch {
    /// Data columns plus `_change_type`, `_commit_version` and `_commit_timestamp`.
    pub batch: RecordBatch,
    /// Where reading continues after this batch.
    pub end: Position,
}

/// The runtime every table's storage reads run on, one per process with a worker per
/// core. The kernel's default engine would start a thread and a runtime of its own for
/// every table, which a host of a thousand pipelines cannot afford.
fn reads_runtime() -> Result<Arc<TokioMultiThreadExecutor>, SourceError> {
    static RUNTIME: Mutex<Option<Arc<TokioMultiThreadExecutor>>> = Mutex::new(None);
    let mut runtime = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(runtime) = runtime.as_ref() {
        return Ok(runtime.clone());
    }
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    let started = TokioMultiThreadExecutor::new_owned_runtime(Some(cores), None)
        .map_err(|e| SourceError::Runtime(e.to_string()))?;
    Ok(runtime.insert(Arc::new(started)).clone())
}

/// One Delta table's change data feed.
pub struct ChangeFeed {
    pub(crate) table: String,
    pub(crate) url: Url,
    pub(crate) engine: Arc<dyn Engine>,
    pub(crate) options: SourceOptions,
    store: Arc<DynObjectStore>,
    store_kind: StoreKind,
    credentials: String,
    /// The newest snapshot seen, which the next look for new versions updates from
    /// instead of replaying the log again.
    latest: Mutex<Option<SnapshotRef>>,
}

impl ChangeFeed {
    /// Opens a table and checks that its change data feed can be read.
    pub fn open(table: &str, options: SourceOptions) -> Result<ChangeFeed, SourceError> {
        let (url, vended) = match &options.catalog {
            Some(catalog) => {
                let (url, vended) = in_catalog(catalog.clone(), table)?;
                (url, Some(vended))
            }
            None => (table_url(table)?, None),
        };
        let opened = open_store(
            table,
            &url,
            &options.storage_options,
            options.storage_metrics.clone(),
            vended,
        )?;
        let engine: Arc<dyn Engine> = Arc::new(
            DefaultEngineBuilder::new(opened.store.clone())
                .with_task_executor(reads_runtime()?)
                .build(),
        );
        let feed = ChangeFeed {
            table: table.to_string(),
            url,
            engine,
            options,
            store: opened.store,
            store_kind: opened.kind,
            credentials: opened.credentials,
            latest: Mutex::new(None),
        };
        let snapshot = feed.snapshot()?;
        if snapshot.table_properties().enable_change_data_feed != Some(true) {
            return Err(SourceError::CdfNotEnabled {
                table: feed.table.clone(),
            });
        }
        Ok(feed)
    }

    /// The table as configured.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The kind of store the table is in.
    pub fn store_kind(&self) -> StoreKind {
        self.store_kind
    }

    /// Where the store's credentials come from, in words (never the secret).
    pub fn credential_source(&self) -> &str {
        &self.credentials
    }

    /// Lists the table's log and reads its newest commit file straight from the store,
    /// so a storage problem (credentials, permissions, endpoint) is named as such.
    pub fn check_storage(&self) -> Result<StorageAccess, SourceError> {
        let store = self.store.clone();
        let log = ObjectPath::from_url_path(self.url.path())
            .map(|root| root.join("_delta_log"))
            .map_err(|e| SourceError::InvalidLocation {
                table: self.table.clone(),
                reason: e.to_string(),
            })?;
        let failed = |action: &str, error: object_store::Error| SourceError::StorageAccess {
            table: self.table.clone(),
            store: self.store_kind.to_string(),
            credentials: self.credentials.clone(),
            action: action.to_string(),
            detail: error.to_string(),
        };
        let listing = {
            let (store, log) = (store.clone(), log.clone());
            reads_runtime()?.block_on(async move { store.list_with_delimiter(Some(&log)).await })
        }
        .map_err(|e| failed("listing _delta_log/", e))?;
        let newest = listing
            .objects
            .iter()
            .filter(|object| object.location.as_ref().ends_with(".json"))
            .max_by(|a, b| a.location.cmp(&b.location))
            .ok_or_else(|| SourceError::NotADeltaTable {
                table: self.table.clone(),
            })?
            .location
            .clone();
        let read = {
            let location = newest.clone();
            reads_runtime()?.block_on(async move {
                store
                    .get_opts(&location, GetOptions::default())
                    .await?
                    .bytes()
                    .await
            })
        }
        .map_err(|e| failed(&format!("reading {newest}"), e))?;
        Ok(StorageAccess {
            kind: self.store_kind,
            credentials: self.credentials.clone(),
            log_files: listing.objects.len(),
            read: newest.filename().unwrap_or_default().to_string(),
            bytes: read.len(),
        })
    }

    /// The table's newest version. Looks only at the log after the newest version seen
    /// before, so polling a table with a long history stays cheap.
    pub fn latest_version(&self) -> Result<u64, SourceError> {
        let mut latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        let updated = latest.clone().and_then(|seen| {
            Snapshot::builder_from(seen)
                .build(self.engine.as_ref())
                .ok()
        });
        // Without a snapshot seen, or when the table was replaced under it, read afresh.
        let snapshot = match updated {
            Some(snapshot) => snapshot,
            None => self.snapshot()?,
        };
        let version = snapshot.version();
        *latest = Some(snapshot);
        Ok(version)
    }

    /// The first version committed at or after `timestamp_ms` (milliseconds since the
    /// epoch), as Spark's `startingTimestamp` resolves it: in-commit timestamps where the
    /// table has them, file modification times otherwise.
    pub fn version_at_or_after(&self, timestamp_ms: i64) -> Result<u64, SourceError> {
        let snapshot = self.snapshot()?;
        match timestamp_range_to_versions(&snapshot, self.engine.as_ref(), timestamp_ms, None) {
            Ok((version, _)) => Ok(version),
            Err(KernelError::LogHistory(e)) => Err(SourceError::NoVersionAfter {
                table: self.table.clone(),
                timestamp_ms,
                detail: e.to_string(),
            }),
            Err(e) => Err(kernel_error(
                &self.table,
                "finding the version of a timestamp",
                e,
            )),
        }
    }

    pub(crate) fn snapshot(&self) -> Result<SnapshotRef, SourceError> {
        Snapshot::builder_for(self.url.as_str())
            .build(self.engine.as_ref())
            .map_err(|e| match e {
                KernelError::FileNotFound(_) | KernelError::MissingVersion(_)
                    if !self.has_log() =>
                {
                    SourceError::NotADeltaTable {
                        table: self.table.clone(),
                    }
                }
                e => kernel_error(&self.table, "reading its latest snapshot", e),
            })
    }

    fn has_log(&self) -> bool {
        match self.url.to_file_path() {
            Ok(path) => path.join("_delta_log").is_dir(),
            Err(()) => true,
        }
    }

    /// Reads changes from `from` through version `to` (inclusive), in commit order.
    ///
    /// Rows before `from` (the first `from.row_offset` rows of `from.version`) are
    /// skipped. Batches hold at most `batch_rows` rows and never span two versions. A
    /// range across schema changes is read in parts, one per schema; an added nullable
    /// column appears from its version on, and any other change is an error that names
    /// the version.
    pub fn read(
        &self,
        from: Position,
        to: u64,
    ) -> Result<impl Iterator<Item = Result<ChangeBatch, SourceError>> + Send + 'static, SourceError>
    {
        let table = self.table.clone();
        let parts = self.parts(from.version, to)?;
        let engine = self.engine.clone();
        let mut cursor = Cursor::new(table.clone(), from, self.options.batch_rows.max(1));
        let mut pending: std::vec::IntoIter<ChangeBatch> = Vec::new().into_iter();
        let mut parts = parts.into_iter();
        let mut batches: Option<KernelBatches> = None;
        let mut range = (from.version, to);
        let batch_rows = self.options.batch_rows.max(1);
        let pieces = std::iter::from_fn(move || {
            loop {
                if let Some(next) = pending.next() {
                    return Some(Ok(next));
                }
                let data = match batches.as_mut().and_then(Iterator::next) {
                    Some(data) => data,
                    None => {
                        let changes = parts.next()?;
                        range = (changes.start_version(), changes.end_version());
                        let scan = changes
                            .into_scan_builder()
                            .build()
                            .and_then(|scan| scan.execute(engine.clone()));
                        match scan {
                            Ok(scan) => batches = Some(Box::new(scan)),
                            Err(e) => return Some(Err(classify(&table, range.0, range.1, e))),
                        }
                        continue;
                    }
                };
                let batch = match data.and_then(ArrowEngineData::try_from_engine_data) {
                    Ok(data) => RecordBatch::from(data),
                    Err(e) => return Some(Err(classify(&table, range.0, range.1, e))),
                };
                match cursor.split(batch) {
                    Ok(split) => pending = split.into_iter(),
                    Err(e) => return Some(Err(e)),
                }
            }
        });
        Ok(coalesce(pieces, batch_rows))
    }

    /// The range `start..=end` as parts with one schema each: the kernel reads a change
    /// feed only where the schema at the start equals the one at the end.
    fn parts(&self, start: u64, end: u64) -> Result<Vec<TableChanges>, SourceError> {
        let changes = |start, end| {
            TableChanges::try_new(self.url.clone(), self.engine.as_ref(), start, Some(end))
        };
        match changes(start, end) {
            Ok(whole) => return Ok(vec![whole]),
            Err(e) if schemas_differ(&e) => {}
            Err(e) => return Err(classify(&self.table, start, end, e)),
        }
        let mut bounds = vec![start];
        bounds.extend(self.metadata_versions(start + 1, end)?);
        bounds.push(end + 1);
        let mut parts: Vec<TableChanges> = Vec::new();
        for window in bounds.windows(2) {
            let (first, last) = (window[0], window[1] - 1);
            let part = changes(first, last).map_err(|e| classify(&self.table, first, last, e))?;
            if let Some(before) = parts.last() {
                check_additive(&self.table, first, before.schema(), part.schema())?;
            }
            parts.push(part);
        }
        Ok(parts)
    }

    /// Versions in `start..=end` whose commit carries a `metaData` action, the only
    /// place a schema changes.
    fn metadata_versions(&self, start: u64, end: u64) -> Result<Vec<u64>, SourceError> {
        let fail = |e| kernel_error(&self.table, "looking for schema changes", e);
        let files = (start..=end)
            .map(|v| {
                self.url
                    .join(&format!("_delta_log/{v:020}.json"))
                    .map(|url| (url, None))
                    .map_err(|e| fail(KernelError::InvalidUrl(e)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let commits = self
            .engine
            .storage_handler()
            .read_files(files)
            .map_err(fail)?;
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
}

/// Whether the kernel refused a range because its start and end schemas differ (it says
/// so in a typed error or, from `TableChanges::try_new`, in a generic one).
fn schemas_differ(error: &KernelError) -> bool {
    matches!(error, KernelError::ChangeDataFeedIncompatibleSchema(..))
        || error.to_string().contains("schemas are different")
}

/// Accepts a schema change that only adds nullable columns; anything else (a dropped,
/// renamed or retyped column) stops the read at `version`.
fn check_additive(
    table: &str,
    version: u64,
    before: &StructType,
    after: &StructType,
) -> Result<(), SourceError> {
    let breaking = |detail: String| SourceError::SchemaChanged {
        table: table.to_string(),
        version,
        detail,
    };
    for old in before.fields() {
        match after.field(old.name()) {
            None => {
                return Err(breaking(format!(
                    "column `{}` was dropped or renamed",
                    old.name()
                )));
            }
            Some(new) if new.data_type() != old.data_type() => {
                return Err(breaking(format!(
                    "column `{}` changed type from {} to {}",
                    old.name(),
                    old.data_type(),
                    new.data_type()
                )));
            }
            Some(_) => {}
        }
    }
    if let Some(new) = after
        .fields()
        .find(|f| before.field(f.name()).is_none() && !f.is_nullable())
    {
        return Err(breaking(format!(
            "column `{}` was added as NOT NULL",
            new.name()
        )));
    }
    Ok(())
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

/// Where `catalog` keeps the table it names `name`, and credentials that read it.
fn in_catalog(
    catalog: Arc<dyn Catalog>,
    name: &str,
) -> Result<(Url, Arc<VendedCredentials>), SourceError> {
    let name = TableName::parse(name)?;
    reads_runtime()?.block_on(async move {
        let table = catalog.table(&name).await?;
        let unreadable = |source: SourceError| SourceError::CatalogLocation {
            catalog: catalog.describe(),
            table: name.to_string(),
            location: table.location.clone(),
            source: Box::new(source),
        };
        let url = table_url(&table.location).map_err(unreadable)?;
        let kind = store_kind(&table.location, &url).map_err(unreadable)?;
        let vended = VendedCredentials::fetch(catalog, table, kind).await?;
        Ok((url, Arc::new(vended)))
    })
}

fn table_url(table: &str) -> Result<Url, SourceError> {
    let invalid = |reason: String| SourceError::InvalidLocation {
        table: table.to_string(),
        reason,
    };
    let local = match Url::parse(table) {
        Ok(url) if url.scheme() == "file" => url
            .to_file_path()
            .map_err(|()| invalid("not a local path".into()))?,
        Ok(url) if url.scheme().len() > 1 => {
            let mut url = url;
            if !url.path().ends_with('/') {
                url.set_path(&format!("{}/", url.path()));
            }
            return Ok(url);
        }
        _ => Path::new(table).to_path_buf(),
    };
    if !local.exists() {
        return Err(SourceError::TableNotFound {
            table: table.to_string(),
        });
    }
    if !local.join("_delta_log").is_dir() {
        return Err(SourceError::NotADeltaTable {
            table: table.to_string(),
        });
    }
    let absolute = local.canonicalize().map_err(|e| invalid(e.to_string()))?;
    Url::from_directory_path(&absolute).map_err(|()| invalid("not an absolute path".into()))
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

    fn fixture(name: &str) -> String {
        format!("{}/../../tests/data/cdf/{name}", env!("CARGO_MANIFEST_DIR"))
    }

    fn rows(feed: &ChangeFeed) -> Vec<RecordBatch> {
        let latest = feed.latest_version().unwrap();
        feed.read(Position::at_version(0), latest)
            .unwrap()
            .map(|batch| batch.unwrap().batch)
            .collect()
    }

    #[test]
    fn a_table_named_through_a_catalog_reads_as_by_path() {
        let path = fixture("delete");
        let catalog = Arc::new(sluice_catalog::InMemoryCatalog::default());
        catalog.add_table("main.sales.deletes", &format!("file://{path}"));
        catalog.vend(Ok(sluice_catalog::TemporaryCredentials {
            storage: sluice_catalog::StorageCredentials::None,
            expires_at: None,
        }));
        let options = |catalog: Option<Arc<dyn Catalog>>| SourceOptions {
            catalog,
            ..SourceOptions::default()
        };
        let named = ChangeFeed::open("main.sales.deletes", options(Some(catalog.clone()))).unwrap();
        let by_path = ChangeFeed::open(&path, options(None)).unwrap();
        assert_eq!(rows(&named), rows(&by_path));
        assert_eq!(named.table(), "main.sales.deletes");
        assert!(
            named
                .credential_source()
                .contains("vended by the in-memory catalog")
        );

        let unknown = ChangeFeed::open("main.sales.nothing", options(Some(catalog.clone())))
            .err()
            .unwrap()
            .to_string();
        assert!(
            unknown.contains("the in-memory catalog has no table main.sales.nothing"),
            "{unknown}"
        );
        let by_path_name = ChangeFeed::open(&path, options(Some(catalog.clone())))
            .err()
            .unwrap()
            .to_string();
        assert!(
            by_path_name.contains("catalog.schema.table"),
            "{by_path_name}"
        );
        catalog.add_table("main.sales.gone", "file:///definitely/not/here");
        let gone = ChangeFeed::open("main.sales.gone", options(Some(catalog)))
            .err()
            .unwrap()
            .to_string();
        assert!(
            gone.contains(
                "the in-memory catalog places main.sales.gone at file:///definitely/not/here"
            ),
            "{gone}"
        );
    }

    #[test]
    fn missing_paths_and_non_tables_are_named() {
        let missing = table_url("/definitely/not/here").unwrap_err();
        assert!(
            matches!(missing, SourceError::TableNotFound { .. }),
            "{missing}"
        );
        let dir = std::env::temp_dir();
        let not_delta = table_url(dir.to_str().unwrap()).unwrap_err();
        assert!(
            matches!(not_delta, SourceError::NotADeltaTable { .. }),
            "{not_delta}"
        );
    }
}

//! The change feed reader.

use std::path::Path;
use std::sync::{Arc, Mutex};

use delta_kernel::arrow::datatypes::{Schema as ArrowSchema, SchemaRef as ArrowSchemaRef};
use delta_kernel::engine::arrow_conversion::TryFromKernel;
use delta_kernel::history_manager::timestamp_range_to_versions;
use delta_kernel::object_store::path::Path as ObjectPath;
use delta_kernel::object_store::{self, DynObjectStore, GetOptions};
use delta_kernel::schema::SchemaRef;
use delta_kernel::{Engine, KernelError, Snapshot, SnapshotRef};
use delta_kernel_default_engine::DefaultEngineBuilder;
use delta_kernel_default_engine::executor::TaskExecutor;
use delta_kernel_default_engine::executor::tokio::TokioMultiThreadExecutor;
use url::Url;

use crate::batch::ChangeBatch;
use crate::changes::Reading;
use crate::error::{SourceError, kernel_error};
use crate::schema_change::{Preceded, SharedSchemaMemory};
use crate::storage::{StorageMetrics, open_store};
use crate::store_kind::{StoreKind, store_kind};
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

/// Gives the process the rustls provider (ring) that the default engine's HTTP client
/// takes its TLS from; built without one of its own, it would panic on its first
/// presigned file URL. Installing twice keeps the first, which serves as well.
fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A version's columns and commit time.
#[derive(Clone, Debug)]
pub struct VersionInfo {
    /// The table's columns as of the version.
    pub schema: ArrowSchemaRef,
    /// When the version was committed, in milliseconds since the epoch (its in-commit
    /// timestamp, or its commit file's modification time).
    pub committed_ms: i64,
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
    /// The schema the last read met, shared with the reads.
    pub(crate) schemas: SharedSchemaMemory,
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
        install_tls_provider();
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
            schemas: SharedSchemaMemory::default(),
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
        let (first, _) =
            self.versions_between(timestamp_ms, None, |detail| SourceError::NoVersionAfter {
                table: self.table.clone(),
                timestamp_ms,
                detail,
            })?;
        Ok(first)
    }

    /// The last version committed at or before `timestamp_ms`, as Spark's
    /// `endingTimestamp` resolves it.
    pub fn version_at_or_before(&self, timestamp_ms: i64) -> Result<u64, SourceError> {
        let (_, last) = self.versions_between(0, Some(timestamp_ms), |detail| {
            SourceError::NoVersionBefore {
                table: self.table.clone(),
                timestamp_ms,
                detail,
            }
        })?;
        Ok(last)
    }

    /// The first version committed at or after `start_ms` and the last at or before
    /// `end_ms` (the latest without one); `missing` words a range with no version.
    fn versions_between(
        &self,
        start_ms: i64,
        end_ms: Option<i64>,
        missing: impl FnOnce(String) -> SourceError,
    ) -> Result<(u64, u64), SourceError> {
        let snapshot = self.snapshot()?;
        match timestamp_range_to_versions(&snapshot, self.engine.as_ref(), start_ms, end_ms) {
            Ok((first, last)) => Ok((first, last.unwrap_or(snapshot.version()))),
            Err(KernelError::LogHistory(e)) => Err(missing(e.to_string())),
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
    /// column appears from its version on, and any other change ends the read with an
    /// error that names the version and the change, after the rows of the versions
    /// before it. When `preceded` says rows before `from` were delivered, a change at
    /// `from.version` itself is checked against the schema of the version before.
    pub fn read(
        &self,
        from: Position,
        to: u64,
        preceded: Preceded,
    ) -> Result<impl Iterator<Item = Result<ChangeBatch, SourceError>> + Send + 'static, SourceError>
    {
        let before = match preceded {
            Preceded::ByEarlierRows if from.row_offset == 0 && from.version > 0 => {
                Some(self.schema_of(from.version - 1)?)
            }
            // Rows of `from.version` were delivered in its own schema, or none came before.
            _ => None,
        };
        let reading = Reading {
            table: self.table.clone(),
            url: self.url.clone(),
            engine: self.engine.clone(),
            memory: self.schemas.clone(),
            batch_rows: self.options.batch_rows.max(1),
        };
        Ok(reading.start(from, to, before))
    }

    /// The table's columns as of `version`, in Arrow types, and when it was committed
    /// (milliseconds since the epoch).
    pub fn version_info(&self, version: u64) -> Result<VersionInfo, SourceError> {
        let fail = |e: KernelError| {
            kernel_error(
                &self.table,
                &format!("reading the schema and commit time of version {version}"),
                e,
            )
        };
        let snapshot = Snapshot::builder_for(self.url.as_str())
            .at_version(version)
            .build(self.engine.as_ref())
            .map_err(fail)?;
        let schema = ArrowSchema::try_from_kernel(snapshot.schema().as_ref())
            .map_err(|e| fail(KernelError::Arrow(e)))?;
        Ok(VersionInfo {
            schema: Arc::new(schema),
            committed_ms: snapshot.get_timestamp(self.engine.as_ref()).map_err(fail)?,
        })
    }

    /// The schema of `version`: remembered from the last read when it covered it,
    /// otherwise from the table's snapshot at that version.
    fn schema_of(&self, version: u64) -> Result<SchemaRef, SourceError> {
        if let Some(schema) = self.schemas.of(version) {
            return Ok(schema);
        }
        let snapshot = Snapshot::builder_for(self.url.as_str())
            .at_version(version)
            .build(self.engine.as_ref())
            .map_err(|e| {
                kernel_error(
                    &self.table,
                    &format!(
                        "reading the schema of version {version}, which a schema change after it is checked against"
                    ),
                    e,
                )
            })?;
        let schema = snapshot.schema();
        self.schemas.remember(version..=version, schema.clone());
        Ok(schema)
    }
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use delta_kernel::arrow::array::RecordBatch;

    use super::*;

    #[test]
    fn the_default_engines_http_client_has_a_tls_provider() {
        install_tls_provider();
        reqwest::Client::builder()
            .build()
            .expect("a client for presigned file URLs");
    }

    /// The versions of the rows read before the read ended, and how it ended.
    fn read_until_error(
        feed: &ChangeFeed,
        from: u64,
        to: u64,
        preceded: Preceded,
    ) -> (Vec<u64>, Option<SourceError>) {
        let mut versions = Vec::new();
        for batch in feed.read(Position::at_version(from), to, preceded).unwrap() {
            match batch {
                Ok(batch) => versions.push(batch.end.version),
                Err(e) => return (versions, Some(e)),
            }
        }
        (versions, None)
    }

    #[test]
    fn a_rename_stops_a_read_after_the_versions_before_it_and_names_both_columns() {
        let feed =
            ChangeFeed::open(&fixture("column_mapping_rename"), SourceOptions::default()).unwrap();
        let (versions, error) = read_until_error(&feed, 0, 6, Preceded::Nothing);
        assert_eq!(versions, [1, 2], "the rows of versions 1 and 2 come first");
        let error = error.expect("the rename stops the read").to_string();
        assert!(
            error.contains("changed its schema at version 3")
                && error.contains("column `value` was renamed to `amount (eur)`"),
            "{error}"
        );
    }

    #[test]
    fn a_read_after_earlier_rows_checks_the_change_at_its_first_version() {
        let feed =
            ChangeFeed::open(&fixture("column_mapping_rename"), SourceOptions::default()).unwrap();
        let (_, error) = read_until_error(&feed, 3, 6, Preceded::ByEarlierRows);
        let error = error.expect("the version before 3 had `value`").to_string();
        assert!(error.contains("was renamed to `amount (eur)`"), "{error}");
        // A start there takes the new schema as its first.
        let (versions, error) = read_until_error(&feed, 3, 6, Preceded::Nothing);
        assert!(error.is_none(), "{error:?}");
        assert_eq!(versions.first(), Some(&4));
        // Following: the read of versions up to 2 leaves the schema for the next one.
        let (_, error) = read_until_error(&feed, 0, 2, Preceded::Nothing);
        assert!(error.is_none(), "{error:?}");
        let (_, error) = read_until_error(&feed, 3, 3, Preceded::ByEarlierRows);
        assert!(
            error.is_some(),
            "a following read of version 3 alone must stop"
        );
        let (versions, error) = read_until_error(&feed, 4, 6, Preceded::ByEarlierRows);
        assert!(error.is_none(), "{error:?}");
        assert_eq!(versions.last(), Some(&6));
    }

    fn fixture(name: &str) -> String {
        format!("{}/../../tests/data/cdf/{name}", env!("CARGO_MANIFEST_DIR"))
    }

    fn rows(feed: &ChangeFeed) -> Vec<RecordBatch> {
        let latest = feed.latest_version().unwrap();
        feed.read(Position::at_version(0), latest, Preceded::Nothing)
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

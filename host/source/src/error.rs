//! Errors of reading a change feed, each saying what to do.

use delta_kernel::KernelError;
use delta_kernel::object_store;
use sluice_catalog::CatalogError;

/// Why a change feed could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The catalog that names the table could not name or open it.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The location a catalog gives for a table cannot be read.
    #[error("{catalog} places {table} at {location}, which cannot be read: {source}")]
    CatalogLocation {
        /// The catalog, described.
        catalog: String,
        /// The table's catalog name.
        table: String,
        /// The location the catalog gave.
        location: String,
        /// Why it cannot be read.
        source: Box<SourceError>,
    },
    /// The runtime for storage reads could not start (threads or memory ran out).
    #[error(
        "Cannot start the runtime that reads tables: {0}. The host is out of threads or memory."
    )]
    Runtime(String),
    /// The table location cannot be parsed.
    #[error("Table location `{table}` is not a path or URL: {reason}")]
    InvalidLocation {
        /// The configured location.
        table: String,
        /// Why it does not parse.
        reason: String,
    },
    /// A configured storage option is not one the table's store knows.
    #[error(
        "Table {table}: `{key}` in [source.storage_options] is not an option of {store}. Check its spelling against docs/source.md; options are named as in the object store crate (for example `aws_endpoint`, `azure_storage_account_name`, `google_service_account`)."
    )]
    UnknownStorageOption {
        /// The configured location.
        table: String,
        /// The kind of store.
        store: String,
        /// The option as configured.
        key: String,
    },
    /// The store's options do not make a usable store (a missing account, a bad URL).
    #[error(
        "Table {table}: cannot set up {store} access: {detail}. Check [source.storage_options] and the environment (docs/source.md lists what each store needs)."
    )]
    StorageConfig {
        /// The configured location.
        table: String,
        /// The kind of store.
        store: String,
        /// The object store's explanation.
        detail: String,
    },
    /// The store refused or failed a direct read of the table's files.
    #[error(
        "Table {table}: {action} in {store} failed (credentials: {credentials}): {detail}. Check the credentials and that they may read the table's location, and the endpoint in [source.storage_options]."
    )]
    StorageAccess {
        /// The configured location.
        table: String,
        /// The kind of store.
        store: String,
        /// Where the credentials came from.
        credentials: String,
        /// What was being done.
        action: String,
        /// The store's explanation.
        detail: String,
    },
    /// Nothing exists at the table's path.
    #[error("Table path {table} does not exist. Check `table` in the [source] section.")]
    TableNotFound {
        /// The configured location.
        table: String,
    },
    /// The location holds no Delta log.
    #[error(
        "{table} is not a Delta table: it has no _delta_log directory. Check `table` in the [source] section."
    )]
    NotADeltaTable {
        /// The configured location.
        table: String,
    },
    /// The table's current version does not have the change data feed enabled.
    #[error(
        "Table {table} does not have the change data feed enabled, so its updates and deletes cannot be read. Enable it with `ALTER TABLE <table> SET TBLPROPERTIES (delta.enableChangeDataFeed = true)`, then start from the version after that change."
    )]
    CdfNotEnabled {
        /// The configured location.
        table: String,
    },
    /// Part of the requested range was written without the change data feed.
    #[error(
        "Table {table} did not have the change data feed enabled at version {version}, so changes from that version cannot be read. Start from a later version (the one after CDF was enabled)."
    )]
    CdfDisabledInRange {
        /// The configured location.
        table: String,
        /// The first version without CDF.
        version: u64,
    },
    /// The log for the requested versions was cleaned up.
    #[error(
        "Table {table} no longer has version {requested} (log retention cleaned it up); the earliest available version is {earliest}. Reset the pipeline's position to version {earliest} or later, accepting that the changes in between are lost."
    )]
    VersionUnavailable {
        /// The configured location.
        table: String,
        /// The version asked for.
        requested: u64,
        /// The earliest version still available.
        earliest: u64,
    },
    /// The store listed the log without a version that earlier ones are listed before:
    /// the listing failed part way (a storage fault), not log retention.
    #[error(
        "Table {table}: the store's listing of the log left out version {version} although earlier versions are listed, so the listing was cut short by a storage fault. The read is retried; if this persists, check the store's health."
    )]
    LogListingIncomplete {
        /// The configured location.
        table: String,
        /// The version left out.
        version: u64,
    },
    /// The schema changed in a way a reader cannot follow (a column dropped, renamed or
    /// retyped).
    #[error(
        "Table {table} changed its schema at version {version} in a way the pipeline cannot follow ({detail}). Records made before and after would not fit one shape; restart the pipeline from version {version} or later (`sluice position reset --to-version {version}` or `sluice run --restart` with a new start), or from a snapshot (`snapshot = true`)."
    )]
    SchemaChanged {
        /// The configured location.
        table: String,
        /// The version that changed the schema.
        version: u64,
        /// What changed.
        detail: String,
    },
    /// A data file the log points to is gone, typically after VACUUM.
    #[error(
        "Table {table}: a file needed for versions {start}..={end} is missing, usually because VACUUM removed it: {detail}. Reset the pipeline's position to a version whose files still exist (`sluice position reset`), or start again from a snapshot of the table (`snapshot = true` with `sluice run --restart`)."
    )]
    FileMissing {
        /// The configured location.
        table: String,
        /// Start of the range.
        start: u64,
        /// End of the range.
        end: u64,
        /// The kernel's explanation.
        detail: String,
    },
    /// No commit is at or after the starting timestamp.
    #[error(
        "Table {table} has no commit at or after the starting timestamp ({timestamp_ms} ms since the epoch): {detail}. Use an earlier `starting_timestamp`, or `starting_version = \"latest\"` for only changes from now on."
    )]
    NoVersionAfter {
        /// The configured location.
        table: String,
        /// The starting timestamp, in milliseconds since the epoch.
        timestamp_ms: i64,
        /// The kernel's explanation.
        detail: String,
    },
    /// No commit is at or before the ending timestamp.
    #[error(
        "Table {table} has no commit at or before the ending timestamp ({timestamp_ms} ms since the epoch): {detail}. Use a later ending timestamp."
    )]
    NoVersionBefore {
        /// The configured location.
        table: String,
        /// The ending timestamp, in milliseconds since the epoch.
        timestamp_ms: i64,
        /// The kernel's explanation.
        detail: String,
    },
    /// Any other error from the Delta kernel.
    #[error("Cannot read table {table} ({context}): {source}")]
    Kernel {
        /// The configured location.
        table: String,
        /// What the reader was doing.
        context: String,
        /// The kernel's error.
        #[source]
        source: Box<KernelError>,
    },
    /// The kernel returned rows out of commit order (a bug; the reader stops).
    #[error("Table {table}: change rows arrived out of order (version {found} after {previous}).")]
    OutOfOrder {
        /// The configured location.
        table: String,
        /// Version before.
        previous: u64,
        /// Version after.
        found: u64,
    },
}

impl SourceError {
    /// Whether the error is the table's storage failing for a while (connections reset
    /// or refused, timeouts, 5xx answers, all after the object store's own retries), so
    /// reading again later can succeed.
    pub fn is_transient(&self) -> bool {
        let source = match self {
            SourceError::Kernel { source, .. } => source,
            SourceError::LogListingIncomplete { .. } => return true,
            SourceError::Catalog(catalog) => return catalog.is_transient(),
            SourceError::CatalogLocation { source, .. } => return source.is_transient(),
            _ => return false,
        };
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(source.as_ref());
        while let Some(error) = cause {
            if let Some(store) = error.downcast_ref::<object_store::Error>() {
                return matches!(store, object_store::Error::Generic { .. });
            }
            if let Some(io) = error.downcast_ref::<std::io::Error>() {
                use std::io::ErrorKind::*;
                if matches!(
                    io.kind(),
                    ConnectionReset
                        | ConnectionAborted
                        | ConnectionRefused
                        | TimedOut
                        | UnexpectedEof
                        | BrokenPipe
                        | Interrupted
                ) {
                    return true;
                }
            }
            cause = error.source();
        }
        // Some readers keep only the message of the store's error.
        let message = source.to_string();
        TRANSIENT_MARKERS
            .iter()
            .any(|marker| message.contains(marker))
    }
}

/// What the object store's messages say when the store, not the request, failed (and a
/// catalog's, when it could not be asked for credentials).
const TRANSIENT_MARKERS: [&str; 7] = [
    "could not be asked",
    "max_retries",
    "error sending request",
    "Service Unavailable",
    "Internal Server Error",
    "connection reset",
    "timed out",
];

/// A kernel error while doing `context` on `table`.
pub(crate) fn kernel_error(table: &str, context: &str, source: KernelError) -> SourceError {
    SourceError::Kernel {
        table: table.to_string(),
        context: context.to_string(),
        source: Box::new(source),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(source: KernelError) -> SourceError {
        kernel_error("s3://lake/deals", "reading", source)
    }

    #[test]
    fn storage_failures_are_transient_and_refusals_are_not() {
        let failed = object_store::Error::Generic {
            store: "S3",
            source: "connection reset by peer".into(),
        };
        assert!(kernel(KernelError::ObjectStore(failed)).is_transient());
        let missing = object_store::Error::NotFound {
            path: "deals/_delta_log/0.json".into(),
            source: "404".into(),
        };
        assert!(!kernel(KernelError::ObjectStore(missing)).is_transient());
        let refused = object_store::Error::PermissionDenied {
            path: "deals".into(),
            source: "403".into(),
        };
        assert!(!kernel(KernelError::ObjectStore(refused)).is_transient());
        // A reader that kept only the message.
        let said = KernelError::Generic(
            "Generic S3 error: error sending request, after 10 retries, max_retries: 10".into(),
        );
        assert!(kernel(said).is_transient());
        assert!(!kernel(KernelError::Generic("bad schema".into())).is_transient());
        let not_storage = SourceError::TableNotFound {
            table: "/data/deals".into(),
        };
        assert!(!not_storage.is_transient());
    }
}

//! Errors of reading a change feed, each saying what to do.

use delta_kernel::KernelError;

/// Why a change feed could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
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

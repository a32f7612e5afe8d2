//! Why a catalog could not name or open a table.

/// A catalog's refusal or failure, naming the catalog and the table.
#[derive(Clone, Debug, thiserror::Error)]
pub enum CatalogError {
    /// The name is not `catalog.schema.table`.
    #[error(
        "`{name}` is not a catalog table name; with [source.catalog] set, [source] table names a table as catalog.schema.table (quote a part holding dots in backticks)"
    )]
    InvalidName {
        /// The name as given.
        name: String,
    },
    /// The catalog's URL cannot be used.
    #[error("[source.catalog] url `{url}` is not an http(s) URL: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The catalog has no such table (or does not show it to this principal).
    #[error(
        "{catalog} has no table {table}: {message}. Check the name, and that the token's principal may see it (USE CATALOG, USE SCHEMA and SELECT)"
    )]
    TableNotFound {
        /// The catalog, described.
        catalog: String,
        /// The table's name.
        table: String,
        /// The catalog's words.
        message: String,
    },
    /// The token was not accepted.
    #[error(
        "{catalog} did not accept the token while {action} {table}: {message}. Check [source.catalog] token (a personal access token or an OAuth token of the principal that reads the table)"
    )]
    Unauthenticated {
        /// The catalog, described.
        catalog: String,
        /// The table's name.
        table: String,
        /// What was asked.
        action: &'static str,
        /// The catalog's words.
        message: String,
    },
    /// The principal may not do what was asked.
    #[error(
        "{catalog} denied permission while {action} {table}: {message}. Grant the token's principal SELECT on the table, USE CATALOG and USE SCHEMA on its parents, and EXTERNAL USE SCHEMA for credentials an engine outside the workspace reads with"
    )]
    PermissionDenied {
        /// The catalog, described.
        catalog: String,
        /// The table's name.
        table: String,
        /// What was asked.
        action: &'static str,
        /// The catalog's words.
        message: String,
    },
    /// The table is not a Delta table with files of its own.
    #[error(
        "{catalog} describes {table} as {what}; Sluice reads the change data feed of Delta tables with a storage location"
    )]
    NotReadable {
        /// The catalog, described.
        catalog: String,
        /// The table's name.
        table: String,
        /// What the catalog says it is.
        what: String,
    },
    /// The catalog could not be reached or failed; asking again may work.
    #[error(
        "{catalog} could not be asked while {action} {table}: {detail}. Check [source.catalog] url and that the catalog is up; Sluice asks again"
    )]
    Unavailable {
        /// The catalog, described.
        catalog: String,
        /// The table's name.
        table: String,
        /// What was asked.
        action: &'static str,
        /// What went wrong.
        detail: String,
    },
    /// The catalog refused for another reason, or answered something unreadable.
    #[error("{catalog} answered {status} while {action} {table}: {message}")]
    Refused {
        /// The catalog, described.
        catalog: String,
        /// The table's name.
        table: String,
        /// What was asked.
        action: &'static str,
        /// The HTTP status.
        status: u16,
        /// The catalog's words.
        message: String,
    },
}

impl CatalogError {
    /// Whether asking again later may succeed (the catalog unreachable, overloaded or
    /// failing), as opposed to a refusal that stays until someone changes something.
    pub fn is_transient(&self) -> bool {
        matches!(self, CatalogError::Unavailable { .. })
    }
}

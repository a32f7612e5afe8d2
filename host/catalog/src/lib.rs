//! Delta tables named through a catalog (`catalog.schema.table`) instead of by path.
//!
//! A [`Catalog`] answers two questions: where a table's files are, and which temporary
//! credentials read them. [`UnityCatalog`] asks a Unity Catalog server over its REST API
//! (Databricks, the open-source server, or any other implementation of
//! `/api/2.1/unity-catalog`); `InMemoryCatalog` (feature `memory`) answers from memory,
//! with failures to inject, so the code that renews credentials is tested without one.

mod error;
#[cfg(feature = "memory")]
mod memory;
mod table;
mod unity;

use async_trait::async_trait;

pub use error::CatalogError;
#[cfg(feature = "memory")]
pub use memory::InMemoryCatalog;
pub use table::{CatalogTable, StorageCredentials, TableName, TemporaryCredentials};
pub use unity::UnityCatalog;

/// Where a catalog keeps tables and how to read them.
#[async_trait]
pub trait Catalog: Send + Sync + std::fmt::Debug {
    /// The catalog in words, for messages (for example `Unity Catalog at https://...`).
    fn describe(&self) -> String;

    /// The table `name` names: its id, format and storage location.
    async fn table(&self, name: &TableName) -> Result<CatalogTable, CatalogError>;

    /// Temporary credentials that read `table`'s files.
    async fn read_credentials(
        &self,
        table: &CatalogTable,
    ) -> Result<TemporaryCredentials, CatalogError>;
}

//! A catalog in memory, for tests of what uses one: tables, the credentials it vends
//! one after another, and refusals to inject.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;

use crate::Catalog;
use crate::error::CatalogError;
use crate::table::{CatalogTable, TableName, TemporaryCredentials};

/// A catalog whose tables and credentials a test sets.
#[derive(Debug, Default)]
pub struct InMemoryCatalog {
    tables: Mutex<HashMap<TableName, String>>,
    credentials: Mutex<VecDeque<Result<TemporaryCredentials, CatalogError>>>,
    credential_requests: AtomicUsize,
}

impl InMemoryCatalog {
    /// The catalog's name in messages.
    pub const DESCRIBED: &str = "the in-memory catalog";

    /// Adds a table at `location`.
    pub fn add_table(&self, name: &str, location: &str) {
        let name = TableName::parse(name).expect("a three-part name");
        self.tables
            .lock()
            .unwrap()
            .insert(name, location.to_string());
    }

    /// Queues the answer to a request for credentials; the last one queued answers every
    /// request after it.
    pub fn vend(&self, answer: Result<TemporaryCredentials, CatalogError>) {
        self.credentials.lock().unwrap().push_back(answer);
    }

    /// How often credentials were asked for.
    pub fn credential_requests(&self) -> usize {
        self.credential_requests.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Catalog for InMemoryCatalog {
    fn describe(&self) -> String {
        Self::DESCRIBED.to_string()
    }

    async fn table(&self, name: &TableName) -> Result<CatalogTable, CatalogError> {
        let location = self.tables.lock().unwrap().get(name).cloned();
        match location {
            Some(location) => Ok(CatalogTable {
                name: name.clone(),
                id: format!("id-of-{name}"),
                location,
            }),
            None => Err(CatalogError::TableNotFound {
                catalog: self.describe(),
                table: name.to_string(),
                message: "no such table".into(),
            }),
        }
    }

    async fn read_credentials(
        &self,
        table: &CatalogTable,
    ) -> Result<TemporaryCredentials, CatalogError> {
        self.credential_requests.fetch_add(1, Ordering::SeqCst);
        let mut queue = self.credentials.lock().unwrap();
        let answer = if queue.len() > 1 {
            queue.pop_front()
        } else {
            queue.front().cloned()
        };
        answer.unwrap_or_else(|| {
            Err(CatalogError::PermissionDenied {
                catalog: self.describe(),
                table: table.name.to_string(),
                action: "asking for read credentials for",
                message: "no credentials were queued".into(),
            })
        })
    }
}

//! The local store on disk: one redb file per pipeline. redb rather than an LSM tree
//! (fjall, RocksDB): a node hosts many pipelines, and redb runs no background threads
//! per store, keeps one file, and is pure Rust; state is written once per commit, so
//! an LSM's write throughput would buy little.

use std::path::{Path, PathBuf};

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use sluice_engine::{StateChanges, StateEntry, StateUsage};

use crate::error::StoreError;
use crate::store::{Checkpoint, StateStore, StoreSnapshot};

const ENTRIES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("entries");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const USAGE: &str = "usage";
const CHECKPOINT: &str = "checkpoint";

/// A [`StateStore`] in a redb file.
pub struct RedbStore {
    db: Database,
    path: PathBuf,
    usage: std::sync::Mutex<StateUsage>,
}

impl RedbStore {
    /// Opens (or creates) the store in `dir`.
    pub fn open(dir: &Path) -> Result<RedbStore, StoreError> {
        let path = dir.join("state.redb");
        let open_error = |detail: String| StoreError::Open {
            path: path.clone(),
            detail,
        };
        std::fs::create_dir_all(dir).map_err(|e| open_error(e.to_string()))?;
        let db = Database::create(&path).map_err(|e| open_error(e.to_string()))?;
        let store = RedbStore {
            db,
            path: path.clone(),
            usage: std::sync::Mutex::default(),
        };
        let usage =
            store
                .meta::<(u64, u64)>(USAGE)?
                .map_or_else(StateUsage::default, |(keys, bytes)| StateUsage {
                    keys,
                    bytes,
                });
        *store.lock_usage() = usage;
        Ok(store)
    }

    fn io(&self, error: impl std::fmt::Display) -> StoreError {
        StoreError::Io {
            path: self.path.clone(),
            detail: error.to_string(),
        }
    }

    fn lock_usage(&self) -> std::sync::MutexGuard<'_, StateUsage> {
        self.usage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn meta<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<Option<T>, StoreError> {
        let read = self.db.begin_read().map_err(|e| self.io(e))?;
        let table = match read.open_table(META) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(self.io(e)),
        };
        let Some(value) = table.get(name).map_err(|e| self.io(e))? else {
            return Ok(None);
        };
        serde_json::from_slice(value.value())
            .map(Some)
            .map_err(|e| self.io(format!("its {name} does not read: {e}")))
    }

    /// Runs `write` in one write transaction of the given durability.
    fn write(
        &self,
        durability: Durability,
        write: impl FnOnce(&redb::WriteTransaction) -> Result<(), redb::Error>,
    ) -> Result<(), StoreError> {
        let mut txn = self.db.begin_write().map_err(|e| self.io(e))?;
        txn.set_durability(durability).map_err(|e| self.io(e))?;
        write(&txn).map_err(|e| self.io(e))?;
        txn.commit().map_err(|e| self.io(e))
    }
}

fn json(value: &impl serde::Serialize) -> Vec<u8> {
    serde_json::to_vec(value).expect("plain data serializes")
}

impl StateStore for RedbStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let read = self.db.begin_read().map_err(|e| self.io(e))?;
        let table = match read.open_table(ENTRIES) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(self.io(e)),
        };
        let value = table.get(key).map_err(|e| self.io(e))?;
        Ok(value.map(|v| v.value().to_vec()))
    }

    fn scan(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<StateEntry>, StoreError> {
        let read = self.db.begin_read().map_err(|e| self.io(e))?;
        let table = match read.open_table(ENTRIES) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(self.io(e)),
        };
        let range = match after {
            Some(after) if after >= prefix => {
                table.range((std::ops::Bound::Excluded(after), std::ops::Bound::Unbounded))
            }
            _ => table.range(prefix..),
        }
        .map_err(|e| self.io(e))?;
        let mut found = Vec::new();
        for entry in range {
            if found.len() == limit {
                break;
            }
            let (key, value) = entry.map_err(|e| self.io(e))?;
            if !key.value().starts_with(prefix) {
                break;
            }
            found.push((key.value().to_vec(), value.value().to_vec()));
        }
        Ok(found)
    }

    fn usage(&self) -> StateUsage {
        *self.lock_usage()
    }

    fn apply(&self, changes: &StateChanges) -> Result<(), StoreError> {
        let mut usage = self.lock_usage();
        let mut after = *usage;
        // Durable with the next checkpoint: a crash loses only changes the changelog
        // holds after it.
        self.write(Durability::None, |txn| {
            let mut entries = txn.open_table(ENTRIES)?;
            for (key, value) in changes.iter() {
                let old = match value {
                    Some(value) => entries.insert(key, value)?,
                    None => entries.remove(key)?,
                };
                after = after.replacing(
                    key.len(),
                    old.map(|old| old.value().len()),
                    value.map(<[u8]>::len),
                );
            }
            let mut meta = txn.open_table(META)?;
            meta.insert(USAGE, json(&(after.keys, after.bytes)).as_slice())?;
            Ok(())
        })?;
        *usage = after;
        Ok(())
    }

    fn checkpoint(&self) -> Result<Option<Checkpoint>, StoreError> {
        self.meta(CHECKPOINT)
    }

    fn set_checkpoint(&self, checkpoint: Checkpoint) -> Result<(), StoreError> {
        self.write(Durability::Immediate, |txn| {
            let mut meta = txn.open_table(META)?;
            meta.insert(CHECKPOINT, json(&checkpoint).as_slice())?;
            Ok(())
        })
    }

    fn clear(&self) -> Result<(), StoreError> {
        let mut usage = self.lock_usage();
        self.write(Durability::Immediate, |txn| {
            txn.delete_table(ENTRIES)?;
            txn.delete_table(META)?;
            Ok(())
        })?;
        *usage = StateUsage::default();
        Ok(())
    }

    fn snapshot(&self) -> Result<Box<dyn StoreSnapshot>, StoreError> {
        let read = self.db.begin_read().map_err(|e| self.io(e))?;
        let table = match read.open_table(ENTRIES) {
            Ok(table) => Some(table),
            Err(redb::TableError::TableDoesNotExist(_)) => None,
            Err(e) => return Err(self.io(e)),
        };
        Ok(Box::new(RedbSnapshot {
            table,
            path: self.path.clone(),
        }))
    }
}

/// A read transaction's view of a [`RedbStore`]: redb keeps the pages it reads until
/// it is dropped, whatever is written meanwhile.
struct RedbSnapshot {
    table: Option<redb::ReadOnlyTable<&'static [u8], &'static [u8]>>,
    path: PathBuf,
}

impl StoreSnapshot for RedbSnapshot {
    fn entries(&self, after: Option<&[u8]>, limit: usize) -> Result<Vec<StateEntry>, StoreError> {
        let io = |error: redb::StorageError| StoreError::Io {
            path: self.path.clone(),
            detail: error.to_string(),
        };
        let Some(table) = &self.table else {
            return Ok(Vec::new());
        };
        let lower = after.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        let range = table
            .range((lower, std::ops::Bound::<&[u8]>::Unbounded))
            .map_err(io)?;
        range
            .take(limit)
            .map(|entry| {
                let (key, value) = entry.map_err(io)?;
                Ok((key.value().to_vec(), value.value().to_vec()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changes(entries: &[(&str, Option<&str>)]) -> StateChanges {
        let mut changes = StateChanges::default();
        for (key, value) in entries {
            changes.record(
                key.as_bytes().to_vec(),
                value.map(|v| v.as_bytes().to_vec()),
            );
        }
        changes
    }

    #[test]
    fn entries_usage_and_checkpoint_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = RedbStore::open(dir.path()).unwrap();
            store
                .apply(&changes(&[
                    ("a/1", Some("10")),
                    ("a/2", Some("20")),
                    ("b", Some("x")),
                ]))
                .unwrap();
            store
                .apply(&changes(&[("a/1", None), ("a/2", Some("2"))]))
                .unwrap();
            store
                .set_checkpoint(Checkpoint {
                    offset: 7,
                    written_ms: 1,
                })
                .unwrap();
        }
        let store = RedbStore::open(dir.path()).unwrap();
        assert_eq!(store.usage(), StateUsage { keys: 2, bytes: 6 });
        assert_eq!(store.get(b"a/2").unwrap(), Some(b"2".to_vec()));
        assert_eq!(store.get(b"a/1").unwrap(), None);
        assert_eq!(store.checkpoint().unwrap().map(|c| c.offset), Some(7));
        let scanned = store.scan(b"a/", None, 10).unwrap();
        assert_eq!(scanned, vec![(b"a/2".to_vec(), b"2".to_vec())]);
        assert_eq!(store.scan(b"", Some(b"a/2"), 10).unwrap().len(), 1);
        store.clear().unwrap();
        assert_eq!(store.usage(), StateUsage::default());
        assert_eq!(store.get(b"b").unwrap(), None);
        assert_eq!(store.checkpoint().unwrap(), None);
    }

    #[test]
    fn a_store_another_process_holds_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let _held = RedbStore::open(dir.path()).unwrap();
        let error = RedbStore::open(dir.path())
            .err()
            .expect("the file is locked");
        assert!(error.to_string().contains("could not be opened"), "{error}");
    }
}

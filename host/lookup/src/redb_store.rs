//! A [`VersionedStore`] in a redb file on the node's disk, so a table of millions of
//! rows is kept within a bounded cache instead of in memory. Each entry's key is the
//! lookup key (length first, so no key is the start of another's entries) and the
//! version, big-endian: a key's versions sit together in order, and the row as of a
//! version is the last entry at or before it.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};

use crate::error::LookupError;
use crate::store::{Followed, VersionedStore};
use crate::version::VersionChanges;

const ROWS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("rows");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const SHAPE: TableDefinition<&str, &str> = TableDefinition::new("shape");
/// Commit times (microseconds) of the base and of the versions with changes.
const COMMITTED: TableDefinition<u64, i64> = TableDefinition::new("committed");
const BASE: &str = "base";
/// The last whole version plus one; 0 while the snapshot is read.
const THROUGH: &str = "through";
const BYTES: &str = "bytes";
const SHAPE_KEY: &str = "shape";

/// A row, or its absence from a version on.
const TOMBSTONE: u8 = 0;
const ROW: u8 = 1;

/// A [`VersionedStore`] in a redb file.
pub struct RedbVersions {
    db: Database,
    path: PathBuf,
    bytes: Mutex<u64>,
}

fn entry_key(key: &[u8], version: u64) -> Vec<u8> {
    let mut entry = Vec::with_capacity(key.len() + 12);
    entry.extend_from_slice(&(key.len() as u32).to_be_bytes());
    entry.extend_from_slice(key);
    entry.extend_from_slice(&version.to_be_bytes());
    entry
}

impl RedbVersions {
    /// Opens (or creates) the store in `dir`, with a page cache of `cache_bytes`.
    pub fn open(dir: &Path, cache_bytes: usize) -> Result<RedbVersions, LookupError> {
        let path = dir.join("lookup.redb");
        let failed = |detail: String| LookupError::Store {
            path: path.clone(),
            detail,
        };
        std::fs::create_dir_all(dir).map_err(|e| failed(e.to_string()))?;
        let db = Database::builder()
            .set_cache_size(cache_bytes)
            .create(&path)
            .map_err(|e| failed(e.to_string()))?;
        let store = RedbVersions {
            db,
            path: path.clone(),
            bytes: Mutex::new(0),
        };
        *store.lock_bytes() = store.meta(BYTES)?.unwrap_or(0);
        Ok(store)
    }

    fn io(&self, error: impl std::fmt::Display) -> LookupError {
        LookupError::Store {
            path: self.path.clone(),
            detail: error.to_string(),
        }
    }

    fn lock_bytes(&self) -> std::sync::MutexGuard<'_, u64> {
        self.bytes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn meta(&self, name: &str) -> Result<Option<u64>, LookupError> {
        let read = self.db.begin_read().map_err(|e| self.io(e))?;
        let table = match read.open_table(META) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(self.io(e)),
        };
        Ok(table.get(name).map_err(|e| self.io(e))?.map(|v| v.value()))
    }

    fn write(
        &self,
        write: impl FnOnce(&redb::WriteTransaction) -> Result<(), redb::Error>,
    ) -> Result<(), LookupError> {
        let mut txn = self.db.begin_write().map_err(|e| self.io(e))?;
        // The store is a cache of the table: a crash costs re-reading versions, never
        // a wrong row, because the version is marked whole in the same transaction.
        txn.set_durability(Durability::Immediate)
            .map_err(|e| self.io(e))?;
        write(&txn).map_err(|e| self.io(e))?;
        txn.commit().map_err(|e| self.io(e))
    }
}

impl VersionedStore for RedbVersions {
    fn get(&self, keys: &[&[u8]], version: u64) -> Result<Vec<Option<Vec<u8>>>, LookupError> {
        let read = self.db.begin_read().map_err(|e| self.io(e))?;
        let table = match read.open_table(ROWS) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(vec![None; keys.len()]),
            Err(e) => return Err(self.io(e)),
        };
        let mut rows = Vec::with_capacity(keys.len());
        for key in keys {
            let (first, last) = (entry_key(key, 0), entry_key(key, version));
            let found = table
                .range(first.as_slice()..=last.as_slice())
                .map_err(|e| self.io(e))?
                .next_back()
                .transpose()
                .map_err(|e| self.io(e))?;
            rows.push(
                found.and_then(|(_, value)| match value.value().split_first() {
                    Some((&ROW, row)) => Some(row.to_vec()),
                    _ => None,
                }),
            );
        }
        Ok(rows)
    }

    fn restart(&self, shape: &str, base: u64, committed_micros: i64) -> Result<(), LookupError> {
        let mut bytes = self.lock_bytes();
        self.write(|txn| {
            txn.delete_table(ROWS)?;
            txn.delete_table(COMMITTED)?;
            txn.open_table(COMMITTED)?.insert(base, committed_micros)?;
            txn.open_table(SHAPE)?.insert(SHAPE_KEY, shape)?;
            let mut meta = txn.open_table(META)?;
            meta.insert(BASE, base)?;
            meta.insert(THROUGH, 0)?;
            meta.insert(BYTES, 0)?;
            Ok(())
        })?;
        *bytes = 0;
        Ok(())
    }

    fn apply(
        &self,
        version: u64,
        committed_micros: Option<i64>,
        changes: &VersionChanges,
        whole: bool,
    ) -> Result<(), LookupError> {
        let mut bytes = self.lock_bytes();
        let mut after = *bytes;
        self.write(|txn| {
            if let Some(micros) = committed_micros {
                txn.open_table(COMMITTED)?.insert(version, micros)?;
            }
            let mut rows = txn.open_table(ROWS)?;
            let mut value = Vec::new();
            for (key, row) in changes.entries() {
                let entry = entry_key(key, version);
                value.clear();
                match row {
                    Some(row) => {
                        value.push(ROW);
                        value.extend_from_slice(row);
                    }
                    None => value.push(TOMBSTONE),
                }
                if let Some(old) = rows.insert(entry.as_slice(), value.as_slice())? {
                    after -= (entry.len() + old.value().len()) as u64;
                }
                after += (entry.len() + value.len()) as u64;
            }
            let mut meta = txn.open_table(META)?;
            meta.insert(BYTES, after)?;
            if whole {
                meta.insert(THROUGH, version + 1)?;
            }
            Ok(())
        })?;
        *bytes = after;
        Ok(())
    }

    fn followed(&self) -> Result<Option<Followed>, LookupError> {
        let Some(base) = self.meta(BASE)? else {
            return Ok(None);
        };
        let through = self.meta(THROUGH)?.unwrap_or(0);
        let read = self.db.begin_read().map_err(|e| self.io(e))?;
        let shape = match read.open_table(SHAPE) {
            Ok(table) => table
                .get(SHAPE_KEY)
                .map_err(|e| self.io(e))?
                .map(|v| v.value().to_string()),
            Err(redb::TableError::TableDoesNotExist(_)) => None,
            Err(e) => return Err(self.io(e)),
        };
        Ok(Some(Followed {
            shape: shape.unwrap_or_default(),
            base,
            through: through.checked_sub(1),
        }))
    }

    fn version_as_of(&self, micros: i64) -> Result<Option<u64>, LookupError> {
        let read = self.db.begin_read().map_err(|e| self.io(e))?;
        let table = match read.open_table(COMMITTED) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(self.io(e)),
        };
        // From the newest back: a batch usually reads one of the last versions.
        for entry in table.iter().map_err(|e| self.io(e))?.rev() {
            let (version, at) = entry.map_err(|e| self.io(e))?;
            if at.value() <= micros {
                return Ok(Some(version.value()));
            }
        }
        Ok(None)
    }

    fn bytes(&self) -> u64 {
        *self.lock_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryVersions;
    use crate::version::RowChange;

    fn version(changes: &[(&str, Option<&str>)]) -> VersionChanges {
        let mut out = VersionChanges::default();
        for (key, row) in changes {
            match row {
                Some(row) => out.record(
                    key.as_bytes().to_vec(),
                    RowChange::Added,
                    row.as_bytes().to_vec(),
                ),
                None => out.record(key.as_bytes().to_vec(), RowChange::Removed, Vec::new()),
            };
        }
        out
    }

    /// The same history in both stores: a snapshot at 3 in two parts, a rename at 5,
    /// a delete at 6, a key that is the start of another.
    fn check(store: &dyn VersionedStore) {
        assert_eq!(store.followed().unwrap(), None);
        store.restart("id: Int64", 3, 300).unwrap();
        store
            .apply(
                3,
                None,
                &version(&[("1", Some("Ada")), ("12", Some("Cy"))]),
                false,
            )
            .unwrap();
        let followed = |through| {
            Some(Followed {
                shape: "id: Int64".to_string(),
                base: 3,
                through,
            })
        };
        assert_eq!(store.followed().unwrap(), followed(None));
        store
            .apply(3, None, &version(&[("2", Some("Bo"))]), true)
            .unwrap();
        store
            .apply(
                5,
                Some(500),
                &version(&[("1", None), ("1", Some("Ada L."))]),
                true,
            )
            .unwrap();
        store
            .apply(6, Some(600), &version(&[("2", None)]), true)
            .unwrap();
        // Version 7 changed nothing the lookup keeps.
        store
            .apply(7, None, &VersionChanges::default(), true)
            .unwrap();
        assert_eq!(store.followed().unwrap(), followed(Some(7)));
        let as_of = |micros| store.version_as_of(micros).unwrap();
        assert_eq!(
            [as_of(299), as_of(300), as_of(499), as_of(500), as_of(9999)],
            [None, Some(3), Some(3), Some(5), Some(6)]
        );
        let keys: [&[u8]; 4] = [b"1", b"2", b"12", b"9"];
        let text = |rows: Vec<Option<Vec<u8>>>| {
            rows.into_iter()
                .map(|r| r.map(|r| String::from_utf8(r).unwrap()))
                .collect::<Vec<_>>()
        };
        let at = |v| text(store.get(&keys, v).unwrap());
        let s = |t: &str| Some(t.to_string());
        assert_eq!(at(3), [s("Ada"), s("Bo"), s("Cy"), None]);
        assert_eq!(at(4), [s("Ada"), s("Bo"), s("Cy"), None]);
        assert_eq!(at(5), [s("Ada L."), s("Bo"), s("Cy"), None]);
        assert_eq!(at(9), [s("Ada L."), None, s("Cy"), None]);
        assert!(store.bytes() > 0);
        store.restart("id: Int64", 8, 800).unwrap();
        assert_eq!(at(9), [None, None, None, None]);
        assert_eq!(store.bytes(), 0);
        assert_eq!(store.version_as_of(700).unwrap(), None);
    }

    #[test]
    fn both_stores_answer_as_of_every_version_from_the_snapshot_on() {
        check(&MemoryVersions::default());
        let dir = tempfile::tempdir().unwrap();
        check(&RedbVersions::open(dir.path(), 1 << 20).unwrap());
    }

    #[test]
    fn the_store_on_disk_keeps_what_it_followed_across_opens() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = RedbVersions::open(dir.path(), 1 << 20).unwrap();
            store.restart("id: Int64", 0, 100).unwrap();
            store
                .apply(0, None, &version(&[("1", Some("Ada"))]), true)
                .unwrap();
        }
        let store = RedbVersions::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(
            store.followed().unwrap(),
            Some(Followed {
                shape: "id: Int64".to_string(),
                base: 0,
                through: Some(0)
            })
        );
        assert_eq!(store.version_as_of(100).unwrap(), Some(0));
        assert_eq!(store.get(&[b"1"], 0).unwrap(), [Some(b"Ada".to_vec())]);
        assert!(store.bytes() > 0);
    }
}

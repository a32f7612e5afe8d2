//! A store and a changelog in memory: for unit tests, and for previews whose state
//! lives only as long as the preview.

use std::collections::BTreeMap;
use std::sync::Mutex;

use sluice_engine::{StateChanges, StateEntry, StateUsage};

use crate::changelog::{Changelog, ChangelogEntry};
use crate::error::StoreError;
use crate::store::{Checkpoint, StateStore, StoreSnapshot};

/// A [`StateStore`] in memory.
#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<MemoryInner>,
}

#[derive(Default)]
struct MemoryInner {
    entries: BTreeMap<Vec<u8>, Vec<u8>>,
    usage: StateUsage,
    checkpoint: Option<Checkpoint>,
}

impl MemoryStore {
    fn lock(&self) -> std::sync::MutexGuard<'_, MemoryInner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every entry, in key order.
    pub fn entries(&self) -> Vec<StateEntry> {
        self.lock()
            .entries
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

impl StateStore for MemoryStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.lock().entries.get(key).cloned())
    }

    fn scan(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<StateEntry>, StoreError> {
        Ok(self
            .lock()
            .entries
            .range(prefix.to_vec()..)
            .take_while(|(key, _)| key.starts_with(prefix))
            .filter(|(key, _)| after.is_none_or(|after| key.as_slice() > after))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn usage(&self) -> StateUsage {
        self.lock().usage
    }

    fn apply(&self, changes: &StateChanges) -> Result<(), StoreError> {
        let mut inner = self.lock();
        for (key, value) in changes.iter() {
            let old = match value {
                Some(value) => inner.entries.insert(key.to_vec(), value.to_vec()),
                None => inner.entries.remove(key),
            };
            inner.usage = inner.usage.replacing(
                key.len(),
                old.as_ref().map(Vec::len),
                value.map(<[u8]>::len),
            );
        }
        Ok(())
    }

    fn checkpoint(&self) -> Result<Option<Checkpoint>, StoreError> {
        Ok(self.lock().checkpoint)
    }

    fn set_checkpoint(&self, checkpoint: Checkpoint) -> Result<(), StoreError> {
        self.lock().checkpoint = Some(checkpoint);
        Ok(())
    }

    fn clear(&self) -> Result<(), StoreError> {
        *self.lock() = MemoryInner::default();
        Ok(())
    }

    fn snapshot(&self) -> Result<Box<dyn StoreSnapshot>, StoreError> {
        Ok(Box::new(MemorySnapshot(self.lock().entries.clone())))
    }
}

/// A copy of a [`MemoryStore`]'s entries.
struct MemorySnapshot(BTreeMap<Vec<u8>, Vec<u8>>);

impl StoreSnapshot for MemorySnapshot {
    fn entries(&self, after: Option<&[u8]>, limit: usize) -> Result<Vec<StateEntry>, StoreError> {
        let from = match after {
            Some(after) => std::ops::Bound::Excluded(after.to_vec()),
            None => std::ops::Bound::Unbounded,
        };
        Ok(self
            .0
            .range((from, std::ops::Bound::Unbounded))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }
}

/// A [`Changelog`] in memory, appended to by tests as a committed transaction would.
#[derive(Default)]
pub struct MemoryChangelog {
    inner: Mutex<(u64, Vec<ChangelogEntry>)>,
}

impl MemoryChangelog {
    /// Appends committed changes.
    pub fn append(&self, changes: &StateChanges) {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        inner.1.extend(
            changes
                .iter()
                .map(|(key, value)| (key.to_vec(), value.map(<[u8]>::to_vec))),
        );
    }

    /// Drops the changes before `offset`, as a retention or a reset does.
    pub fn truncate_before(&self, offset: u64) {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        inner.0 = inner.0.max(offset);
    }
}

impl Changelog for MemoryChangelog {
    fn bounds(&self) -> Result<(u64, u64), StoreError> {
        let inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok((inner.0, inner.1.len() as u64))
    }

    fn read(
        &self,
        from: u64,
        end: u64,
        apply: &mut dyn FnMut(Vec<ChangelogEntry>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let entries: Vec<ChangelogEntry> = {
            let inner = self
                .inner
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let from = from.max(inner.0) as usize;
            inner.1[from.min(inner.1.len())..(end as usize).min(inner.1.len())].to_vec()
        };
        for chunk in entries.chunks(2) {
            apply(chunk.to_vec())?;
        }
        Ok(())
    }
}

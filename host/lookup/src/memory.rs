//! A [`VersionedStore`] in memory, for tests and for previews.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::error::LookupError;
use crate::store::{Followed, VersionedStore};
use crate::version::VersionChanges;

#[derive(Default)]
struct Kept {
    rows: BTreeMap<(Vec<u8>, u64), Option<Vec<u8>>>,
    followed: Option<Followed>,
    committed: BTreeMap<u64, i64>,
    bytes: u64,
}

/// A [`VersionedStore`] in memory.
#[derive(Default)]
pub struct MemoryVersions {
    kept: Mutex<Kept>,
}

impl MemoryVersions {
    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl VersionedStore for MemoryVersions {
    fn get(&self, keys: &[&[u8]], version: u64) -> Result<Vec<Option<Vec<u8>>>, LookupError> {
        let kept = self.lock();
        Ok(keys
            .iter()
            .map(|key| {
                kept.rows
                    .range((key.to_vec(), 0)..=(key.to_vec(), version))
                    .next_back()
                    .and_then(|(_, row)| row.clone())
            })
            .collect())
    }

    fn restart(&self, shape: &str, base: u64, committed_micros: i64) -> Result<(), LookupError> {
        *self.lock() = Kept {
            followed: Some(Followed {
                shape: shape.to_string(),
                base,
                through: None,
            }),
            committed: BTreeMap::from([(base, committed_micros)]),
            ..Kept::default()
        };
        Ok(())
    }

    fn apply(
        &self,
        version: u64,
        committed_micros: Option<i64>,
        changes: &VersionChanges,
        whole: bool,
    ) -> Result<(), LookupError> {
        let mut kept = self.lock();
        if let Some(micros) = committed_micros {
            kept.committed.insert(version, micros);
        }
        for (key, row) in changes.entries() {
            let size = (key.len() + row.map_or(0, <[u8]>::len) + 8) as u64;
            if let Some(old) = kept
                .rows
                .insert((key.to_vec(), version), row.map(<[u8]>::to_vec))
            {
                kept.bytes -= (key.len() + old.map_or(0, |r| r.len()) + 8) as u64;
            }
            kept.bytes += size;
        }
        if whole && let Some(followed) = kept.followed.as_mut() {
            followed.through = Some(version);
        }
        Ok(())
    }

    fn followed(&self) -> Result<Option<Followed>, LookupError> {
        Ok(self.lock().followed.clone())
    }

    fn version_as_of(&self, micros: i64) -> Result<Option<u64>, LookupError> {
        Ok(self
            .lock()
            .committed
            .iter()
            .rev()
            .find(|&(_, &at)| at <= micros)
            .map(|(&version, _)| version))
    }

    fn bytes(&self) -> u64 {
        self.lock().bytes
    }
}

//! A pipeline's state as its module reads it: the local store, with the changes of
//! batches transformed but not yet committed on top; committed batches move into the
//! store, the others are forgotten when the work is redone; the store is brought up
//! to the changelog before the pipeline reads.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sluice_engine::{Layered, StateChanges, StateEntry, StateError, StateSource, StateUsage};
use sluice_position::Position;

use crate::changelog::Changelog;
use crate::error::StoreError;
use crate::memory::MemoryStore;
use crate::store::{Checkpoint, StateStore, StoreSnapshot};

/// How old a checkpoint may be before the store is rebuilt from the whole changelog:
/// removals leave the compacted changelog after its `delete.retention.ms` (seven days,
/// as Sluice creates it), so a store older than that could keep a removed key.
pub const MAX_CHECKPOINT_AGE: Duration = Duration::from_secs(6 * 24 * 3600);

/// What restoring did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restored {
    /// The changelog offset reading began at.
    pub from: u64,
    /// The offset it ended at, which the store now reflects.
    pub to: u64,
    /// Changes applied.
    pub changes: u64,
    /// Why the local store was emptied first, if it was.
    pub rebuilt: Option<&'static str>,
    /// How long it took.
    pub took: Duration,
}

/// Batches transformed but not committed, oldest first, and all of their changes
/// merged, as reads see them.
#[derive(Default)]
struct Pending {
    batches: VecDeque<(Position, Arc<StateChanges>)>,
    merged: StateChanges,
}

/// Entries copied in a page of [`FrozenState::copy`].
const COPY_PAGE: usize = 4096;

/// A pipeline's state at one moment, unchanged by the batches after it.
pub struct FrozenState {
    store: Box<dyn StoreSnapshot>,
    pending: Vec<Arc<StateChanges>>,
}

impl FrozenState {
    /// The state in memory.
    pub fn copy(&self) -> Result<MemoryStore, StoreError> {
        let copy = MemoryStore::default();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let page = self.store.entries(after.as_deref(), COPY_PAGE)?;
            let Some((last, _)) = page.last() else { break };
            after = Some(last.clone());
            let mut changes = StateChanges::default();
            for (key, value) in page {
                changes.record(key, Some(value));
            }
            copy.apply(&changes)?;
        }
        for changes in &self.pending {
            copy.apply(changes)?;
        }
        Ok(copy)
    }
}

/// A pipeline's state: what its module reads and changes through.
pub struct PipelineState {
    store: Arc<dyn StateStore>,
    pending: Mutex<Pending>,
}

/// The store as the state below a module's changes.
struct Committed<'a>(&'a dyn StateStore);

fn read_error(error: StoreError) -> StateError {
    StateError::Read(error.to_string())
}

impl StateSource for Committed<'_> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        self.0.get(key).map_err(read_error)
    }

    fn scan(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<StateEntry>, StateError> {
        self.0.scan(prefix, after, limit).map_err(read_error)
    }

    fn usage(&self) -> StateUsage {
        self.0.usage()
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl PipelineState {
    /// The state kept in `store`.
    pub fn new(store: Arc<dyn StateStore>) -> PipelineState {
        PipelineState {
            store,
            pending: Mutex::default(),
        }
    }

    /// The committed state on this node.
    pub fn store(&self) -> &dyn StateStore {
        &*self.store
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds the changes of a batch that was transformed and ends at `end`: the next
    /// batches read them. They are shared with the batch, whose changelog records they
    /// become.
    pub fn push(&self, end: Position, changes: Arc<StateChanges>) {
        let mut pending = self.lock();
        pending.merged.extend(&changes);
        pending.batches.push_back((end, changes));
    }

    /// Moves the changes of the batches through `through`, now committed, into the
    /// store.
    pub fn committed(&self, through: Position) -> Result<(), StoreError> {
        let mut pending = self.lock();
        let mut done = StateChanges::default();
        while pending
            .batches
            .front()
            .is_some_and(|(end, _)| *end <= through)
        {
            let (_, changes) = pending.batches.pop_front().expect("looked at above");
            done.extend(&changes);
        }
        if done.is_empty() {
            return Ok(());
        }
        self.store.apply(&done)?;
        // The store holds these keys now, unless a later batch changes them again.
        let Pending { batches, merged } = &mut *pending;
        for (key, _) in done.iter() {
            if !batches.iter().any(|(_, later)| later.lookup(key).is_some()) {
                merged.forget(key);
            }
        }
        Ok(())
    }

    /// Forgets the changes not committed: the work after the last commit is redone.
    pub fn discard_pending(&self) {
        *self.lock() = Pending::default();
    }

    /// The state as the next batch reads it, held still: a snapshot of the store and
    /// the changes not committed. Cheap; [`FrozenState::copy`] does the copying, while
    /// batches go on being transformed and committed.
    pub fn freeze(&self) -> Result<FrozenState, StoreError> {
        let pending = self.lock();
        Ok(FrozenState {
            store: self.store.snapshot()?,
            pending: pending.batches.iter().map(|(_, c)| c.clone()).collect(),
        })
    }

    /// Brings the store up to the end of `changelog`: from its checkpoint, or from the
    /// beginning when the store is empty, has no checkpoint, or does not match the
    /// changelog. `progress` is told the offsets read and the offsets to read.
    pub fn restore(
        &self,
        changelog: &dyn Changelog,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Restored, StoreError> {
        let started = Instant::now();
        self.discard_pending();
        let (start, end) = changelog.bounds()?;
        let checkpoint = self.store.checkpoint()?;
        let rebuilt = match checkpoint {
            None if self.store.usage().keys > 0 => Some("it has no checkpoint"),
            None => None,
            Some(c) if c.offset > end => {
                Some("its checkpoint is past the changelog's end (the topic was recreated)")
            }
            Some(c) if c.offset < start => {
                Some("the changelog no longer holds the changes after its checkpoint")
            }
            Some(c)
                if now_ms().saturating_sub(c.written_ms)
                    > MAX_CHECKPOINT_AGE.as_millis() as u64 =>
            {
                Some("its checkpoint is older than the changelog keeps removals")
            }
            Some(_) => None,
        };
        if rebuilt.is_some() {
            self.store.clear()?;
        }
        let from = match (rebuilt, checkpoint) {
            (None, Some(c)) => c.offset,
            _ => start,
        };
        let changes = self.read_and_apply(changelog, from, end, progress)?;
        self.store.set_checkpoint(Checkpoint {
            offset: end,
            written_ms: now_ms(),
        })?;
        Ok(Restored {
            from,
            to: end,
            changes,
            rebuilt,
            took: started.elapsed(),
        })
    }

    /// Reads the changelog from `from` to `end` on this thread while another applies
    /// what was read to the store: the two take about as long, so a restore takes
    /// half the time it would one after the other. Returns the changes applied.
    fn read_and_apply(
        &self,
        changelog: &dyn Changelog,
        from: u64,
        end: u64,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<u64, StoreError> {
        // Two chunks in flight bound the memory a restore holds.
        let (chunks, received) = std::sync::mpsc::sync_channel::<StateChanges>(2);
        std::thread::scope(|scope| {
            let applier = scope.spawn(move || {
                let mut changes = 0;
                for batch in received {
                    changes += batch.len() as u64;
                    self.store.apply(&batch)?;
                }
                Ok::<u64, StoreError>(changes)
            });
            let mut read = 0;
            let reading = changelog.read(from, end, &mut |entries| {
                read += entries.len() as u64;
                if chunks.send(entries.into_iter().collect()).is_err() {
                    // The applier stopped on an error, which it returns.
                    return Err(StoreError::Io {
                        path: Default::default(),
                        detail: "applying the changelog stopped".into(),
                    });
                }
                progress(read, end.saturating_sub(from));
                Ok(())
            });
            drop(chunks);
            let applied = applier
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            // An applier's error explains a reader stopped by it.
            let changes = applied?;
            reading?;
            Ok(changes)
        })
    }

    /// Writes a checkpoint at the changelog's end, so the next start reads only what
    /// comes after it. Only with nothing pending: after the last commit of a run.
    pub fn checkpoint(&self, changelog: &dyn Changelog) -> Result<(), StoreError> {
        if !self.lock().batches.is_empty() {
            return Ok(());
        }
        let (_, end) = changelog.bounds()?;
        self.store.set_checkpoint(Checkpoint {
            offset: end,
            written_ms: now_ms(),
        })
    }
}

impl StateSource for PipelineState {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        let pending = self.lock();
        Layered {
            top: &pending.merged,
            below: &Committed(&*self.store),
        }
        .get(key)
    }

    fn scan(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<StateEntry>, StateError> {
        let pending = self.lock();
        Layered {
            top: &pending.merged,
            below: &Committed(&*self.store),
        }
        .scan(prefix, after, limit)
    }

    fn usage(&self) -> StateUsage {
        let pending = self.lock();
        Layered {
            top: &pending.merged,
            below: &Committed(&*self.store),
        }
        .usage()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{MemoryChangelog, MemoryStore};

    fn changes(entries: &[(&str, Option<&str>)], usage: Option<StateUsage>) -> StateChanges {
        let mut changes = StateChanges::default();
        for (key, value) in entries {
            changes.record(
                key.as_bytes().to_vec(),
                value.map(|v| v.as_bytes().to_vec()),
            );
        }
        if let Some(usage) = usage {
            changes.set_usage(usage);
        }
        changes
    }

    fn value(state: &PipelineState, key: &str) -> Option<String> {
        state
            .get(key.as_bytes())
            .unwrap()
            .map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn batches_read_what_earlier_batches_changed_before_it_is_committed() {
        let store = Arc::new(MemoryStore::default());
        let state = PipelineState::new(store.clone());
        state.push(
            Position::at_version(2),
            Arc::new(changes(&[("a", Some("1"))], None)),
        );
        state.push(
            Position::at_version(3),
            Arc::new(changes(
                &[("a", Some("2")), ("b", Some("x"))],
                Some(StateUsage { keys: 2, bytes: 4 }),
            )),
        );
        assert_eq!(value(&state, "a").as_deref(), Some("2"));
        assert_eq!(state.usage(), StateUsage { keys: 2, bytes: 4 });
        // The first batch commits: the store has its changes, reads still see both.
        state.committed(Position::at_version(2)).unwrap();
        assert_eq!(store.get(b"a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(store.get(b"b").unwrap(), None);
        assert_eq!(value(&state, "a").as_deref(), Some("2"));
        // The second is redone: its changes are forgotten.
        state.discard_pending();
        assert_eq!(value(&state, "a").as_deref(), Some("1"));
        assert_eq!(value(&state, "b"), None);
        assert_eq!(state.usage(), StateUsage { keys: 1, bytes: 2 });
    }

    #[test]
    fn a_copy_holds_the_store_and_the_pending_changes_and_not_what_came_after() {
        let dir = tempfile::tempdir().unwrap();
        let stores: [Arc<dyn StateStore>; 2] = [
            Arc::new(MemoryStore::default()),
            Arc::new(crate::RedbStore::open(dir.path()).unwrap()),
        ];
        for store in stores {
            let state = PipelineState::new(store);
            assert_eq!(state.freeze().unwrap().copy().unwrap().usage().keys, 0);
            let many: Vec<(String, Option<String>)> = (0..10_000)
                .map(|i| (format!("k{i:05}"), Some(i.to_string())))
                .collect();
            let many: Vec<(&str, Option<&str>)> = many
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_deref()))
                .collect();
            state.push(Position::at_version(1), Arc::new(changes(&many, None)));
            state.committed(Position::at_version(1)).unwrap();
            state.push(
                Position::at_version(2),
                Arc::new(changes(&[("k00000", None), ("new", Some("n"))], None)),
            );
            let frozen = state.freeze().unwrap();
            // What the pipeline does after the freeze is not in the copy.
            state.committed(Position::at_version(2)).unwrap();
            state.push(
                Position::at_version(3),
                Arc::new(changes(&[("k00001", Some("later"))], None)),
            );
            state.committed(Position::at_version(3)).unwrap();
            let copy = frozen.copy().unwrap();
            assert_eq!(copy.get(b"k00000").unwrap(), None);
            assert_eq!(copy.get(b"new").unwrap(), Some(b"n".to_vec()));
            assert_eq!(copy.get(b"k00001").unwrap(), Some(b"1".to_vec()));
            assert_eq!(copy.usage().keys, 10_000);
            // Nor is the copy's change in the pipeline's state.
            copy.apply(&changes(&[("k00002", Some("copy's"))], None))
                .unwrap();
            assert_eq!(value(&state, "k00002").as_deref(), Some("2"));
        }
    }

    #[test]
    fn restoring_reads_the_changelog_from_the_checkpoint_or_from_the_start() {
        let changelog = MemoryChangelog::default();
        changelog.append(&changes(&[("a", Some("1")), ("b", Some("2"))], None));
        changelog.append(&changes(&[("a", None), ("c", Some("3"))], None));
        let store = Arc::new(MemoryStore::default());
        let state = PipelineState::new(store.clone());
        let mut seen = Vec::new();
        let restored = state
            .restore(&changelog, &mut |read, total| seen.push((read, total)))
            .unwrap();
        assert_eq!((restored.from, restored.to, restored.rebuilt), (0, 4, None));
        assert_eq!(seen.last(), Some(&(4, 4)));
        assert_eq!(
            store.entries(),
            vec![
                (b"b".to_vec(), b"2".to_vec()),
                (b"c".to_vec(), b"3".to_vec())
            ]
        );
        // Later commits reach the changelog; the store lags: a restart reads only them.
        changelog.append(&changes(&[("b", None)], None));
        let again = state.restore(&changelog, &mut |_, _| {}).unwrap();
        assert_eq!((again.from, again.to, again.changes), (4, 5, 1));
        assert_eq!(store.entries(), vec![(b"c".to_vec(), b"3".to_vec())]);
    }

    #[test]
    fn a_store_that_does_not_match_its_changelog_is_rebuilt() {
        let store = Arc::new(MemoryStore::default());
        let state = PipelineState::new(store.clone());
        // Entries without a checkpoint: a crash before the first one.
        store
            .apply(&changes(&[("stale", Some("x"))], None))
            .unwrap();
        let changelog = MemoryChangelog::default();
        changelog.append(&changes(&[("a", Some("1"))], None));
        let restored = state.restore(&changelog, &mut |_, _| {}).unwrap();
        assert_eq!(restored.rebuilt, Some("it has no checkpoint"));
        assert_eq!(store.entries(), vec![(b"a".to_vec(), b"1".to_vec())]);
        // A changelog shorter than the checkpoint is another topic of the same name.
        let recreated = MemoryChangelog::default();
        let restored = state.restore(&recreated, &mut |_, _| {}).unwrap();
        assert!(restored.rebuilt.unwrap().contains("recreated"));
        assert!(store.entries().is_empty());
        // Changes after the checkpoint were removed from the changelog (a reset).
        let truncated = MemoryChangelog::default();
        for _ in 0..3 {
            truncated.append(&changes(&[("k", Some("v"))], None));
        }
        state.restore(&truncated, &mut |_, _| {}).unwrap();
        truncated.append(&changes(&[("k", Some("w"))], None));
        truncated.truncate_before(4);
        truncated.append(&changes(&[("m", Some("n"))], None));
        let restored = state.restore(&truncated, &mut |_, _| {}).unwrap();
        assert!(restored.rebuilt.unwrap().contains("no longer holds"));
        assert_eq!(store.entries(), vec![(b"m".to_vec(), b"n".to_vec())]);
    }

    /// A store whose writes fail, as a full disk's do.
    struct FullDisk;

    impl StateStore for FullDisk {
        fn get(&self, _: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
            Ok(None)
        }
        fn scan(
            &self,
            _: &[u8],
            _: Option<&[u8]>,
            _: usize,
        ) -> Result<Vec<StateEntry>, StoreError> {
            Ok(Vec::new())
        }
        fn usage(&self) -> StateUsage {
            StateUsage::default()
        }
        fn apply(&self, _: &StateChanges) -> Result<(), StoreError> {
            Err(StoreError::Io {
                path: "state.redb".into(),
                detail: "no space left on device".into(),
            })
        }
        fn checkpoint(&self) -> Result<Option<Checkpoint>, StoreError> {
            Ok(None)
        }
        fn set_checkpoint(&self, _: Checkpoint) -> Result<(), StoreError> {
            Ok(())
        }
        fn clear(&self) -> Result<(), StoreError> {
            Ok(())
        }
        fn snapshot(&self) -> Result<Box<dyn crate::StoreSnapshot>, StoreError> {
            MemoryStore::default().snapshot()
        }
    }

    /// The store is written on a thread of its own while the changelog is read: its
    /// failure stops the reading and is the error the restore returns.
    #[test]
    fn a_store_failing_during_a_restore_is_the_error_it_returns() {
        let changelog = MemoryChangelog::default();
        for i in 0..20 {
            changelog.append(&changes(&[(&format!("k{i}"), Some("v"))], None));
        }
        let state = PipelineState::new(Arc::new(FullDisk));
        let error = state.restore(&changelog, &mut |_, _| {}).unwrap_err();
        assert!(
            error.to_string().contains("no space left on device"),
            "{error}"
        );
    }
}

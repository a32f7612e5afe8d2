//! A running pipeline's store, lent to readers outside its loop (the admin API), so
//! they read the committed state without opening the store a second time, which redb
//! refuses while the loop holds it.

use std::sync::{Arc, Mutex};

use crate::store::StateStore;

/// Where a pipeline's loop lends its store while it runs. Readers hold the lock for
/// one read, so the loop's return of the store waits for a read in progress and the
/// store is closed when the loop ends.
#[derive(Default)]
pub struct LiveState {
    store: Mutex<Option<Arc<dyn StateStore>>>,
}

impl LiveState {
    /// Runs `read` on the lent store; `None` while no loop lends one.
    pub fn read<T>(&self, read: impl FnOnce(&dyn StateStore) -> T) -> Option<T> {
        let store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        store.as_deref().map(read)
    }

    /// Lends `store` until the returned loan is dropped.
    pub fn lend(self: &Arc<Self>, store: Arc<dyn StateStore>) -> Loan {
        *self.store.lock().unwrap_or_else(|e| e.into_inner()) = Some(store);
        Loan { live: self.clone() }
    }
}

/// A store lent through [`LiveState`]; dropping it takes the store back.
pub struct Loan {
    live: Arc<LiveState>,
}

impl Drop for Loan {
    fn drop(&mut self) {
        *self.live.store.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryStore;

    #[test]
    fn reads_the_lent_store_until_the_loan_ends() {
        let live = Arc::new(LiveState::default());
        assert_eq!(live.read(|s| s.usage().keys), None);
        let store: Arc<dyn StateStore> = Arc::new(MemoryStore::default());
        let mut changes = sluice_engine::StateChanges::default();
        changes.record(b"k".to_vec(), Some(b"v".to_vec()));
        store.apply(&changes).unwrap();
        let loan = live.lend(store.clone());
        assert_eq!(
            live.read(|s| s.get(b"k").unwrap()),
            Some(Some(b"v".to_vec()))
        );
        drop(loan);
        assert_eq!(live.read(|s| s.usage().keys), None);
        assert_eq!(Arc::strong_count(&store), 1, "the loan keeps no copy");
    }
}

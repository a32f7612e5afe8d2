//! Who may compile now: at most a few compiles at once on the host, and one at a time
//! per owner (a tenant), served in arrival order among the owners that may start. A
//! tenant's queue of slow uploads therefore holds one slot, never every slot.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Condvar, Mutex, PoisonError};

/// A fair queue of compiles.
pub(crate) struct CompileQueue {
    max_running: usize,
    max_per_owner: usize,
    state: Mutex<QueueState>,
    changed: Condvar,
}

#[derive(Default)]
struct QueueState {
    next_ticket: u64,
    waiting: VecDeque<(u64, String)>,
    running: BTreeMap<String, usize>,
}

impl QueueState {
    fn running_total(&self) -> usize {
        self.running.values().sum()
    }

    fn running_of(&self, owner: &str) -> usize {
        self.running.get(owner).copied().unwrap_or(0)
    }
}

/// A compile's place among the running ones; leaving it frees the slot.
pub(crate) struct CompileSlot<'a> {
    queue: &'a CompileQueue,
    owner: String,
}

impl Drop for CompileSlot<'_> {
    fn drop(&mut self) {
        let mut state = self.queue.lock();
        if let Some(count) = state.running.get_mut(&self.owner) {
            *count -= 1;
            if *count == 0 {
                state.running.remove(&self.owner);
            }
        }
        self.queue.changed.notify_all();
    }
}

impl CompileQueue {
    /// A queue running at most `max_running` compiles, `max_per_owner` of one owner.
    pub(crate) fn new(max_running: usize, max_per_owner: usize) -> CompileQueue {
        CompileQueue {
            max_running: max_running.max(1),
            max_per_owner: max_per_owner.max(1),
            state: Mutex::default(),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until `owner` may compile; `cancelled` is asked whenever the queue moves
    /// and every 100 ms, and ends the wait with `None`.
    pub(crate) fn enter(
        &self,
        owner: &str,
        cancelled: &dyn Fn() -> bool,
    ) -> Option<CompileSlot<'_>> {
        let mut state = self.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.waiting.push_back((ticket, owner.to_string()));
        loop {
            if cancelled() {
                state.waiting.retain(|(t, _)| *t != ticket);
                self.changed.notify_all();
                return None;
            }
            if self.may_start(&state, ticket) {
                state.waiting.retain(|(t, _)| *t != ticket);
                *state.running.entry(owner.to_string()).or_default() += 1;
                self.changed.notify_all();
                return Some(CompileSlot {
                    queue: self,
                    owner: owner.to_string(),
                });
            }
            state = self
                .changed
                .wait_timeout(state, std::time::Duration::from_millis(100))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Whether `ticket` is the first waiter whose owner is under its own cap, with a
    /// slot free.
    fn may_start(&self, state: &QueueState, ticket: u64) -> bool {
        if state.running_total() >= self.max_running {
            return false;
        }
        state
            .waiting
            .iter()
            .find(|(_, owner)| state.running_of(owner) < self.max_per_owner)
            .is_some_and(|(first, _)| *first == ticket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[test]
    fn another_owner_passes_a_busy_owners_queue() {
        let queue = Arc::new(CompileQueue::new(2, 1));
        let never = || false;
        let busy = queue.enter("evil", &never).unwrap();
        // evil's second compile waits for its first ...
        let evil_second = {
            let queue = queue.clone();
            std::thread::spawn(move || {
                let _slot = queue.enter("evil", &|| false);
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!evil_second.is_finished());
        // ... and does not hold up another tenant, which takes the free slot.
        let good = queue.enter("good", &never).unwrap();
        drop(good);
        assert!(!evil_second.is_finished());
        drop(busy);
        evil_second.join().unwrap();
    }

    #[test]
    fn a_full_host_makes_everyone_wait_and_cancelling_leaves_the_queue() {
        let queue = Arc::new(CompileQueue::new(1, 1));
        let first = queue.enter("a", &|| false).unwrap();
        let cancel = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (queue, cancel) = (queue.clone(), cancel.clone());
            std::thread::spawn(move || {
                queue
                    .enter("b", &|| cancel.load(Ordering::Relaxed))
                    .is_some()
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished());
        cancel.store(true, Ordering::Relaxed);
        assert!(!waiter.join().unwrap(), "a cancelled wait gets no slot");
        drop(first);
        assert!(queue.enter("b", &|| false).is_some());
    }
}

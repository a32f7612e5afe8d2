//! Keyed state as a module sees it during one batch: the changes it made, over the
//! committed state it reads through. A leaf: the `state` host calls use it, and the
//! pipeline layers its store and its uncommitted batches with the same types.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

/// Longest key a module may use; keys are copied into every changelog record.
pub const MAX_KEY_BYTES: usize = 4096;

/// How much state there is: keys, and bytes of keys plus values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StateUsage {
    /// Keys with a value.
    pub keys: u64,
    /// Bytes of those keys and their values.
    pub bytes: u64,
}

impl StateUsage {
    /// The usage after the value under `key` of `old` bytes (absent: no value) is
    /// replaced with one of `new` bytes (absent: removed).
    pub fn replacing(self, key: usize, old: Option<usize>, new: Option<usize>) -> StateUsage {
        let size = |value: Option<usize>| value.map_or(0, |v| (key + v) as u64);
        let count = |value: Option<usize>| u64::from(value.is_some());
        StateUsage {
            keys: (self.keys + count(new)).saturating_sub(count(old)),
            bytes: (self.bytes + size(new)).saturating_sub(size(old)),
        }
    }
}

/// The most state a pipeline may keep (`[state]` in its config).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateLimits {
    /// Most keys.
    pub max_keys: u64,
    /// Most bytes of keys plus values.
    pub max_bytes: u64,
    /// Largest value.
    pub max_value_bytes: usize,
}

/// Why a state call failed.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// A change would keep more keys than the limit.
    #[error(
        "the module would keep {keys} keys of state, more than the {max} the pipeline allows (the [state] max_keys limit)"
    )]
    Keys {
        /// Keys after the change.
        keys: u64,
        /// The limit.
        max: u64,
    },
    /// A change would keep more bytes than the limit.
    #[error(
        "the module would keep {bytes} bytes of state, more than the {max} the pipeline allows (the [state] max_mib limit)"
    )]
    Bytes {
        /// Bytes after the change.
        bytes: u64,
        /// The limit.
        max: u64,
    },
    /// One value is larger than a value may be.
    #[error(
        "a state value of {bytes} bytes is larger than the {max} bytes a value may have (the [state] max_value_kib limit)"
    )]
    Value {
        /// The value's size.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// One key is longer than a key may be.
    #[error("a state key of {bytes} bytes is longer than the {MAX_KEY_BYTES} bytes a key may have")]
    Key {
        /// The key's size.
        bytes: usize,
    },
    /// The module used state in a pipeline that keeps none.
    #[error(
        "the module uses state, but its pipeline keeps none; give the pipeline a [state] section"
    )]
    NotKept,
    /// The module used state outside a `transform` call.
    #[error("state can be used only while a batch is transformed, not during init")]
    OutsideBatch,
    /// The store could not be read.
    #[error("the pipeline's state could not be read: {0}")]
    Read(String),
}

impl StateError {
    /// Whether the module crossed one of its limits (its own doing, the same on a retry).
    pub fn is_limit(&self) -> bool {
        matches!(
            self,
            StateError::Keys { .. }
                | StateError::Bytes { .. }
                | StateError::Value { .. }
                | StateError::Key { .. }
        )
    }
}

/// An entry a scan found: a key and its value.
pub type StateEntry = (Vec<u8>, Vec<u8>);

/// Committed state a module reads through: the pipeline's store, with the batches
/// transformed but not yet committed on top.
pub trait StateSource: Send + Sync {
    /// The value under `key`.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StateError>;
    /// Up to `limit` entries whose keys start with `prefix`, in key order, after
    /// `after` when given.
    fn scan(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<StateEntry>, StateError>;
    /// Keys and bytes held.
    fn usage(&self) -> StateUsage;
}

/// What state a pipeline runs with: where it reads, and its limits.
#[derive(Clone)]
pub struct StateScope {
    /// The committed state and the work not yet committed.
    pub source: Arc<dyn StateSource>,
    /// Its limits.
    pub limits: StateLimits,
}

/// Changes to keyed state, by key (the last change of a key wins): a value, or `None`
/// for a removed key. With the usage they leave, when they were made by a module.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StateChanges {
    changes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    usage: Option<StateUsage>,
}

impl StateChanges {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// How many keys changed.
    pub fn len(&self) -> usize {
        self.changes.len()
    }

    /// The usage the changes leave, when known.
    pub fn usage(&self) -> Option<StateUsage> {
        self.usage
    }

    /// Records that `key` now holds `value` (`None`: removed).
    pub fn record(&mut self, key: Vec<u8>, value: Option<Vec<u8>>) {
        self.changes.insert(key, value);
    }

    /// Sets the usage the changes leave.
    pub fn set_usage(&mut self, usage: StateUsage) {
        self.usage = Some(usage);
    }

    /// What the changes say of `key`: `None` when it did not change, `Some(None)` when
    /// it was removed.
    pub fn lookup(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        self.changes.get(key).map(Option::as_deref)
    }

    /// The changes in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.changes
            .iter()
            .map(|(key, value)| (key.as_slice(), value.as_deref()))
    }

    /// Adds (copies of) `later` changes on top of these.
    pub fn extend(&mut self, later: &StateChanges) {
        self.changes.extend(
            later
                .changes
                .iter()
                .map(|(key, value)| (key.clone(), value.clone())),
        );
        if later.usage.is_some() {
            self.usage = later.usage;
        }
    }

    /// Forgets what these changes say of `key`.
    pub fn forget(&mut self, key: &[u8]) {
        self.changes.remove(key);
    }

    /// The changed keys starting with `prefix`, after `after`, through `through`.
    fn range<'a>(
        &'a self,
        prefix: &'a [u8],
        after: Option<&[u8]>,
        through: Option<&[u8]>,
    ) -> impl Iterator<Item = (&'a Vec<u8>, &'a Option<Vec<u8>>)> + 'a {
        let lower = match after {
            Some(after) if after >= prefix => Bound::Excluded(after.to_vec()),
            _ => Bound::Included(prefix.to_vec()),
        };
        let upper = through.map_or(Bound::Unbounded, |key| Bound::Included(key.to_vec()));
        let empty = matches!((&lower, &upper), (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u)) if l > u);
        let range = if empty {
            self.changes
                .range::<Vec<u8>, _>((Bound::Unbounded, Bound::Excluded(Vec::new())))
        } else {
            self.changes.range((lower, upper))
        };
        range.take_while(move |(key, _)| key.starts_with(prefix))
    }
}

impl FromIterator<(Vec<u8>, Option<Vec<u8>>)> for StateChanges {
    fn from_iter<I: IntoIterator<Item = (Vec<u8>, Option<Vec<u8>>)>>(changes: I) -> Self {
        let mut collected = StateChanges::default();
        for (key, value) in changes {
            collected.record(key, value);
        }
        collected
    }
}

/// Changes on top of the state below them: what reads see.
pub struct Layered<'a> {
    /// The newer changes.
    pub top: &'a StateChanges,
    /// The state they change.
    pub below: &'a dyn StateSource,
}

impl StateSource for Layered<'_> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        match self.top.lookup(key) {
            Some(value) => Ok(value.map(<[u8]>::to_vec)),
            None => self.below.get(key),
        }
    }

    fn scan(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<StateEntry>, StateError> {
        let mut found = Vec::new();
        if limit == 0 {
            return Ok(found);
        }
        let mut cursor = after.map(<[u8]>::to_vec);
        loop {
            // A page of the state below, with the changes that fall in its span merged
            // in; removals may empty it, so pages go on until `limit` entries are found.
            let page = self.below.scan(prefix, cursor.as_deref(), limit)?;
            let exhausted = page.len() < limit;
            let page_end = match exhausted {
                true => None,
                false => page.last().map(|(key, _)| key.clone()),
            };
            let mut merged: BTreeMap<Vec<u8>, Vec<u8>> = page.into_iter().collect();
            for (key, value) in self
                .top
                .range(prefix, cursor.as_deref(), page_end.as_deref())
            {
                match value {
                    Some(value) => merged.insert(key.clone(), value.clone()),
                    None => merged.remove(key),
                };
            }
            for entry in merged {
                if found.len() == limit {
                    return Ok(found);
                }
                found.push(entry);
            }
            match page_end {
                Some(end) if found.len() < limit => cursor = Some(end),
                _ => return Ok(found),
            }
        }
    }

    fn usage(&self) -> StateUsage {
        self.top.usage.unwrap_or_else(|| self.below.usage())
    }
}

/// A module's state during one `transform` call: what it changed so far, over the
/// state of the pipeline, within the pipeline's limits.
pub(crate) struct KeyedSession {
    scope: StateScope,
    changes: StateChanges,
    usage: StateUsage,
    /// What the module's calls read and wrote.
    pub(crate) access: StateAccess,
}

/// How much of its state a module read and wrote in a batch: keys asked for (by `get`
/// and `get-many`) and entries a `scan` returned, keys put or deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StateAccess {
    /// Keys read.
    pub keys_read: u64,
    /// Keys written (put or deleted).
    pub keys_written: u64,
}

impl KeyedSession {
    pub(crate) fn new(scope: StateScope) -> KeyedSession {
        let usage = scope.source.usage();
        KeyedSession {
            scope,
            changes: StateChanges::default(),
            usage,
            access: StateAccess::default(),
        }
    }

    fn view(&self) -> Layered<'_> {
        Layered {
            top: &self.changes,
            below: &*self.scope.source,
        }
    }

    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        self.view().get(key)
    }

    pub(crate) fn scan(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<StateEntry>, StateError> {
        self.view().scan(prefix, after, limit)
    }

    /// Sets `key` to `value` (`None`: removes it), within the limits.
    pub(crate) fn change(
        &mut self,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    ) -> Result<(), StateError> {
        if key.len() > MAX_KEY_BYTES {
            return Err(StateError::Key { bytes: key.len() });
        }
        let limits = self.scope.limits;
        if let Some(value) = &value
            && value.len() > limits.max_value_bytes
        {
            return Err(StateError::Value {
                bytes: value.len(),
                max: limits.max_value_bytes,
            });
        }
        let old = self.get(&key)?;
        if old.is_none() && value.is_none() {
            return Ok(());
        }
        let after = self.usage.replacing(
            key.len(),
            old.as_ref().map(Vec::len),
            value.as_ref().map(Vec::len),
        );
        // A change that does not grow the state is always allowed, so a module can
        // shrink a state that is past limits lowered since.
        if after.keys > limits.max_keys && after.keys > self.usage.keys {
            return Err(StateError::Keys {
                keys: after.keys,
                max: limits.max_keys,
            });
        }
        if after.bytes > limits.max_bytes && after.bytes > self.usage.bytes {
            return Err(StateError::Bytes {
                bytes: after.bytes,
                max: limits.max_bytes,
            });
        }
        self.changes.record(key, value);
        self.usage = after;
        Ok(())
    }

    /// The batch's changes, with the usage they leave, and what the module's calls
    /// read and wrote.
    pub(crate) fn finish(mut self) -> (StateChanges, StateAccess) {
        self.changes.set_usage(self.usage);
        (self.changes, self.access)
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

    /// A committed state of `entries`, answering scans in pages as a store does.
    struct Committed(BTreeMap<Vec<u8>, Vec<u8>>);

    impl Committed {
        fn of(entries: &[(&str, &str)]) -> Committed {
            Committed(
                entries
                    .iter()
                    .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
                    .collect(),
            )
        }
    }

    impl StateSource for Committed {
        fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
            Ok(self.0.get(key).cloned())
        }

        fn scan(
            &self,
            prefix: &[u8],
            after: Option<&[u8]>,
            limit: usize,
        ) -> Result<Vec<StateEntry>, StateError> {
            Ok(self
                .0
                .iter()
                .filter(|(key, _)| {
                    key.starts_with(prefix) && after.is_none_or(|a| key.as_slice() > a)
                })
                .take(limit)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect())
        }

        fn usage(&self) -> StateUsage {
            StateUsage {
                keys: self.0.len() as u64,
                bytes: self.0.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum(),
            }
        }
    }

    fn keys(entries: Vec<StateEntry>) -> Vec<String> {
        entries
            .into_iter()
            .map(|(k, v)| {
                format!(
                    "{}={}",
                    String::from_utf8(k).unwrap(),
                    String::from_utf8(v).unwrap()
                )
            })
            .collect()
    }

    #[test]
    fn reads_see_changes_over_the_committed_state() {
        let below = Committed::of(&[("a", "1"), ("b", "2")]);
        let top = changes(&[("a", None), ("c", Some("3"))]);
        let view = Layered {
            top: &top,
            below: &below,
        };
        assert_eq!(view.get(b"a").unwrap(), None);
        assert_eq!(view.get(b"b").unwrap(), Some(b"2".to_vec()));
        assert_eq!(view.get(b"c").unwrap(), Some(b"3".to_vec()));
    }

    #[test]
    fn scans_merge_changes_page_by_page_and_skip_removed_keys() {
        let below = Committed::of(&[
            ("acct/1", "a"),
            ("acct/2", "b"),
            ("acct/3", "c"),
            ("acct/4", "d"),
            ("other", "x"),
        ]);
        let top = changes(&[
            ("acct/1", None),
            ("acct/2", None),
            ("acct/25", Some("new")),
            ("acct/3", Some("C")),
            ("zzz", Some("z")),
        ]);
        let view = Layered {
            top: &top,
            below: &below,
        };
        assert_eq!(
            keys(view.scan(b"acct/", None, 2).unwrap()),
            ["acct/25=new", "acct/3=C"]
        );
        assert_eq!(
            keys(view.scan(b"acct/", Some(b"acct/3"), 10).unwrap()),
            ["acct/4=d"]
        );
        assert_eq!(keys(view.scan(b"", None, 100).unwrap()).len(), 5);
        assert!(view.scan(b"acct/", None, 0).unwrap().is_empty());
        // A cursor before the prefix starts at the prefix.
        assert_eq!(keys(view.scan(b"z", Some(b"a"), 5).unwrap()), ["zzz=z"]);
    }

    #[test]
    fn scans_page_through_every_key_once() {
        let entries: Vec<(String, String)> = (0..50)
            .map(|i| (format!("k{i:03}"), i.to_string()))
            .collect();
        let borrowed: Vec<(&str, &str)> = entries
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let below = Committed::of(&borrowed);
        let mut top = StateChanges::default();
        for i in (0..50).step_by(3) {
            top.record(format!("k{i:03}").into_bytes(), None);
        }
        top.record(b"k0405".to_vec(), Some(b"between".to_vec()));
        let view = Layered {
            top: &top,
            below: &below,
        };
        let mut seen: Vec<Vec<u8>> = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let page = view.scan(b"k", after.as_deref(), 4).unwrap();
            let done = page.len() < 4;
            after = page.last().map(|(k, _)| k.clone());
            seen.extend(page.into_iter().map(|(k, _)| k));
            if done {
                break;
            }
        }
        assert_eq!(seen.len(), 50 - 17 + 1);
        let mut sorted = seen.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted, seen);
    }

    fn session(max_keys: u64, max_bytes: u64) -> KeyedSession {
        KeyedSession::new(StateScope {
            source: Arc::new(Committed::of(&[("a", "1234")])),
            limits: StateLimits {
                max_keys,
                max_bytes,
                max_value_bytes: 16,
            },
        })
    }

    #[test]
    fn a_session_counts_its_usage_and_refuses_growth_past_the_limits() {
        let mut state = session(2, 100);
        state.change(b"b".to_vec(), Some(b"xy".to_vec())).unwrap();
        let refused = state
            .change(b"c".to_vec(), Some(b"z".to_vec()))
            .unwrap_err();
        assert!(
            matches!(refused, StateError::Keys { keys: 3, max: 2 }),
            "{refused}"
        );
        assert!(refused.is_limit());
        // Replacing and removing do not add keys.
        state.change(b"a".to_vec(), Some(b"5".to_vec())).unwrap();
        state.change(b"b".to_vec(), None).unwrap();
        state.change(b"absent".to_vec(), None).unwrap();
        let value = state.change(b"v".to_vec(), Some(vec![0; 17])).unwrap_err();
        assert!(
            matches!(value, StateError::Value { bytes: 17, max: 16 }),
            "{value}"
        );
        let (finished, _) = state.finish();
        assert_eq!(finished.usage(), Some(StateUsage { keys: 1, bytes: 2 }));
        assert_eq!(finished.len(), 2);
        assert_eq!(finished.lookup(b"absent"), None);
    }

    #[test]
    fn a_session_refuses_bytes_past_the_limit_but_lets_state_shrink() {
        let mut state = session(10, 8);
        let refused = state
            .change(b"bb".to_vec(), Some(b"1234".to_vec()))
            .unwrap_err();
        assert!(
            matches!(refused, StateError::Bytes { bytes: 11, max: 8 }),
            "{refused}"
        );
        let mut over = session(10, 2);
        over.change(b"a".to_vec(), Some(b"12".to_vec())).unwrap();
        assert!(
            over.change(b"long key".to_vec(), vec![0; MAX_KEY_BYTES + 1].into())
                .is_err()
        );
        let long = over.change(vec![0; MAX_KEY_BYTES + 1], None).unwrap_err();
        assert!(matches!(long, StateError::Key { .. }), "{long}");
    }
}

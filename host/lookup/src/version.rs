//! One table version's changes by key, with the key's uniqueness checked: what a store
//! applies at once.

use std::collections::{BTreeMap, BTreeSet};

/// What one change row does to its key's row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowChange {
    /// An insert or an update's postimage: the key has this row from the version on.
    Added,
    /// A delete or an update's preimage: the key's row before the version goes.
    Removed,
}

/// The changes of one version: the rows keys get and the keys that lose theirs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VersionChanges {
    added: BTreeMap<Vec<u8>, Vec<u8>>,
    removed: BTreeSet<Vec<u8>>,
}

impl VersionChanges {
    /// Records a change row of `key`; `row` is the kept columns of an added row. Returns
    /// `false` when the version already gave the key a row: two rows of one key.
    pub fn record(&mut self, key: Vec<u8>, change: RowChange, row: Vec<u8>) -> bool {
        match change {
            RowChange::Added => self.added.insert(key, row).is_none(),
            RowChange::Removed => {
                self.removed.insert(key);
                true
            }
        }
    }

    /// The keys given a row without losing one in the version: each must have had no
    /// row before it, or the table has two rows with that key.
    pub fn new_keys(&self) -> impl Iterator<Item = &[u8]> {
        self.added
            .keys()
            .filter(|key| !self.removed.contains(*key))
            .map(Vec::as_slice)
    }

    /// Keys and their rows from the version on: `None` for a key that lost its row.
    pub fn entries(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        let removed = self
            .removed
            .iter()
            .filter(|key| !self.added.contains_key(*key))
            .map(|key| (key.as_slice(), None));
        self.added
            .iter()
            .map(|(key, row)| (key.as_slice(), Some(row.as_slice())))
            .chain(removed)
    }

    /// How many keys change.
    pub fn len(&self) -> usize {
        self.entries().count()
    }

    /// Whether no key changes.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> Vec<u8> {
        k.as_bytes().to_vec()
    }

    #[test]
    fn an_update_replaces_a_row_and_a_changed_key_moves_it() {
        let mut changes = VersionChanges::default();
        // UPDATE owner 1's name; UPDATE owner 2's key to 3.
        assert!(changes.record(key("1"), RowChange::Removed, Vec::new()));
        assert!(changes.record(key("1"), RowChange::Added, b"Ada".to_vec()));
        assert!(changes.record(key("2"), RowChange::Removed, Vec::new()));
        assert!(changes.record(key("3"), RowChange::Added, b"Bo".to_vec()));
        let entries: Vec<_> = changes.entries().collect();
        assert_eq!(
            entries,
            [
                (&b"1"[..], Some(&b"Ada"[..])),
                (&b"3"[..], Some(&b"Bo"[..])),
                (&b"2"[..], None)
            ]
        );
        assert_eq!(changes.new_keys().collect::<Vec<_>>(), [&b"3"[..]]);
    }

    #[test]
    fn two_rows_of_one_key_in_a_version_are_found() {
        let mut changes = VersionChanges::default();
        assert!(changes.record(key("1"), RowChange::Added, b"a".to_vec()));
        assert!(!changes.record(key("1"), RowChange::Added, b"b".to_vec()));
    }
}

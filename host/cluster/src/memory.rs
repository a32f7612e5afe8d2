//! The cluster's IO in memory, for unit tests of what runs in a cluster: shared logs
//! many nodes of one test open ([`MemoryLogs`]), and a group that gives each node the
//! slots the test says ([`MemoryGroup`]). No broker.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use crate::log::StateRecord;
use crate::membership::SlotChange;
use crate::shared::{Group, Member, Opened, Pending, SharedLog, SharedLogs};
use crate::topic::SharedTopic;

/// Shared logs in memory; clones share the logs, so every node of a test given a clone
/// reads and writes the same ones. Nothing is compacted: every record is replayed.
#[derive(Clone, Debug, Default)]
pub struct MemoryLogs {
    logs: Arc<Mutex<HashMap<SharedTopic, Kept>>>,
}

/// One log's records and the nodes reading it.
#[derive(Debug, Default)]
struct Kept {
    records: Vec<StateRecord>,
    readers: Vec<mpsc::UnboundedSender<StateRecord>>,
}

impl MemoryLogs {
    /// Runs `f` on the log of `shared`; the lock makes offsets and deliveries one order.
    fn with<T>(&self, shared: SharedTopic, f: impl FnOnce(&mut Kept) -> T) -> T {
        let mut logs = self.logs.lock().unwrap_or_else(|e| e.into_inner());
        f(logs.entry(shared).or_default())
    }
}

impl SharedLogs for MemoryLogs {
    fn open<'a>(&'a self, _node: &'a str, shared: SharedTopic) -> Pending<'a, Opened> {
        let (reader, records) = mpsc::unbounded_channel();
        let replay_end = self.with(shared, |kept| {
            for record in &kept.records {
                // The receiver is in hand: sending cannot fail.
                let _ = reader.send(record.clone());
            }
            kept.readers.push(reader);
            kept.records.len() as i64
        });
        let log = MemoryLog {
            logs: self.clone(),
            shared,
            replay_end,
        };
        Box::pin(std::future::ready(Ok((
            Box::new(log) as Box<dyn SharedLog>,
            records,
        ))))
    }
}

/// One node's handle on a log of [`MemoryLogs`].
struct MemoryLog {
    logs: MemoryLogs,
    shared: SharedTopic,
    replay_end: i64,
}

impl SharedLog for MemoryLog {
    fn replay_end(&self) -> i64 {
        self.replay_end
    }

    fn end_offset(&self) -> Pending<'_, i64> {
        let end = self
            .logs
            .with(self.shared, |kept| kept.records.len() as i64);
        Box::pin(std::future::ready(Ok(end)))
    }

    fn write<'a>(&'a self, key: &'a str, value: Option<&'a [u8]>) -> Pending<'a, i64> {
        let offset = self.logs.with(self.shared, |kept| {
            let record = StateRecord {
                key: key.to_string(),
                value: value.map(<[u8]>::to_vec),
                offset: kept.records.len() as i64,
            };
            // A node that dropped its receiver has left; the others get the record.
            kept.readers
                .retain(|reader| reader.send(record.clone()).is_ok());
            kept.records.push(record);
            kept.records.len() as i64 - 1
        });
        Box::pin(std::future::ready(Ok(offset)))
    }
}

/// A group in memory: the node that joins through it holds the slots it was made with,
/// from the moment it joins, and no rebalance moves them.
#[derive(Clone, Debug)]
pub struct MemoryGroup {
    slots: Vec<u32>,
}

impl MemoryGroup {
    /// A node alone in its cluster: it holds all `count` slots.
    pub fn alone(count: u32) -> MemoryGroup {
        MemoryGroup::holding(0..count)
    }

    /// A node holding `slots` (none, for a node that runs nothing).
    pub fn holding(slots: impl IntoIterator<Item = u32>) -> MemoryGroup {
        MemoryGroup {
            slots: slots.into_iter().collect(),
        }
    }
}

impl Group for MemoryGroup {
    fn join<'a>(
        &'a self,
        _node: &'a str,
        changes: mpsc::UnboundedSender<SlotChange>,
    ) -> Pending<'a, Box<dyn Member>> {
        if !self.slots.is_empty() {
            // A node that stopped listening already has nothing to start.
            let _ = changes.send(SlotChange::Assigned(self.slots.clone()));
        }
        Box::pin(std::future::ready(Ok(
            Box::new(MemoryMember) as Box<dyn Member>
        )))
    }
}

/// A membership of a [`MemoryGroup`].
struct MemoryMember;

impl Member for MemoryMember {
    fn leave(self: Box<Self>) {
        // No other node takes the slots over: the test says which node holds what.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_reader_gets_every_record_in_order_including_those_before_it_opened() {
        let logs = MemoryLogs::default();
        let (first, mut first_records) = logs.open("one", SharedTopic::State).await.unwrap();
        assert_eq!(first.replay_end(), 0);
        assert_eq!(first.write("a", Some(b"1")).await.unwrap(), 0);
        assert_eq!(first.write("a", None).await.unwrap(), 1);
        let (second, mut second_records) = logs.open("two", SharedTopic::State).await.unwrap();
        assert_eq!(second.replay_end(), 2);
        assert_eq!(second.write("b", Some(b"2")).await.unwrap(), 2);
        assert_eq!(first.end_offset().await.unwrap(), 3);
        let expected = vec![
            StateRecord {
                key: "a".into(),
                value: Some(b"1".to_vec()),
                offset: 0,
            },
            StateRecord {
                key: "a".into(),
                value: None,
                offset: 1,
            },
            StateRecord {
                key: "b".into(),
                value: Some(b"2".to_vec()),
                offset: 2,
            },
        ];
        for records in [&mut first_records, &mut second_records] {
            let mut got = Vec::new();
            while let Ok(record) = records.try_recv() {
                got.push(record);
            }
            assert_eq!(got, expected);
        }
        // The status log is another log.
        let (status, _) = logs.open("one", SharedTopic::Status).await.unwrap();
        assert_eq!(status.end_offset().await.unwrap(), 0);
    }

    #[tokio::test]
    async fn a_node_holds_the_slots_its_group_gives() {
        for (group, slots) in [
            (MemoryGroup::alone(3), Some(vec![0, 1, 2])),
            (MemoryGroup::holding([4]), Some(vec![4])),
            (MemoryGroup::holding([]), None),
        ] {
            let (changes, mut received) = mpsc::unbounded_channel();
            group.join("node", changes).await.unwrap().leave();
            let assigned = match received.try_recv() {
                Ok(SlotChange::Assigned(slots)) => Some(slots),
                Ok(other) => panic!("{other:?}"),
                Err(_) => None,
            };
            assert_eq!(assigned, slots);
        }
    }
}

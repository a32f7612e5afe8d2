//! Records in the packed form that crosses the Wasm boundary: one byte buffer plus
//! lengths, instead of one small allocation per key, value and header.

/// A Kafka record made from one change row.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// Index, within the batch, of the row it was made from.
    pub source_row: u32,
    /// Topic; the pipeline's topic when absent.
    pub topic: Option<String>,
    /// Partition; Kafka's partitioner (by key) when absent.
    pub partition: Option<i32>,
    /// Key bytes.
    pub key: Option<Vec<u8>>,
    /// Value bytes; absent makes a tombstone.
    pub value: Option<Vec<u8>>,
    /// Headers, in order.
    pub headers: Vec<(String, Vec<u8>)>,
}

impl Record {
    /// A record with no key, no value (a tombstone) and no headers.
    pub fn new() -> Record {
        Record::default()
    }

    /// Sets the key; Kafka partitions by it.
    pub fn key(mut self, key: impl Into<Vec<u8>>) -> Record {
        self.key = Some(key.into());
        self
    }

    /// Sets the value; a record without one is a tombstone.
    pub fn value(mut self, value: impl Into<Vec<u8>>) -> Record {
        self.value = Some(value.into());
        self
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: impl Into<Vec<u8>>) -> Record {
        self.headers.push((name.to_string(), value.into()));
        self
    }

    /// Sends the record to `topic` instead of the pipeline's topic.
    pub fn topic(mut self, topic: &str) -> Record {
        self.topic = Some(topic.to_string());
        self
    }

    /// Sends the record to `partition` instead of the one Kafka picks by key.
    pub fn partition(mut self, partition: i32) -> Record {
        self.partition = Some(partition);
        self
    }
}

/// Many records in packed form; field by field the contract's `packed-records`.
///
/// `data` holds, record after record, its key, its value and its header values. The
/// optional per-record lists (`topic_indexes`, `partitions`, `header_counts`) are
/// empty until a record needs them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct PackedRecords {
    pub data: Vec<u8>,
    pub source_rows: Vec<u32>,
    pub key_lengths: Vec<i32>,
    pub value_lengths: Vec<i32>,
    pub topics: Vec<String>,
    pub topic_indexes: Vec<u32>,
    pub partitions: Vec<i32>,
    pub header_names: Vec<String>,
    pub header_counts: Vec<u32>,
    pub header_name_indexes: Vec<u32>,
    pub header_value_lengths: Vec<u32>,
}

/// Why packed records are malformed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackedError(pub String);

impl std::fmt::Display for PackedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PackedError {}

impl PackedRecords {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.source_rows.len()
    }

    /// Whether there are no records.
    pub fn is_empty(&self) -> bool {
        self.source_rows.is_empty()
    }

    /// Appends one record.
    pub fn push(&mut self, record: &Record) {
        self.push_bytes(
            record.source_row,
            record.key.as_deref(),
            record.value.as_deref(),
        );
        let index = self.len() - 1;
        if let Some(topic) = &record.topic {
            let position = match self.topics.iter().position(|t| t == topic) {
                Some(position) => position,
                None => {
                    self.topics.push(topic.clone());
                    self.topics.len() - 1
                }
            };
            self.topic_indexes.resize(index, 0);
            self.topic_indexes.push(position as u32 + 1);
        } else if !self.topic_indexes.is_empty() {
            self.topic_indexes.push(0);
        }
        if let Some(partition) = record.partition {
            self.partitions.resize(index, -1);
            self.partitions.push(partition);
        } else if !self.partitions.is_empty() {
            self.partitions.push(-1);
        }
        if !record.headers.is_empty() {
            self.header_counts.resize(index, 0);
            self.header_counts.push(record.headers.len() as u32);
            for (name, value) in &record.headers {
                let position = match self.header_names.iter().position(|n| n == name) {
                    Some(position) => position,
                    None => {
                        self.header_names.push(name.clone());
                        self.header_names.len() - 1
                    }
                };
                self.header_name_indexes.push(position as u32);
                self.header_value_lengths.push(value.len() as u32);
                self.data.extend_from_slice(value);
            }
        } else if !self.header_counts.is_empty() {
            self.header_counts.push(0);
        }
    }

    /// Appends a record to the pipeline's topic, without headers: the common case,
    /// with no allocation beyond the buffers' growth.
    pub fn push_parts(&mut self, source_row: u32, key: Option<&[u8]>, value: Option<&[u8]>) {
        self.push_bytes(source_row, key, value);
        for list in [&mut self.topic_indexes, &mut self.header_counts] {
            if !list.is_empty() {
                list.push(0);
            }
        }
        if !self.partitions.is_empty() {
            self.partitions.push(-1);
        }
    }

    fn push_bytes(&mut self, source_row: u32, key: Option<&[u8]>, value: Option<&[u8]>) {
        self.source_rows.push(source_row);
        for (bytes, lengths) in [
            (key, &mut self.key_lengths),
            (value, &mut self.value_lengths),
        ] {
            match bytes {
                Some(bytes) => {
                    lengths.push(bytes.len() as i32);
                    self.data.extend_from_slice(bytes);
                }
                None => lengths.push(-1),
            }
        }
    }

    /// Checks the lists against each other and returns the records; every source row
    /// must be below `num_rows`.
    pub fn unpack(self, num_rows: u32) -> Result<Vec<Record>, PackedError> {
        let n = self.len();
        let fail = |message: String| Err(PackedError(message));
        for (name, len) in [
            ("key-lengths", self.key_lengths.len()),
            ("value-lengths", self.value_lengths.len()),
        ] {
            if len != n {
                return fail(format!("{name} has {len} entries for {n} records"));
            }
        }
        for (name, len) in [
            ("topic-indexes", self.topic_indexes.len()),
            ("partitions", self.partitions.len()),
            ("header-counts", self.header_counts.len()),
        ] {
            if len != 0 && len != n {
                return fail(format!(
                    "{name} has {len} entries; it must be empty or have one per record ({n})"
                ));
            }
        }
        let headers: u64 = self.header_counts.iter().map(|&c| u64::from(c)).sum();
        for (name, len) in [
            ("header-name-indexes", self.header_name_indexes.len()),
            ("header-value-lengths", self.header_value_lengths.len()),
        ] {
            if len as u64 != headers {
                return fail(format!(
                    "{name} has {len} entries but header-counts add up to {headers}"
                ));
            }
        }
        let mut offset = 0usize;
        let mut take = |len: usize, what: &str, record: usize| -> Result<Vec<u8>, PackedError> {
            let end = offset
                .checked_add(len)
                .filter(|&end| end <= self.data.len())
                .ok_or_else(|| {
                    PackedError(format!(
                        "record {record}'s {what} runs past the end of data ({} bytes)",
                        self.data.len()
                    ))
                })?;
            let bytes = self.data[offset..end].to_vec();
            offset = end;
            Ok(bytes)
        };
        let mut records = Vec::with_capacity(n);
        let mut header = 0usize;
        for i in 0..n {
            let source_row = self.source_rows[i];
            if source_row >= num_rows {
                return fail(format!(
                    "record {i} names source row {source_row} but the batch has {num_rows} rows"
                ));
            }
            let mut optional = |len: i32, what: &str| match len {
                -1 => Ok(None),
                len if len >= 0 => take(len as usize, what, i).map(Some),
                len => Err(PackedError(format!(
                    "record {i} has a {what} length of {len}"
                ))),
            };
            let key = optional(self.key_lengths[i], "key")?;
            let value = optional(self.value_lengths[i], "value")?;
            let topic = match self.topic_indexes.get(i) {
                None | Some(0) => None,
                Some(&t) => Some(
                    self.topics
                        .get(t as usize - 1)
                        .ok_or_else(|| {
                            PackedError(format!(
                                "record {i} names topic index {t} but there are {} topics",
                                self.topics.len()
                            ))
                        })?
                        .clone(),
                ),
            };
            let partition = match self.partitions.get(i) {
                None | Some(-1) => None,
                Some(&p) if p >= 0 => Some(p),
                Some(&p) => return fail(format!("record {i} has partition {p}")),
            };
            let count = self.header_counts.get(i).copied().unwrap_or(0) as usize;
            let mut headers = Vec::with_capacity(count);
            for _ in 0..count {
                let name_index = self.header_name_indexes[header] as usize;
                let name = self.header_names.get(name_index).ok_or_else(|| {
                    PackedError(format!(
                        "record {i} names header name index {name_index} but there are {} names",
                        self.header_names.len()
                    ))
                })?;
                let value = take(self.header_value_lengths[header] as usize, "header", i)?;
                headers.push((name.clone(), value));
                header += 1;
            }
            records.push(Record {
                source_row,
                topic,
                partition,
                key,
                value,
                headers,
            });
        }
        if offset != self.data.len() {
            return fail(format!(
                "the lengths add up to {offset} bytes but data has {}",
                self.data.len()
            ));
        }
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use sluice_fuzzing::fuzz;
    use sluice_fuzzing::proptest::collection::vec;
    use sluice_fuzzing::proptest::option;
    use sluice_fuzzing::proptest::prelude::*;
    use sluice_fuzzing::proptest::sample::{Index, select};
    use sluice_fuzzing::strategies::{list, text};

    use super::*;

    /// A record whose source row is within a batch of at most 50 rows.
    fn record() -> impl Strategy<Value = Record> + Clone {
        let bytes = || list(any::<u8>(), 32);
        (
            0..50u32,
            option::weighted(1.0 / 3.0, text(&["t1", "t2"])),
            option::weighted(1.0 / 3.0, 0..1000i32),
            option::of(bytes()),
            option::of(bytes()),
            list((text(&["op", "id"]), bytes()), 3),
        )
            .prop_map(
                |(source_row, topic, partition, key, value, headers)| Record {
                    source_row,
                    topic,
                    partition,
                    key,
                    value,
                    headers,
                },
            )
    }

    /// One of the packed lists, changed: an entry added, removed or replaced (by a
    /// number cut to the list's type and, for lengths and indexes, to a likely range).
    #[derive(Clone, Debug)]
    struct Corruption {
        list: &'static str,
        edit: Edit,
        number: u64,
    }

    #[derive(Clone, Debug)]
    enum Edit {
        Push,
        Pop,
        Replace(Index),
    }

    const LISTS: &[&str] = &[
        "data",
        "source_rows",
        "key_lengths",
        "value_lengths",
        "topics",
        "topic_indexes",
        "partitions",
        "header_names",
        "header_counts",
        "header_name_indexes",
        "header_value_lengths",
    ];

    fn corruption() -> impl Strategy<Value = Corruption> {
        let edit = prop_oneof![
            Just(Edit::Push),
            Just(Edit::Pop),
            any::<Index>().prop_map(Edit::Replace),
        ];
        (select(LISTS), edit, any::<u64>()).prop_map(|(list, edit, number)| Corruption {
            list,
            edit,
            number,
        })
    }

    impl Corruption {
        fn apply(&self, packed: &mut PackedRecords) {
            fn edit<T: Clone>(edit: &Edit, list: &mut Vec<T>, new: T) {
                match edit {
                    Edit::Push => list.push(new),
                    Edit::Pop => {
                        list.pop();
                    }
                    Edit::Replace(at) if !list.is_empty() => {
                        let at = at.index(list.len());
                        list[at] = new;
                    }
                    Edit::Replace(_) => {}
                }
            }
            let (e, n) = (&self.edit, self.number);
            match self.list {
                "data" => edit(e, &mut packed.data, n as u8),
                "source_rows" => edit(e, &mut packed.source_rows, n as u32),
                "key_lengths" => edit(e, &mut packed.key_lengths, n as i32),
                "value_lengths" => edit(e, &mut packed.value_lengths, n as i32 % 40),
                "topics" => edit(e, &mut packed.topics, String::new()),
                "topic_indexes" => edit(e, &mut packed.topic_indexes, n as u32 % 5),
                "partitions" => edit(e, &mut packed.partitions, n as i32),
                "header_names" => edit(e, &mut packed.header_names, String::new()),
                "header_counts" => edit(e, &mut packed.header_counts, n as u32 % 4),
                "header_name_indexes" => edit(e, &mut packed.header_name_indexes, n as u32 % 4),
                _ => edit(e, &mut packed.header_value_lengths, n as u32 % 40),
            }
        }
    }

    /// Records of a batch of `rows` rows, packed, then (half the time) one to three
    /// corruptions of the packed lists.
    #[derive(Debug)]
    struct Case {
        rows: u32,
        records: Vec<Record>,
        corruptions: Option<Vec<Corruption>>,
    }

    fn case() -> impl Strategy<Value = Case> {
        (
            1..=50u32,
            list(record(), 20),
            option::of(vec(corruption(), 1..=3)),
        )
            .prop_map(|(rows, mut records, corruptions)| {
                for record in &mut records {
                    record.source_row %= rows;
                }
                Case {
                    rows,
                    records,
                    corruptions,
                }
            })
    }

    #[test]
    fn fuzz_packed_records() {
        fuzz("packed-records", case(), |case| {
            let mut packed = PackedRecords::default();
            for record in &case.records {
                packed.push(record);
            }
            let Some(corruptions) = case.corruptions else {
                let unpacked = packed.unpack(case.rows).expect("packed records unpack");
                assert_eq!(unpacked, case.records);
                return;
            };
            for corruption in &corruptions {
                corruption.apply(&mut packed);
            }
            // Malformed lists are refused with a reason, never a panic.
            if let Err(e) = packed.unpack(case.rows) {
                assert!(!e.0.is_empty());
            }
        });
    }

    #[test]
    fn records_round_trip() {
        let records = vec![
            Record::new().key("k1").value("v1"),
            Record {
                source_row: 2,
                ..Record::new()
                    .key("k2")
                    .topic("deletes")
                    .header("h", "x")
                    .partition(3)
            },
            Record {
                source_row: 3,
                ..Record::new().value("v3").header("h", "y").header("g", "")
            },
        ];
        let mut packed = PackedRecords::default();
        for record in &records {
            packed.push(record);
        }
        assert_eq!(packed.topic_indexes, [0, 1, 0]);
        assert_eq!(packed.header_names, ["h", "g"]);
        assert_eq!(packed.unpack(4).unwrap(), records);
    }

    #[test]
    fn malformed_lists_are_named() {
        let mut packed = PackedRecords::default();
        packed.push(&Record::new().key("k").value("v"));
        let mut short = packed.clone();
        short.data.pop();
        assert_eq!(
            short.unpack(1).unwrap_err().0,
            "record 0's value runs past the end of data (1 bytes)"
        );
        let mut long = packed.clone();
        long.data.push(0);
        assert_eq!(
            long.unpack(1).unwrap_err().0,
            "the lengths add up to 2 bytes but data has 3"
        );
        let mut counts = packed.clone();
        counts.value_lengths.clear();
        assert_eq!(
            counts.unpack(1).unwrap_err().0,
            "value-lengths has 0 entries for 1 records"
        );
        assert_eq!(
            packed.unpack(0).unwrap_err().0,
            "record 0 names source row 0 but the batch has 0 rows"
        );
    }
}

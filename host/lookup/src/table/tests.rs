//! Following tables in memory: as-of reads, a rebuild for an older batch, resuming,
//! keys that are not unique, and waiting bounded by `max_wait`.

use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;

use delta_kernel::arrow::array::{AsArray, Int64Array, TimestampMicrosecondArray};
use delta_kernel::arrow::datatypes::{DataType, Field, TimeUnit};
use sluice_source::{Position, VersionInfo};

use super::*;
use crate::memory::MemoryVersions;
use crate::reader::ChangeBatches;
use crate::redb_store::RedbVersions;

/// One version of a table of owners (`id`, `name`): its commit time, its change rows
/// and the rows after it.
struct Version {
    committed_ms: i64,
    changes: Vec<(i64, &'static str, &'static str)>,
}

/// A table in memory, its snapshots computed from its changes.
#[derive(Default)]
struct MemoryTable {
    versions: Mutex<Vec<Version>>,
    snapshots_read: AtomicUsize,
    failing: std::sync::atomic::AtomicBool,
}

fn data_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
    ]))
}

fn change_batch(version: u64, committed_ms: i64, rows: &[(i64, &str, &str)]) -> ChangeBatch {
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("_change_type", DataType::Utf8, false),
        Field::new("_commit_version", DataType::Int64, false),
        Field::new(
            "_commit_timestamp",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
    ]);
    let n = rows.len();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.2))),
        Arc::new(Int64Array::from(vec![version as i64; n])),
        Arc::new(
            TimestampMicrosecondArray::from(vec![committed_ms * 1000; n]).with_timezone("UTC"),
        ),
    ];
    ChangeBatch {
        batch: RecordBatch::try_new(Arc::new(schema), columns).unwrap(),
        end: Position::at_version(version + 1),
    }
}

impl MemoryTable {
    fn commit(&self, committed_ms: i64, changes: Vec<(i64, &'static str, &'static str)>) {
        self.versions.lock().unwrap().push(Version {
            committed_ms,
            changes,
        });
    }

    fn fail(&self, failing: bool) {
        self.failing.store(failing, Ordering::Relaxed);
    }

    fn check(&self) -> Result<(), SourceError> {
        if self.failing.load(Ordering::Relaxed) {
            return Err(SourceError::TableNotFound {
                table: "owners".into(),
            });
        }
        Ok(())
    }
}

impl TableReader for MemoryTable {
    fn table(&self) -> &str {
        "owners"
    }

    fn latest_version(&self) -> Result<u64, SourceError> {
        self.check()?;
        Ok(self.versions.lock().unwrap().len() as u64 - 1)
    }

    fn version_info(&self, version: u64) -> Result<VersionInfo, SourceError> {
        self.check()?;
        Ok(VersionInfo {
            schema: data_schema(),
            committed_ms: self.versions.lock().unwrap()[version as usize].committed_ms,
        })
    }

    fn version_at_or_before(&self, timestamp_ms: i64) -> Result<Option<u64>, SourceError> {
        self.check()?;
        let versions = self.versions.lock().unwrap();
        Ok((0..versions.len() as u64)
            .rev()
            .find(|&v| versions[v as usize].committed_ms <= timestamp_ms))
    }

    fn snapshot(&self, version: u64) -> Result<ChangeBatches, SourceError> {
        self.check()?;
        self.snapshots_read.fetch_add(1, Ordering::Relaxed);
        let versions = self.versions.lock().unwrap();
        // Rows as the table holds them, two of one key included.
        let mut rows: Vec<(i64, &'static str, &'static str)> = Vec::new();
        for v in &versions[..=version as usize] {
            for &(id, name, kind) in &v.changes {
                match kind {
                    "insert" | "update_postimage" => rows.push((id, name, "insert")),
                    _ => rows.retain(|row| row.0 != id),
                }
            }
        }
        rows.sort_by_key(|row| row.0);
        let committed = versions[version as usize].committed_ms;
        // In two parts, as a snapshot of many files comes.
        let half = rows.len() / 2;
        let parts = vec![
            Ok(change_batch(version, committed, &rows[..half])),
            Ok(change_batch(version, committed, &rows[half..])),
        ];
        Ok(Box::new(parts.into_iter()))
    }

    fn changes(&self, from: u64, to: u64) -> Result<ChangeBatches, SourceError> {
        self.check()?;
        let versions = self.versions.lock().unwrap();
        let batches: Vec<_> = (from..=to)
            .filter(|&v| !versions[v as usize].changes.is_empty())
            .map(|v| {
                let version = &versions[v as usize];
                Ok(change_batch(v, version.committed_ms, &version.changes))
            })
            .collect();
        Ok(Box::new(batches.into_iter()))
    }
}

fn spec() -> LookupSpec {
    LookupSpec {
        table: "owners".into(),
        key: vec!["id".into()],
        columns: vec!["name".into()],
    }
}

/// Owners 1 and 2 at 1 s; owner 1 renamed at 2 s; owner 2 deleted at 3 s.
fn owners() -> Arc<MemoryTable> {
    let table = Arc::new(MemoryTable::default());
    table.commit(1000, vec![(1, "Ada", "insert"), (2, "Bo", "insert")]);
    table.commit(
        2000,
        vec![
            (1, "Ada", "update_preimage"),
            (1, "Ada L.", "update_postimage"),
        ],
    );
    table.commit(3000, vec![(2, "Bo", "delete")]);
    table
}

fn names(table: &LookupTable, version: Option<u64>) -> Vec<Option<String>> {
    let keys: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), Some(2), Some(3), None]));
    let (found, rows) = table.get(&[keys], version).unwrap();
    let names = rows.column(0).as_string::<i32>();
    let names: Vec<_> = names.iter().map(|n| n.map(str::to_string)).collect();
    assert_eq!(found, names.iter().map(Option::is_some).collect::<Vec<_>>());
    names
}

const WAIT: Duration = Duration::from_millis(300);

#[test]
fn a_batch_reads_the_table_as_of_its_commit_and_an_older_one_rebuilds_the_store() {
    let reader = owners();
    let table =
        LookupTable::open(spec(), reader.clone(), Box::new(MemoryVersions::default())).unwrap();
    assert_eq!(table.through(), 2);
    assert_eq!(reader.snapshots_read.load(Ordering::Relaxed), 1);
    let s = |n: &str| Some(n.to_string());
    let at = |ms: i64| {
        table
            .read_version(Consistency::AsOf, ms * 1000, WAIT)
            .unwrap()
    };
    // Built from version 2's snapshot: a batch of 3.5 s reads it.
    assert_eq!(at(3500), Some(2));
    assert_eq!(names(&table, Some(2)), [s("Ada L."), None, None, None]);
    // A batch committed at 2.5 s reads version 1, from a store rebuilt from 1's snapshot.
    assert_eq!(at(2500), Some(1));
    assert_eq!(reader.snapshots_read.load(Ordering::Relaxed), 2);
    assert_eq!(names(&table, Some(1)), [s("Ada L."), s("Bo"), None, None]);
    // The rebuilt store still answers for the versions after it.
    assert_eq!(at(3000), Some(2));
    assert_eq!(names(&table, Some(2)), [s("Ada L."), None, None, None]);
    // Before the table's first commit there is no row for any key.
    assert_eq!(at(999), None);
    assert_eq!(names(&table, None), [None, None, None, None]);
    // A new version is read when a batch committed after the last look comes.
    reader.commit(now_ms() - 1, vec![(3, "Cy", "insert"), (2, "Bo", "insert")]);
    assert_eq!(at(now_ms()), Some(3));
    assert_eq!(
        names(&table, Some(3)),
        [s("Ada L."), s("Bo"), s("Cy"), None]
    );
    assert_eq!(
        table.read_version(Consistency::Latest, 0, WAIT).unwrap(),
        Some(3)
    );
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn a_store_on_disk_resumes_where_it_left_off_and_is_rebuilt_for_another_shape() {
    let dir = tempfile::tempdir().unwrap();
    let reader = owners();
    let open = |spec: LookupSpec| {
        LookupTable::open(
            spec,
            reader.clone(),
            Box::new(RedbVersions::open(dir.path(), 1 << 20).unwrap()),
        )
        .unwrap()
    };
    drop(open(spec()));
    reader.commit(4000, vec![(4, "Di", "insert")]);
    let table = open(spec());
    // Resumed at version 2 and followed to 3, without reading a snapshot again.
    assert_eq!(reader.snapshots_read.load(Ordering::Relaxed), 1);
    assert_eq!(table.through(), 3);
    let keys: ArrayRef = Arc::new(Int64Array::from(vec![4]));
    assert_eq!(table.get(&[keys], Some(3)).unwrap().0, [true]);
    drop(table);
    let by_name = LookupSpec {
        key: vec!["name".into()],
        columns: vec!["id".into()],
        ..spec()
    };
    let table = open(by_name);
    assert_eq!(reader.snapshots_read.load(Ordering::Relaxed), 2);
    assert_eq!(table.key_schema().field(0).name(), "name");
}

#[test]
fn a_key_with_two_rows_names_the_table_the_key_and_the_version() {
    let reader = owners();
    let table =
        LookupTable::open(spec(), reader.clone(), Box::new(MemoryVersions::default())).unwrap();
    reader.commit(now_ms() - 1, vec![(1, "Another Ada", "insert")]);
    let error = table
        .read_version(Consistency::AsOf, now_ms() * 1000, WAIT)
        .unwrap_err();
    assert!(
        matches!(&error, LookupError::NotUnique { key, version: 3, .. } if key == "(1)"),
        "{error}"
    );
    assert!(error.to_string().contains("lookup table owners"), "{error}");
    let twice = Arc::new(MemoryTable::default());
    twice.commit(1000, vec![(5, "E", "insert"), (5, "F", "insert")]);
    let error = LookupTable::open(spec(), twice, Box::new(MemoryVersions::default()))
        .err()
        .unwrap();
    assert!(
        matches!(error, LookupError::NotUnique { version: 0, .. }),
        "{error}"
    );
}

#[test]
fn a_batch_waits_at_most_max_wait_for_a_table_that_cannot_be_read() {
    let reader = owners();
    let table =
        LookupTable::open(spec(), reader.clone(), Box::new(MemoryVersions::default())).unwrap();
    reader.fail(true);
    let started = Instant::now();
    let error = table
        .read_version(Consistency::AsOf, now_ms() * 1000, WAIT)
        .unwrap_err();
    assert!(started.elapsed() >= WAIT);
    assert!(
        matches!(&error, LookupError::Behind { detail, .. } if detail.contains("owners")),
        "{error}"
    );
    // A batch from the future (a clock ahead of this node's) waits too.
    reader.fail(false);
    let error = table
        .read_version(Consistency::AsOf, (now_ms() + 60_000) * 1000, WAIT)
        .unwrap_err();
    assert!(error.to_string().contains("clock is behind"), "{error}");
    // Once readable, the batch goes on.
    assert_eq!(
        table
            .read_version(Consistency::AsOf, now_ms() * 1000, WAIT)
            .unwrap(),
        Some(2)
    );
}

#[test]
fn a_missing_column_is_named_with_the_columns_there_are() {
    let spec = LookupSpec {
        columns: vec!["segment".into()],
        ..spec()
    };
    let error = LookupTable::open(spec, owners(), Box::new(MemoryVersions::default()))
        .err()
        .unwrap();
    assert_eq!(
        error.to_string(),
        "lookup table owners has no column `segment`; its columns are id, name: fix the lookup's key or columns"
    );
}

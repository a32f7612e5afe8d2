//! One lookup table on the node: its store kept current from the table's snapshot and
//! change feed, and the version a batch reads it at.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use delta_kernel::arrow::array::{Array, ArrayRef, RecordBatch, StringArray};
use delta_kernel::arrow::datatypes::{Schema, SchemaRef};
use serde::Deserialize;
use sluice_source::{ChangeBatch, SourceError};

use crate::codec::{KeyCodec, RowCodec};
use crate::error::LookupError;
use crate::reader::TableReader;
use crate::store::VersionedStore;
use crate::version::{RowChange, VersionChanges};

/// How often the snapshot's progress is logged while it is read.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// How old the last look for new versions may be for a batch under `latest`.
pub const LATEST_STALENESS: Duration = Duration::from_secs(1);

/// Pause between looks for new versions while a batch waits for the table to be read
/// up to its commit time.
const WAIT_PAUSE: Duration = Duration::from_millis(200);

/// Which version of a lookup table a batch reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Consistency {
    /// The newest version committed at or before the batch's own commit (a temporal
    /// join): the same answer on every run and retry.
    #[default]
    AsOf,
    /// The newest version read when the batch is transformed.
    Latest,
}

/// What a lookup keeps of its table.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LookupSpec {
    /// The table's path, URL or catalog name.
    pub table: String,
    /// The key columns.
    pub key: Vec<String>,
    /// The columns kept for each key.
    pub columns: Vec<String>,
}

/// How far following has gone.
struct Follow {
    /// When the last successful look for new versions began.
    polled_from: Option<SystemTime>,
    /// The last version applied.
    through: u64,
}

/// A lookup table kept on the node.
pub struct LookupTable {
    spec: LookupSpec,
    reader: Arc<dyn TableReader>,
    store: Box<dyn VersionedStore>,
    key_schema: SchemaRef,
    keys: KeyCodec,
    rows: RowCodec,
    /// Held while following, so one look for new versions runs at a time.
    follow: Mutex<Follow>,
    /// Read while rows are looked up; written while the store is rebuilt from an
    /// older snapshot, which no reader may see half done.
    rebuild: RwLock<()>,
    through: AtomicU64,
}

impl LookupTable {
    /// Opens the lookup `spec` over `reader`, kept in `store`: resumed where the store
    /// left off when it was built for the same shape, otherwise built from the table's
    /// latest snapshot; then brought up to the latest version.
    pub fn open(
        spec: LookupSpec,
        reader: Arc<dyn TableReader>,
        store: Box<dyn VersionedStore>,
    ) -> Result<LookupTable, LookupError> {
        let unreadable = |source| LookupError::Unreadable {
            table: spec.table.clone(),
            source: Box::new(source),
        };
        let latest = reader.latest_version().map_err(unreadable)?;
        let info = reader.version_info(latest).map_err(unreadable)?;
        let (key_schema, columns_schema) = shape_in(&spec, &info.schema)?;
        let codec_error = |e: delta_kernel::arrow::error::ArrowError| LookupError::Rows {
            table: spec.table.clone(),
            detail: e.to_string(),
        };
        let table = LookupTable {
            keys: KeyCodec::new(&key_schema).map_err(codec_error)?,
            rows: RowCodec::new(&columns_schema).map_err(codec_error)?,
            key_schema,
            spec,
            reader,
            store,
            follow: Mutex::new(Follow {
                polled_from: None,
                through: 0,
            }),
            rebuild: RwLock::new(()),
            through: AtomicU64::new(0),
        };
        let shape = table.shape();
        let mut follow = table.lock_follow();
        match table.store.followed()? {
            Some(followed)
                if followed.shape == shape && followed.through.is_some_and(|t| t <= latest) =>
            {
                let through = followed.through.expect("compared with Some above");
                tracing::info!(
                    table = table.spec.table,
                    version = through,
                    "Lookup table resumed from its store on this node."
                );
                follow.through = through;
            }
            _ => table.build(&mut follow, latest, info.committed_ms * 1000)?,
        }
        table.poll(&mut follow)?;
        drop(follow);
        Ok(table)
    }

    /// What the lookup keeps.
    pub fn spec(&self) -> &LookupSpec {
        &self.spec
    }

    /// The key columns and their types.
    pub fn key_schema(&self) -> &SchemaRef {
        &self.key_schema
    }

    /// The kept columns and their types (all nullable: a key without a row reads as
    /// nulls).
    pub fn columns_schema(&self) -> &SchemaRef {
        self.rows.schema()
    }

    /// Bytes the store keeps, every version counted.
    pub fn bytes(&self) -> u64 {
        self.store.bytes()
    }

    /// The last version followed.
    pub fn through(&self) -> u64 {
        self.through.load(Ordering::Relaxed)
    }

    /// The version a batch committed at `committed_micros` reads under `consistency`;
    /// `None` when the table did not exist yet then (every key finds nothing). Looks
    /// for new versions first when the last look began before the batch's commit (or,
    /// under `latest`, more than [`LATEST_STALENESS`] ago), for up to `max_wait` while
    /// the table cannot be read or the clock is behind the commit's.
    pub fn read_version(
        &self,
        consistency: Consistency,
        committed_micros: i64,
        max_wait: Duration,
    ) -> Result<Option<u64>, LookupError> {
        let wanted = match consistency {
            // Commit times have millisecond precision: a look begun within the
            // commit's millisecond may have missed it.
            Consistency::AsOf => {
                UNIX_EPOCH
                    + Duration::from_micros(committed_micros.max(0) as u64)
                    + Duration::from_millis(1)
            }
            Consistency::Latest => SystemTime::now() - LATEST_STALENESS,
        };
        let started = Instant::now();
        let mut follow = self.lock_follow();
        while follow.polled_from.is_none_or(|polled| polled < wanted) {
            let looked = self.poll(&mut follow);
            if follow.polled_from.is_some_and(|polled| polled >= wanted) {
                break;
            }
            if started.elapsed() >= max_wait {
                return Err(LookupError::Behind {
                    table: self.spec.table.clone(),
                    waited: max_wait,
                    detail: match looked {
                        Err(error) => error.to_string(),
                        Ok(()) => "this node's clock is behind the batch's commit time".into(),
                    },
                });
            }
            match looked {
                Err(error @ LookupError::Unreadable { .. }) => {
                    tracing::warn!(table = self.spec.table, %error, "The lookup table could not be read; trying again.");
                }
                Err(error) => return Err(error),
                Ok(()) => {}
            }
            std::thread::sleep(WAIT_PAUSE.min(max_wait.saturating_sub(started.elapsed())));
        }
        if consistency == Consistency::Latest {
            return Ok(Some(follow.through));
        }
        if let Some(version) = self.store.version_as_of(committed_micros)? {
            return Ok(Some(version));
        }
        self.rebuild_before(&mut follow, committed_micros)
    }

    /// The rows of `keys` (one array per key column, in the key's types) as of
    /// `version` (`None`: before the table existed, nothing found).
    pub fn get(
        &self,
        keys: &[ArrayRef],
        version: Option<u64>,
    ) -> Result<(Vec<bool>, RecordBatch), LookupError> {
        let encoded = self.keys.encode(keys).map_err(|e| self.rows_error(e))?;
        let mut rows = vec![None; encoded.len()];
        if let Some(version) = version {
            let asked: Vec<(usize, &[u8])> = encoded
                .iter()
                .enumerate()
                .filter_map(|(i, key)| key.as_deref().map(|key| (i, key)))
                .collect();
            let slices: Vec<&[u8]> = asked.iter().map(|(_, key)| *key).collect();
            let found = {
                let _reading = self.rebuild.read().unwrap_or_else(PoisonError::into_inner);
                self.store.get(&slices, version)?
            };
            for ((i, _), row) in asked.into_iter().zip(found) {
                rows[i] = row;
            }
        }
        let found = rows.iter().map(Option::is_some).collect();
        let batch = self.rows.decode(&rows).map_err(|e| self.rows_error(e))?;
        Ok((found, batch))
    }

    fn lock_follow(&self) -> MutexGuard<'_, Follow> {
        self.follow.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn rows_error(&self, error: impl std::fmt::Display) -> LookupError {
        LookupError::Rows {
            table: self.spec.table.clone(),
            detail: error.to_string(),
        }
    }

    fn unreadable(&self, source: SourceError) -> LookupError {
        LookupError::Unreadable {
            table: self.spec.table.clone(),
            source: Box::new(source),
        }
    }

    /// What the store is built for: the key and kept columns with their types, and
    /// the release whose row format encoded them.
    fn shape(&self) -> String {
        let fields = |schema: &Schema| {
            schema
                .fields()
                .iter()
                .map(|f| format!("{} {}", f.name(), f.data_type()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "key ({}) columns ({}) sluice {}",
            fields(&self.key_schema),
            fields(self.rows.schema()),
            env!("CARGO_PKG_VERSION")
        )
    }

    /// Looks for new versions and applies them.
    fn poll(&self, follow: &mut Follow) -> Result<(), LookupError> {
        let began = SystemTime::now();
        let latest = self
            .reader
            .latest_version()
            .map_err(|e| self.unreadable(e))?;
        if latest > follow.through {
            self.catch_up(follow, latest)?;
        }
        follow.polled_from = Some(began);
        Ok(())
    }

    /// Rebuilds the store from the snapshot of the last version committed at or before
    /// `micros` (a batch older than the store's base), back up to where it was.
    fn rebuild_before(&self, follow: &mut Follow, micros: i64) -> Result<Option<u64>, LookupError> {
        let Some(base) = self
            .reader
            .version_at_or_before(micros.div_euclid(1000))
            .map_err(|e| self.unreadable(e))?
        else {
            return Ok(None);
        };
        let committed_ms = self
            .reader
            .version_info(base)
            .map_err(|e| self.unreadable(e))?
            .committed_ms;
        let _writing = self.rebuild.write().unwrap_or_else(PoisonError::into_inner);
        tracing::info!(
            table = self.spec.table,
            version = base,
            "A batch reads the lookup table as of a version older than its store holds; rebuilding the store from that version's snapshot."
        );
        let through = follow.through;
        self.build(follow, base, committed_ms * 1000)?;
        self.catch_up(follow, through)?;
        self.store.version_as_of(micros)
    }

    /// Builds the store afresh from the snapshot of `base`.
    fn build(
        &self,
        follow: &mut Follow,
        base: u64,
        committed_micros: i64,
    ) -> Result<(), LookupError> {
        let started = Instant::now();
        self.store.restart(&self.shape(), base, committed_micros)?;
        let mut rows = 0u64;
        let mut logged = Instant::now();
        let batches = self.reader.snapshot(base).map_err(|e| self.unreadable(e))?;
        for batch in batches {
            let batch = batch.map_err(|e| self.unreadable(e))?;
            let mut changes = VersionChanges::default();
            self.record(&batch, base, &mut changes)?;
            self.check_new_keys(&changes, base, base)?;
            self.store.apply(base, None, &changes, false)?;
            rows += batch.batch.num_rows() as u64;
            if logged.elapsed() >= PROGRESS_EVERY {
                logged = Instant::now();
                tracing::info!(
                    table = self.spec.table,
                    version = base,
                    rows,
                    "Reading a lookup table's snapshot."
                );
            }
        }
        self.store
            .apply(base, None, &VersionChanges::default(), true)?;
        follow.through = base;
        self.through.store(base, Ordering::Relaxed);
        tracing::info!(
            table = self.spec.table,
            version = base,
            rows,
            seconds = format!("{:.1}", started.elapsed().as_secs_f64()),
            "Lookup table built from its snapshot."
        );
        Ok(())
    }

    /// Applies the versions after the last one followed through `to`, one by one.
    fn catch_up(&self, follow: &mut Follow, to: u64) -> Result<(), LookupError> {
        let batches = self
            .reader
            .changes(follow.through + 1, to)
            .map_err(|e| self.unreadable(e))?;
        let mut open: Option<(u64, i64, VersionChanges)> = None;
        for batch in batches {
            let batch = batch.map_err(|e| self.unreadable(e))?;
            // An empty batch changes nothing.
            let Some((version, committed)) = batch.commit() else {
                continue;
            };
            if open.as_ref().is_some_and(|(v, ..)| *v != version) {
                let (v, at, changes) = open.take().expect("checked above");
                self.finish_version(follow, v, at, &changes)?;
            }
            let (_, _, changes) =
                open.get_or_insert_with(|| (version, committed, VersionChanges::default()));
            self.record(&batch, version, changes)?;
        }
        if let Some((version, committed, changes)) = open {
            self.finish_version(follow, version, committed, &changes)?;
        }
        if follow.through < to {
            // The versions after the last with changes changed none of its rows.
            self.store
                .apply(to, None, &VersionChanges::default(), true)?;
            follow.through = to;
            self.through.store(to, Ordering::Relaxed);
        }
        Ok(())
    }

    fn finish_version(
        &self,
        follow: &mut Follow,
        version: u64,
        committed_micros: i64,
        changes: &VersionChanges,
    ) -> Result<(), LookupError> {
        self.check_new_keys(changes, follow.through, version)?;
        self.store
            .apply(version, Some(committed_micros), changes, true)?;
        follow.through = version;
        self.through.store(version, Ordering::Relaxed);
        Ok(())
    }

    /// Fails when a key `changes` gives a row already had one as of `before`.
    fn check_new_keys(
        &self,
        changes: &VersionChanges,
        before: u64,
        version: u64,
    ) -> Result<(), LookupError> {
        let keys: Vec<&[u8]> = changes.new_keys().collect();
        // Under the follow lock, which every write to the store holds.
        let live = self.store.get(&keys, before)?;
        match keys.iter().zip(live).find(|(_, row)| row.is_some()) {
            Some((key, _)) => Err(self.not_unique(key, version)),
            None => Ok(()),
        }
    }

    fn not_unique(&self, key: &[u8], version: u64) -> LookupError {
        LookupError::NotUnique {
            table: self.spec.table.clone(),
            key: self.keys.text(key),
            version,
        }
    }

    /// Records a batch's rows of `version` as changes by key into `changes`; rows with
    /// a null key part are left out (no lookup can find them).
    fn record(
        &self,
        batch: &ChangeBatch,
        version: u64,
        changes: &mut VersionChanges,
    ) -> Result<(), LookupError> {
        let columns = |names: &[String]| -> Result<Vec<ArrayRef>, LookupError> {
            names
                .iter()
                .map(|name| {
                    batch.batch.column_by_name(name).cloned().ok_or_else(|| {
                        self.rows_error(format!(
                            "version {version} has no column `{name}`; a lookup's key and columns must stay in the table"
                        ))
                    })
                })
                .collect()
        };
        let keys = self
            .keys
            .encode(&columns(&self.spec.key)?)
            .map_err(|e| self.rows_error(e))?;
        let rows = self
            .rows
            .encode(&columns(&self.spec.columns)?)
            .map_err(|e| self.rows_error(e))?;
        let kinds = batch
            .batch
            .column_by_name("_change_type")
            .and_then(|c| c.as_any().downcast_ref::<StringArray>().cloned())
            .ok_or_else(|| self.rows_error("a change batch without `_change_type`"))?;
        for ((key, row), kind) in keys.into_iter().zip(rows).zip(kinds.iter()) {
            let Some(key) = key else { continue };
            let change = match kind {
                Some("insert" | "update_postimage") => RowChange::Added,
                _ => RowChange::Removed,
            };
            if !changes.record(key.clone(), change, row) {
                return Err(self.not_unique(&key, version));
            }
        }
        Ok(())
    }
}

/// The key and kept columns of `spec` in `schema`, with their types.
fn shape_in(spec: &LookupSpec, schema: &Schema) -> Result<(SchemaRef, SchemaRef), LookupError> {
    let pick = |names: &[String]| -> Result<SchemaRef, LookupError> {
        let fields = names
            .iter()
            .map(|name| {
                schema
                    .field_with_name(name)
                    .cloned()
                    .map_err(|_| LookupError::NoColumn {
                        table: spec.table.clone(),
                        column: name.clone(),
                        columns: schema
                            .fields()
                            .iter()
                            .map(|f| f.name().as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Arc::new(Schema::new(fields)))
    };
    Ok((pick(&spec.key)?, pick(&spec.columns)?))
}

#[cfg(test)]
#[path = "table/tests.rs"]
mod tests;

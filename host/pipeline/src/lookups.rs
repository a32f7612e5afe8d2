//! A pipeline's lookup tables: opened through the node's registry, which shares one
//! follower among the pipelines that name the same table, key and columns, and read by
//! each batch as of the version its commit time names.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use sha2::{Digest, Sha256};
use sluice_engine::{FoundRows, LookupFailed, LookupShape, LookupView, key_kind};
use sluice_lookup::{LookupError, LookupSpec, LookupTable, RedbVersions, TableReader};
use sluice_source::arrow::array::ArrayRef;
use sluice_source::{ChangeBatch, ChangeFeed, SourceOptions};

use crate::config::{LookupSection, PipelineConfig};
use crate::error::PipelineError;

/// The lookup tables open on this node, shared by every pipeline that names one.
pub struct LookupTables {
    root: PathBuf,
    open: Mutex<HashMap<LookupSpec, Weak<LookupTable>>>,
}

impl Default for LookupTables {
    /// Stores under `$HOME/.cache/sluice/lookups` (the working directory without HOME).
    fn default() -> LookupTables {
        let home = std::env::var_os("HOME").map_or_else(PathBuf::new, PathBuf::from);
        LookupTables::new(home.join(".cache/sluice/lookups"))
    }
}

impl LookupTables {
    /// Keeps the tables' stores under `root`, one directory each. They are caches:
    /// deleting one costs reading its table's snapshot again.
    pub fn new(root: PathBuf) -> LookupTables {
        LookupTables {
            root,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// The table `spec` names, followed by this node: the open one, or one opened
    /// now (built from the table's snapshot, or resumed from its store). Blocks.
    fn table(
        &self,
        spec: LookupSpec,
        options: SourceOptions,
        cache_bytes: usize,
    ) -> Result<Arc<LookupTable>, LookupError> {
        // Held while opening, so two pipelines naming one table open it once.
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(table) = open.get(&spec).and_then(Weak::upgrade) {
            return Ok(table);
        }
        let reader: Arc<dyn TableReader> =
            Arc::new(ChangeFeed::open(&spec.table, options).map_err(|source| {
                LookupError::Unreadable {
                    table: spec.table.clone(),
                    source: Box::new(source),
                }
            })?);
        let store = RedbVersions::open(&self.root.join(store_name(&spec)), cache_bytes)?;
        let table = Arc::new(LookupTable::open(spec.clone(), reader, Box::new(store))?);
        open.retain(|_, table| table.strong_count() > 0);
        open.insert(spec, Arc::downgrade(&table));
        Ok(table)
    }
}

/// A store's directory: the table's last path part, for people, and a digest of the
/// whole spec, so two specs never share one.
fn store_name(spec: &LookupSpec) -> String {
    let digest = Sha256::digest(format!("{spec:?}").as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let last = spec
        .table
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or("table");
    let readable: String = last
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("{readable}-{hex}")
}

/// One `[[lookup]]` of a pipeline and the table it reads.
struct Lookup {
    section: LookupSection,
    table: Arc<LookupTable>,
    shape: LookupShape,
}

/// The lookup tables of one pipeline.
pub(crate) struct PipelineLookups {
    pipeline: String,
    lookups: Vec<Lookup>,
}

impl PipelineLookups {
    /// Opens the `[[lookup]]` tables of `config` through `tables`; `None` without any.
    /// Blocks while a table's snapshot is read.
    pub(crate) fn open(
        config: &PipelineConfig,
        tables: &LookupTables,
    ) -> Result<Option<PipelineLookups>, PipelineError> {
        if config.lookups.is_empty() {
            return Ok(None);
        }
        let pipeline = config.pipeline.name.clone();
        let mut lookups = Vec::with_capacity(config.lookups.len());
        for section in &config.lookups {
            let failed = |source| PipelineError::Lookup {
                pipeline: pipeline.clone(),
                lookup: section.name.clone(),
                source,
            };
            let spec = LookupSpec {
                table: section.table.clone(),
                key: section.key.clone(),
                columns: section.columns.clone(),
            };
            let table = tables
                .table(
                    spec,
                    config.lookup_options(),
                    section.cache_mib.saturating_mul(1024 * 1024),
                )
                .map_err(failed)?;
            if let Some(field) = table
                .key_schema()
                .fields()
                .iter()
                .find(|f| key_kind(f.data_type()).is_none())
            {
                return Err(failed(LookupError::Rows {
                    table: section.table.clone(),
                    detail: format!(
                        "key column `{}` is of type {}; a lookup key is made of integer, string and boolean columns",
                        field.name(),
                        field.data_type()
                    ),
                }));
            }
            let shape = LookupShape {
                key: table.key_schema().clone(),
                columns: table.columns_schema().clone(),
            };
            lookups.push(Lookup {
                section: section.clone(),
                table,
                shape,
            });
        }
        Ok(Some(PipelineLookups { pipeline, lookups }))
    }

    /// The tables as `batch` reads them: each as of the version its consistency names
    /// for the batch's commit time. Blocks while a table is read up to it.
    pub(crate) fn for_batch(
        &self,
        batch: &ChangeBatch,
    ) -> Result<Arc<dyn LookupView>, PipelineError> {
        let commit = batch.commit();
        let mut read = Vec::with_capacity(self.lookups.len());
        for lookup in &self.lookups {
            let section = &lookup.section;
            let failed = |source| PipelineError::Lookup {
                pipeline: self.pipeline.clone(),
                lookup: section.name.clone(),
                source,
            };
            let bytes = lookup.table.bytes();
            if bytes > section.max_mib.saturating_mul(1024 * 1024) {
                return Err(failed(LookupError::TooLarge {
                    table: section.table.clone(),
                    bytes,
                    max_mib: section.max_mib,
                }));
            }
            let at = match commit {
                // An empty batch looks nothing up.
                None => Some(lookup.table.through()),
                Some((_, committed)) => lookup
                    .table
                    .read_version(section.consistency, committed, section.max_wait)
                    .map_err(failed)?,
            };
            read.push(at);
        }
        tracing::trace!(pipeline = self.pipeline, batch = ?commit, versions = ?read, "Lookup tables read for a batch.");
        Ok(Arc::new(BatchLookups {
            lookups: self
                .lookups
                .iter()
                .zip(read)
                .map(|(lookup, at)| ReadAt {
                    name: lookup.section.name.clone(),
                    table: lookup.table.clone(),
                    shape: lookup.shape.clone(),
                    at,
                })
                .collect(),
        }))
    }
}

/// A lookup table as one batch reads it.
struct ReadAt {
    name: String,
    table: Arc<LookupTable>,
    shape: LookupShape,
    /// The version read; `None` before the table existed.
    at: Option<u64>,
}

/// The lookup tables one batch reads, each at its version.
struct BatchLookups {
    lookups: Vec<ReadAt>,
}

impl BatchLookups {
    fn named(&self, table: &str) -> Option<&ReadAt> {
        self.lookups.iter().find(|read| read.name == table)
    }
}

impl LookupView for BatchLookups {
    fn names(&self) -> Vec<String> {
        self.lookups.iter().map(|read| read.name.clone()).collect()
    }

    fn shape(&self, table: &str) -> Option<LookupShape> {
        self.named(table).map(|read| read.shape.clone())
    }

    fn get(&self, table: &str, keys: &[ArrayRef]) -> Result<FoundRows, LookupFailed> {
        let Some(read) = self.named(table) else {
            return Err(LookupFailed {
                table: table.to_string(),
                message: "no lookup by that name".to_string(),
            });
        };
        let (found, rows) = read.table.get(keys, read.at).map_err(|e| LookupFailed {
            table: table.to_string(),
            message: e.to_string(),
        })?;
        Ok(FoundRows { found, rows })
    }
}

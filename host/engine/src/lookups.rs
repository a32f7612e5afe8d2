//! Lookup tables as a module sees them during one batch (contract 1.3): each table's
//! shape and its rows by key, as of the version the batch reads. A leaf: the `lookup`
//! host calls use it, and the pipeline implements [`LookupView`] over its tables.

use std::sync::Arc;

use delta_kernel::arrow::array::{ArrayRef, RecordBatch};
use delta_kernel::arrow::datatypes::{DataType, SchemaRef};

use crate::keyed::StateScope;

/// A lookup table's shape: its key columns and the columns it keeps.
#[derive(Clone, Debug)]
pub struct LookupShape {
    /// The key columns, in the lookup's `key` order, with their types.
    pub key: SchemaRef,
    /// The kept columns, in the lookup's `columns` order, with their types.
    pub columns: SchemaRef,
}

/// The rows found for some keys: one entry per key asked for.
#[derive(Clone, Debug)]
pub struct FoundRows {
    /// Per key: whether the table has a row with it.
    pub found: Vec<bool>,
    /// The kept columns, one row per key; null where nothing was found.
    pub rows: RecordBatch,
}

/// Why a lookup table could not be read during a batch: the store failed, not the
/// module. The pipeline stops instead of failing rows for it.
#[derive(Debug, thiserror::Error)]
#[error("lookup table {table} could not be read: {message}")]
pub struct LookupFailed {
    /// The lookup's name.
    pub table: String,
    /// What failed.
    pub message: String,
}

/// The lookup tables one batch reads, each as of the version the batch sees.
pub trait LookupView: Send + Sync {
    /// The lookups' names, for messages about one that does not exist.
    fn names(&self) -> Vec<String>;
    /// The shape of the lookup `table`, if there is one by that name.
    fn shape(&self, table: &str) -> Option<LookupShape>;
    /// The rows of `table` with `keys`: one array per key column, of the key's types,
    /// all of one length. A key with a null part finds nothing.
    fn get(&self, table: &str, keys: &[ArrayRef]) -> Result<FoundRows, LookupFailed>;
}

/// What a batch is transformed with besides its rows.
#[derive(Clone, Default)]
pub struct BatchContext {
    /// The keyed state, for a pipeline that keeps it.
    pub state: Option<StateScope>,
    /// The lookup tables as of the batch, for a pipeline that names some.
    pub lookups: Option<Arc<dyn LookupView>>,
}

/// How many keys a module looked up during a batch, and how many found a row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LookupAccess {
    /// Keys asked for (`get`) or joined (`join`, one per row).
    pub keys: u64,
    /// Of those, the ones that found a row.
    pub found: u64,
}

impl LookupAccess {
    /// Adds `found` rows of `rows` keys.
    pub(crate) fn add(&mut self, found: &[bool]) {
        self.keys += found.len() as u64;
        self.found += found.iter().filter(|&&f| f).count() as u64;
    }
}

/// The kinds of column a key may have: integers of any width, strings, booleans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// Integers of any width.
    Integer,
    /// Strings.
    Text,
    /// Booleans.
    Boolean,
}

/// The kind of key a column of type `ty` can be, if any.
pub fn key_kind(ty: &DataType) -> Option<KeyKind> {
    match ty {
        t if t.is_integer() => Some(KeyKind::Integer),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Some(KeyKind::Text),
        DataType::Boolean => Some(KeyKind::Boolean),
        _ => None,
    }
}

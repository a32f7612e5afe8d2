//! A batch of change rows: decoded lazily, so a transform that only uses the host
//! helpers never pays for decoding.

use std::cell::OnceCell;
use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow_schema::Field;
use sluice_model::helpers::{CHANGE_COLUMNS, CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION};
use sluice_model::{ChangeType, Column, JsonObject, LeafColumn, Value, leaf_columns};

use crate::Predicate;
use crate::abi::Handle;
use crate::decode::with_change_columns;
use crate::error::{Error, helpers_error};

/// A batch of change rows from one Delta table, in commit order.
pub struct Batch {
    source: Source,
    len: usize,
    decoded: OnceCell<Decoded>,
}

enum Source {
    Native(RecordBatch),
    Guest(Handle),
}

/// The batch as Arrow with its columns indexed by name.
struct Decoded {
    arrow: RecordBatch,
    leaves: HashMap<String, LeafColumn>,
    change_types: Vec<ChangeType>,
    // Read on first use: most transforms never look at them.
    versions: OnceCell<Vec<i64>>,
    timestamps: OnceCell<Vec<i64>>,
}

impl Decoded {
    /// `change_types` of every row, when the caller has them already (a module asks
    /// the host, which knows them natively); otherwise parsed from `_change_type`.
    fn new(arrow: RecordBatch, change_types: Option<Vec<ChangeType>>) -> Result<Decoded, Error> {
        let change_types = match change_types {
            Some(change_types) => change_types,
            None => sluice_model::helpers::change_types(&arrow).map_err(helpers_error)?,
        };
        let leaves = leaf_columns(&arrow, &CHANGE_COLUMNS)
            .into_iter()
            .map(|leaf| (leaf.name.clone(), leaf))
            .collect();
        Ok(Decoded {
            arrow,
            leaves,
            change_types,
            versions: OnceCell::new(),
            timestamps: OnceCell::new(),
        })
    }

    /// `_commit_version` of every row.
    fn commit_versions(&self) -> &[i64] {
        self.integers(&self.versions, COMMIT_VERSION)
    }

    /// `_commit_timestamp` of every row, in microseconds.
    fn commit_timestamps(&self) -> &[i64] {
        self.integers(&self.timestamps, COMMIT_TIMESTAMP)
    }

    /// The integers of a change column, 0 where it is null or missing.
    fn integers<'a>(&self, cell: &'a OnceCell<Vec<i64>>, name: &str) -> &'a [i64] {
        cell.get_or_init(|| {
            let Ok(column) = Column::find(&self.arrow, name) else {
                return vec![0; self.arrow.num_rows()];
            };
            (0..self.arrow.num_rows())
                .map(|row| match column.value(row) {
                    Value::Int(v) | Value::Timestamp(v) | Value::TimestampNtz(v) => v,
                    _ => 0,
                })
                .collect()
        })
    }
}

impl Batch {
    /// A batch of Arrow change rows: data columns plus `_change_type`,
    /// `_commit_version` and `_commit_timestamp`.
    pub fn from_arrow(arrow: RecordBatch) -> Batch {
        Batch {
            len: arrow.num_rows(),
            source: Source::Native(arrow),
            decoded: OnceCell::new(),
        }
    }

    pub(crate) fn from_guest(handle: Handle) -> Batch {
        Batch {
            len: handle.num_rows(),
            source: Source::Guest(handle),
            decoded: OnceCell::new(),
        }
    }

    pub(crate) fn guest(&self) -> Option<&Handle> {
        match &self.source {
            Source::Guest(handle) => Some(handle),
            Source::Native(_) => None,
        }
    }

    fn decoded(&self) -> Result<&Decoded, Error> {
        if let Some(decoded) = self.decoded.get() {
            return Ok(decoded);
        }
        let decoded = match &self.source {
            Source::Native(arrow) => Decoded::new(arrow.clone(), None)?,
            Source::Guest(handle) => Decoded::new(handle.read()?, Some(handle.change_types()))?,
        };
        Ok(self.decoded.get_or_init(|| decoded))
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch has no rows.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The batch as Arrow, change columns included.
    pub fn arrow(&self) -> Result<&RecordBatch, Error> {
        Ok(&self.decoded()?.arrow)
    }

    /// A data column by name, struct fields by dotted path (`fullDocument.owner_id`),
    /// ready to read row by row: the fast way to touch many rows.
    pub fn column(&self, name: &str) -> Result<Column<'_>, Error> {
        let decoded = self.decoded()?;
        match decoded.leaves.get(name) {
            Some(leaf) => Ok(leaf.reader()),
            None => Column::find(&decoded.arrow, name).map_err(|e| Error::Batch(e.to_string())),
        }
    }

    /// One row by index.
    pub fn row(&self, index: usize) -> Result<Row<'_>, Error> {
        if index >= self.len {
            return Err(Error::Batch(format!(
                "Row {index} is out of range: the batch has {} rows.",
                self.len
            )));
        }
        Ok(Row {
            decoded: self.decoded()?,
            index,
        })
    }

    /// Every row, in order.
    pub fn rows(&self) -> Result<impl Iterator<Item = Row<'_>>, Error> {
        let decoded = self.decoded()?;
        Ok((0..self.len).map(move |index| Row { decoded, index }))
    }

    /// The rows (of `within`, or all) whose change type is one of `types`, in order.
    /// In a module the host selects them without decoding the batch.
    pub fn select_change_types(
        &self,
        types: &[ChangeType],
        within: Option<&[u32]>,
    ) -> Result<Vec<u32>, Error> {
        match &self.source {
            Source::Guest(handle) => Ok(handle.select_change_types(types, within)),
            Source::Native(arrow) => {
                sluice_model::helpers::select_change_types(arrow, types, within)
                    .map_err(helpers_error)
            }
        }
    }

    /// The rows (of `within`, or all) where `predicate` holds, in order; null never
    /// matches a comparison. In a module the host selects them.
    pub fn select_where(
        &self,
        predicate: &Predicate,
        within: Option<&[u32]>,
    ) -> Result<Vec<u32>, Error> {
        match &self.source {
            Source::Guest(handle) => handle.select_where(predicate, within),
            Source::Native(arrow) => {
                sluice_model::helpers::select_where(arrow, predicate, within).map_err(helpers_error)
            }
        }
    }

    pub(crate) fn native(&self) -> Option<&RecordBatch> {
        match &self.source {
            Source::Native(arrow) => Some(arrow),
            Source::Guest(_) => None,
        }
    }
}

/// One row of a [`Batch`].
#[derive(Clone, Copy)]
pub struct Row<'a> {
    decoded: &'a Decoded,
    index: usize,
}

impl<'a> Row<'a> {
    /// Index of the row within its batch.
    pub fn index(&self) -> u32 {
        self.index as u32
    }

    /// What happened to the row.
    pub fn change_type(&self) -> ChangeType {
        self.decoded.change_types[self.index]
    }

    /// The Delta version that made the change.
    pub fn commit_version(&self) -> i64 {
        self.decoded.commit_versions()[self.index]
    }

    /// When the change was committed: microseconds since 1970-01-01T00:00:00Z.
    pub fn commit_timestamp_micros(&self) -> i64 {
        self.decoded.commit_timestamps()[self.index]
    }

    /// The value of a column; an error names the row if the column does not exist.
    pub fn get(&self, column: &str) -> Result<Value<'a>, Error> {
        let reader = match self.decoded.leaves.get(column) {
            Some(leaf) => leaf.reader(),
            None => Column::find(&self.decoded.arrow, column)
                .map_err(|e| Error::row(self.index(), e.to_string()))?,
        };
        Ok(reader.value(self.index))
    }

    /// A string column's value; an error if the column is missing or not a string.
    pub fn str(&self, column: &str) -> Result<Option<&'a str>, Error> {
        match self.get(column)? {
            Value::Null => Ok(None),
            Value::Str(s) => Ok(Some(s)),
            other => Err(self.type_error(column, "string", &other)),
        }
    }

    /// An integer column's value; an error if the column is missing or not an integer.
    pub fn int(&self, column: &str) -> Result<Option<i64>, Error> {
        match self.get(column)? {
            Value::Null => Ok(None),
            Value::Int(i) => Ok(Some(i)),
            other => Err(self.type_error(column, "integer", &other)),
        }
    }

    /// Every data column (structs nested) and the change columns as one JSON object,
    /// nulls left out: the shape of Spark's `to_json(struct(*))` over a change row.
    pub fn to_json(&self) -> String {
        let arrow = &self.decoded.arrow;
        let mut json = JsonObject::new();
        for (field, array) in arrow.schema_ref().fields().iter().zip(arrow.columns()) {
            if !CHANGE_COLUMNS.contains(&field.name().as_str()) {
                json.push(field.name(), &Column::new(array.as_ref()).value(self.index));
            }
        }
        json.field(CHANGE_TYPE, Value::Str(self.change_type().as_str()))
            .field(COMMIT_VERSION, Value::Int(self.commit_version()))
            .field(
                COMMIT_TIMESTAMP,
                Value::Timestamp(self.commit_timestamp_micros()),
            )
            .finish()
    }

    fn type_error(&self, column: &str, wanted: &str, found: &Value<'_>) -> Error {
        Error::row(
            self.index(),
            format!("Column `{column}` is not a {wanted}: found {found:?}."),
        )
    }
}

/// Builds a [`Batch`] by hand, for unit tests of transforms on the native target.
#[derive(Default)]
pub struct BatchBuilder {
    fields: Vec<Field>,
    columns: Vec<ArrayRef>,
    change_types: Vec<&'static str>,
    versions: Vec<i64>,
    timestamps: Vec<i64>,
}

impl BatchBuilder {
    /// An empty builder.
    pub fn new() -> BatchBuilder {
        BatchBuilder::default()
    }

    /// Adds a data column; a dotted name stands for a struct field.
    pub fn column(mut self, name: &str, array: ArrayRef) -> BatchBuilder {
        self.fields
            .push(Field::new(name, array.data_type().clone(), true));
        self.columns.push(array);
        self
    }

    /// Adds a string column.
    pub fn strings(self, name: &str, values: &[Option<&str>]) -> BatchBuilder {
        self.column(name, Arc::new(StringArray::from(values.to_vec())))
    }

    /// Adds a long column.
    pub fn longs(self, name: &str, values: &[Option<i64>]) -> BatchBuilder {
        self.column(name, Arc::new(Int64Array::from(values.to_vec())))
    }

    /// Adds a timestamp column (microseconds since 1970-01-01T00:00:00Z).
    pub fn timestamps(self, name: &str, micros: &[Option<i64>]) -> BatchBuilder {
        let array = TimestampMicrosecondArray::from(micros.to_vec()).with_timezone("UTC");
        self.column(name, Arc::new(array))
    }

    /// Adds the change columns of one row.
    pub fn change(
        mut self,
        change: ChangeType,
        version: i64,
        timestamp_micros: i64,
    ) -> BatchBuilder {
        self.change_types.push(change.as_str());
        self.versions.push(version);
        self.timestamps.push(timestamp_micros);
        self
    }

    /// The batch; one row per [`BatchBuilder::change`] call. Panics if a column's
    /// length differs from the number of rows.
    pub fn build(self) -> Batch {
        let arrow = with_change_columns(
            self.fields,
            self.columns,
            self.change_types,
            self.versions,
            self.timestamps,
        );
        match arrow {
            Ok(arrow) => Batch::from_arrow(arrow),
            Err(e) => panic!("{e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_columns_are_read_on_first_use() {
        let batch = BatchBuilder::new()
            .change(ChangeType::Insert, 1, 10)
            .change(ChangeType::UpdatePostimage, 2, 20)
            .change(ChangeType::Delete, 3, 30)
            .build();
        let rows: Vec<_> = batch.rows().unwrap().collect();
        let decoded = batch.decoded().unwrap();
        assert!(decoded.versions.get().is_none() && decoded.timestamps.get().is_none());
        assert_eq!(rows[1].change_type(), ChangeType::UpdatePostimage);
        assert_eq!(
            (rows[2].commit_version(), rows[2].commit_timestamp_micros()),
            (3, 30)
        );
    }
}

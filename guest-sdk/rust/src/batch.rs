//! A batch of change rows and typed access to its values.

use std::collections::HashMap;

use crate::bindings::sluice::transform::types as wit;
use crate::json::JsonObject;
use crate::output::Error;

pub use wit::ColumnValues;

/// What happened to a row, as Delta's `_change_type` column says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChangeType {
    /// A new row.
    Insert,
    /// The row as it was before an update.
    UpdatePreimage,
    /// The row as it is after an update.
    UpdatePostimage,
    /// A removed row, with its last values.
    Delete,
}

impl ChangeType {
    /// The name Delta uses in `_change_type`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeType::Insert => "insert",
            ChangeType::UpdatePreimage => "update_preimage",
            ChangeType::UpdatePostimage => "update_postimage",
            ChangeType::Delete => "delete",
        }
    }

    /// Parses a Delta `_change_type` name.
    pub fn parse(name: &str) -> Option<ChangeType> {
        match name.trim() {
            "insert" => Some(ChangeType::Insert),
            "update_preimage" => Some(ChangeType::UpdatePreimage),
            "update_postimage" => Some(ChangeType::UpdatePostimage),
            "delete" => Some(ChangeType::Delete),
            _ => None,
        }
    }

    fn from_wit(change: wit::ChangeType) -> ChangeType {
        match change {
            wit::ChangeType::Insert => ChangeType::Insert,
            wit::ChangeType::UpdatePreimage => ChangeType::UpdatePreimage,
            wit::ChangeType::UpdatePostimage => ChangeType::UpdatePostimage,
            wit::ChangeType::Delete => ChangeType::Delete,
        }
    }
}

/// One value of a row, borrowed from its batch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    /// SQL null.
    Null,
    /// A boolean.
    Boolean(bool),
    /// Any integer column (byte, short, integer, long).
    Int(i64),
    /// A float or double column.
    Float(f64),
    /// A string column.
    Str(&'a str),
    /// A binary column.
    Bytes(&'a [u8]),
    /// A date: days since 1970-01-01.
    Date(i32),
    /// A timestamp: microseconds since 1970-01-01T00:00:00Z.
    Timestamp(i64),
    /// A timestamp without time zone: microseconds since 1970-01-01T00:00:00.
    TimestampNtz(i64),
    /// A decimal, exactly as text.
    Decimal(&'a str),
    /// Any other type, as text rendered by the host.
    Text(&'a str),
}

/// A batch of change rows from one Delta table, in commit order.
pub struct Batch {
    raw: wit::ChangeBatch,
    by_name: HashMap<String, usize>,
}

impl Batch {
    pub(crate) fn from_wit(raw: wit::ChangeBatch) -> Batch {
        let by_name = raw
            .columns
            .iter()
            .enumerate()
            .map(|(index, column)| (column.name.clone(), index))
            .collect();
        Batch { raw, by_name }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.raw.num_rows as usize
    }

    /// Whether the batch has no rows.
    pub fn is_empty(&self) -> bool {
        self.raw.num_rows == 0
    }

    /// The data column names, struct fields as dotted paths.
    pub fn column_names(&self) -> impl Iterator<Item = &str> {
        self.raw.columns.iter().map(|c| c.name.as_str())
    }

    /// A column's values by name.
    pub fn column(&self, name: &str) -> Option<&ColumnValues> {
        self.by_name.get(name).map(|&i| &self.raw.columns[i].values)
    }

    /// One row by index.
    pub fn row(&self, index: usize) -> Row<'_> {
        assert!(index < self.len(), "row {index} is out of range");
        Row { batch: self, index }
    }

    /// Every row, in order.
    pub fn rows(&self) -> impl Iterator<Item = Row<'_>> {
        (0..self.len()).map(|index| Row { batch: self, index })
    }
}

/// One row of a [`Batch`].
#[derive(Clone, Copy)]
pub struct Row<'a> {
    batch: &'a Batch,
    index: usize,
}

impl<'a> Row<'a> {
    /// Index of the row within its batch.
    pub fn index(&self) -> u32 {
        self.index as u32
    }

    /// What happened to the row.
    pub fn change_type(&self) -> ChangeType {
        ChangeType::from_wit(self.batch.raw.change_types[self.index])
    }

    /// The Delta version that made the change.
    pub fn commit_version(&self) -> i64 {
        self.batch.raw.commit_versions[self.index]
    }

    /// When the change was committed: microseconds since 1970-01-01T00:00:00Z.
    pub fn commit_timestamp_micros(&self) -> i64 {
        self.batch.raw.commit_timestamps[self.index]
    }

    /// The value of a column; an error names the row if the column does not exist.
    pub fn get(&self, column: &str) -> Result<Value<'a>, Error> {
        let values = self.batch.column(column).ok_or_else(|| {
            Error::row(
                self.index(),
                format!("The batch has no column named `{column}`."),
            )
        })?;
        Ok(value_at(values, self.index))
    }

    /// A string column's value; an error if the column is missing or not a string.
    pub fn str(&self, column: &str) -> Result<Option<&'a str>, Error> {
        match self.get(column)? {
            Value::Null => Ok(None),
            Value::Str(s) => Ok(Some(s)),
            other => Err(self.type_error(column, "string", other)),
        }
    }

    /// An integer column's value; an error if the column is missing or not an integer.
    pub fn int(&self, column: &str) -> Result<Option<i64>, Error> {
        match self.get(column)? {
            Value::Null => Ok(None),
            Value::Int(i) => Ok(Some(i)),
            other => Err(self.type_error(column, "integer", other)),
        }
    }

    /// Every data column and the change columns as one JSON object, nulls left out
    /// (the shape of Spark's `to_json(struct(*))` over a change feed row).
    pub fn to_json(&self) -> String {
        let mut json = JsonObject::new();
        for (column, values) in self.batch.raw.columns.iter().map(|c| (&c.name, &c.values)) {
            json = json.field(column, value_at(values, self.index));
        }
        json.field("_change_type", Value::Str(self.change_type().as_str()))
            .field("_commit_version", Value::Int(self.commit_version()))
            .field(
                "_commit_timestamp",
                Value::Timestamp(self.commit_timestamp_micros()),
            )
            .finish()
    }

    fn type_error(&self, column: &str, wanted: &str, found: Value<'_>) -> Error {
        Error::row(
            self.index(),
            format!("Column `{column}` is not a {wanted}: found {found:?}."),
        )
    }
}

fn value_at(values: &ColumnValues, row: usize) -> Value<'_> {
    fn pick<T: Copy>(
        v: &[Option<T>],
        row: usize,
        f: impl Fn(T) -> Value<'static>,
    ) -> Value<'static> {
        v[row].map_or(Value::Null, f)
    }
    match values {
        ColumnValues::Boolean(v) => pick(v, row, Value::Boolean),
        ColumnValues::Int32(v) => pick(v, row, |i| Value::Int(i64::from(i))),
        ColumnValues::Int64(v) => pick(v, row, Value::Int),
        ColumnValues::Float32(v) => pick(v, row, |f| Value::Float(f64::from(f))),
        ColumnValues::Float64(v) => pick(v, row, Value::Float),
        ColumnValues::Date(v) => pick(v, row, Value::Date),
        ColumnValues::Timestamp(v) => pick(v, row, Value::Timestamp),
        ColumnValues::TimestampNtz(v) => pick(v, row, Value::TimestampNtz),
        ColumnValues::Utf8(v) => v[row].as_deref().map_or(Value::Null, Value::Str),
        ColumnValues::Decimal(v) => v[row].as_deref().map_or(Value::Null, Value::Decimal),
        ColumnValues::Text(v) => v[row].as_deref().map_or(Value::Null, Value::Text),
        ColumnValues::Binary(v) => v[row].as_deref().map_or(Value::Null, Value::Bytes),
    }
}

/// Builds a [`Batch`] by hand, for unit tests of transforms on the native target.
#[derive(Default)]
pub struct BatchBuilder {
    columns: Vec<wit::Column>,
    change_types: Vec<wit::ChangeType>,
    commit_versions: Vec<i64>,
    commit_timestamps: Vec<i64>,
}

impl BatchBuilder {
    /// An empty builder.
    pub fn new() -> BatchBuilder {
        BatchBuilder::default()
    }

    /// Adds a data column.
    pub fn column(mut self, name: &str, values: ColumnValues) -> BatchBuilder {
        self.columns.push(wit::Column {
            name: name.to_string(),
            values,
        });
        self
    }

    /// Adds the change columns of one row.
    pub fn change(
        mut self,
        change: ChangeType,
        version: i64,
        timestamp_micros: i64,
    ) -> BatchBuilder {
        self.change_types.push(match change {
            ChangeType::Insert => wit::ChangeType::Insert,
            ChangeType::UpdatePreimage => wit::ChangeType::UpdatePreimage,
            ChangeType::UpdatePostimage => wit::ChangeType::UpdatePostimage,
            ChangeType::Delete => wit::ChangeType::Delete,
        });
        self.commit_versions.push(version);
        self.commit_timestamps.push(timestamp_micros);
        self
    }

    /// The batch; one row per [`BatchBuilder::change`] call.
    pub fn build(self) -> Batch {
        Batch::from_wit(wit::ChangeBatch {
            num_rows: self.change_types.len() as u32,
            columns: self.columns,
            change_types: self.change_types,
            commit_versions: self.commit_versions,
            commit_timestamps: self.commit_timestamps,
        })
    }
}

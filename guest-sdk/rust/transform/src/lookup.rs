//! Lookup tables (contract 1.3): rows of other Delta tables by key, as of the version
//! the batch reads (each `[[lookup]]` of the pipeline, by its `name`).
//!
//! [`get`] looks many keys up in one host call; [`Batch::join`] adds a lookup's
//! columns to the batch, so the rest of the transform (and `emit-encoded`) reads them
//! as the batch's own.
//!
//! Natively (unit tests) the tables are in memory per thread: [`set_table`] supplies
//! one, [`clear`] forgets them all.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch, make_array};
use arrow_data::transform::MutableArrayData;
use arrow_schema::{Field, Schema};
use sluice_model::helpers::{CHANGE_TYPE, Scalar};
use sluice_model::{Column, Value};

use crate::abi;
use crate::batch::Batch;
use crate::error::Error;

/// A lookup table in memory, for unit tests.
struct NativeTable {
    key: Vec<String>,
    rows: RecordBatch,
}

thread_local! {
    static NATIVE: RefCell<HashMap<String, NativeTable>> = RefCell::new(HashMap::new());
}

fn on_host() -> bool {
    cfg!(target_arch = "wasm32")
}

/// Natively: makes `rows` the lookup `name`, keyed by its columns `key`; its other
/// columns are the lookup's `columns`.
pub fn set_table(name: &str, key: &[&str], rows: RecordBatch) {
    let table = NativeTable {
        key: key.iter().map(|k| k.to_string()).collect(),
        rows,
    };
    NATIVE.with(|tables| tables.borrow_mut().insert(name.to_string(), table));
}

/// Natively: forgets every table [`set_table`] supplied.
pub fn clear() {
    NATIVE.with(|tables| tables.borrow_mut().clear());
}

/// The rows found for some keys.
#[derive(Clone, Debug)]
pub struct Found {
    /// Per key: whether the table has a row with it.
    pub found: Vec<bool>,
    /// The lookup's columns, one row per key; null where nothing was found.
    pub rows: RecordBatch,
}

/// The rows of lookup `table` with `keys`, each key its key columns' values in the
/// lookup's `key` order: one host call for all of them.
pub fn get(table: &str, keys: &[Vec<Scalar>]) -> Result<Found, Error> {
    if on_host() {
        let (found, rows) = abi::lookup_get(table, keys)?;
        return Ok(Found { found, rows });
    }
    NATIVE.with(|tables| {
        let tables = tables.borrow();
        let native = native_table(&tables, table)?;
        let index = native.index()?;
        let at: Vec<Option<usize>> = keys
            .iter()
            .map(|key| index.get(&scalar_key(key)).copied())
            .collect();
        Ok(Found {
            found: at.iter().map(Option::is_some).collect(),
            rows: native.take(&at, &[], None)?.1,
        })
    })
}

/// How [`Batch::join`] adds a lookup's columns to a batch.
#[derive(Clone, Debug)]
pub struct Join {
    table: String,
    key: Vec<String>,
    columns: Vec<String>,
    prefix: Option<String>,
}

impl Join {
    /// Joins lookup `table` on the batch columns `key` (dotted paths for struct
    /// fields), in the lookup's `key` order; adds all its columns.
    pub fn new(table: &str, key: &[&str]) -> Join {
        Join {
            table: table.to_string(),
            key: key.iter().map(|k| k.to_string()).collect(),
            columns: Vec::new(),
            prefix: None,
        }
    }

    /// Adds only these of the lookup's columns.
    pub fn columns(mut self, columns: &[&str]) -> Join {
        self.columns = columns.iter().map(|c| c.to_string()).collect();
        self
    }

    /// Names each added column `prefix` + its lookup name (`owner_` makes `owner_name`).
    pub fn prefix(mut self, prefix: &str) -> Join {
        self.prefix = Some(prefix.to_string());
        self
    }
}

impl Batch {
    /// The batch with a lookup's columns added before the change columns: each row gets
    /// the row its key finds, nulls when there is none or a key part is null. On the
    /// host the batch itself is widened (its host helpers see the columns too); read it
    /// through the returned batch.
    pub fn join(&self, join: &Join) -> Result<Batch, Error> {
        if let Some(handle) = self.guest() {
            handle.join(
                &join.table,
                &join.key,
                &join.columns,
                join.prefix.as_deref(),
            )?;
            return Ok(Batch::from_guest(handle.again()));
        }
        let arrow = self.arrow()?;
        let keys = join
            .key
            .iter()
            .map(|name| self.column(name))
            .collect::<Result<Vec<Column<'_>>, Error>>()?;
        NATIVE.with(|tables| {
            let tables = tables.borrow();
            let native = native_table(&tables, &join.table)?;
            let index = native.index()?;
            let at: Vec<Option<usize>> = (0..self.len())
                .map(|row| {
                    let key: Vec<Value<'_>> = keys.iter().map(|c| c.value(row)).collect();
                    if key.iter().any(|v| matches!(v, Value::Null)) {
                        return None;
                    }
                    index.get(&format!("{key:?}")).copied()
                })
                .collect();
            let (fields, rows) = native.take(&at, &join.columns, join.prefix.as_deref())?;
            let mut schema_fields: Vec<Arc<Field>> = arrow.schema().fields().to_vec();
            let mut columns = arrow.columns().to_vec();
            let at = arrow
                .schema()
                .index_of(CHANGE_TYPE)
                .unwrap_or(columns.len());
            for (offset, (field, column)) in fields.into_iter().zip(rows.columns()).enumerate() {
                if arrow.schema().field_with_name(field.name()).is_ok() {
                    return Err(Error::Batch(format!(
                        "The batch already has a column `{}`; give the join a prefix.",
                        field.name()
                    )));
                }
                schema_fields.insert(at + offset, field);
                columns.insert(at + offset, column.clone());
            }
            let widened = RecordBatch::try_new(Arc::new(Schema::new(schema_fields)), columns)
                .map_err(|e| Error::Batch(format!("Cannot add the lookup's columns: {e}.")))?;
            Ok(Batch::from_arrow(widened))
        })
    }
}

fn native_table<'a>(
    tables: &'a HashMap<String, NativeTable>,
    name: &str,
) -> Result<&'a NativeTable, Error> {
    tables.get(name).ok_or_else(|| {
        Error::Batch(format!(
            "There is no lookup named `{name}`; natively, supply it with lookup::set_table."
        ))
    })
}

/// A key of scalars as the native index names it: the same text a batch's values of
/// that key give.
fn scalar_key(key: &[Scalar]) -> String {
    let values: Vec<Value<'_>> = key
        .iter()
        .map(|part| match part {
            Scalar::Null => Value::Null,
            Scalar::Boolean(b) => Value::Boolean(*b),
            Scalar::Integer(i) => Value::Int(*i),
            Scalar::Float(f) => Value::Float(*f),
            Scalar::Text(s) => Value::Str(s.as_str()),
        })
        .collect();
    format!("{values:?}")
}

impl NativeTable {
    /// Each row's index by its key's text.
    fn index(&self) -> Result<HashMap<String, usize>, Error> {
        let keys = self
            .key
            .iter()
            .map(|name| Column::find(&self.rows, name).map_err(|e| Error::Batch(e.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((0..self.rows.num_rows())
            .map(|row| {
                let key: Vec<Value<'_>> = keys.iter().map(|c| c.value(row)).collect();
                (format!("{key:?}"), row)
            })
            .collect())
    }

    /// The kept columns (`only` of them when given), named with `prefix`, one row per
    /// entry of `at`: the table's row there, or nulls.
    fn take(
        &self,
        at: &[Option<usize>],
        only: &[String],
        prefix: Option<&str>,
    ) -> Result<(Vec<Arc<Field>>, RecordBatch), Error> {
        let schema = self.rows.schema();
        let mut fields = Vec::new();
        let mut columns: Vec<ArrayRef> = Vec::new();
        for (field, column) in schema.fields().iter().zip(self.rows.columns()) {
            if self.key.contains(field.name()) || (!only.is_empty() && !only.contains(field.name()))
            {
                continue;
            }
            let data = column.to_data();
            let mut taken = MutableArrayData::new(vec![&data], true, at.len());
            let overflow = |e| Error::Batch(format!("Cannot build the looked-up rows: {e}."));
            for row in at {
                match row {
                    Some(row) => taken.try_extend(0, *row, row + 1).map_err(overflow)?,
                    None => taken.try_extend_nulls(1).map_err(overflow)?,
                }
            }
            let name = format!("{}{}", prefix.unwrap_or(""), field.name());
            fields.push(Arc::new(Field::new(name, field.data_type().clone(), true)));
            columns.push(make_array(taken.freeze()));
        }
        if let Some(missing) = only.iter().find(|c| schema.field_with_name(c).is_err()) {
            return Err(Error::Batch(format!(
                "The lookup has no column `{missing}`."
            )));
        }
        let rows = RecordBatch::try_new_with_options(
            Arc::new(Schema::new(fields.clone())),
            columns,
            &arrow_array::RecordBatchOptions::new().with_row_count(Some(at.len())),
        )
        .map_err(|e| Error::Batch(format!("Cannot build the looked-up rows: {e}.")))?;
        Ok((fields, rows))
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::cast::AsArray;

    use super::*;
    use crate::BatchBuilder;
    use crate::ChangeType;

    fn owners() -> RecordBatch {
        let batch = BatchBuilder::new()
            .strings("owner_id", &[Some("o1"), Some("o2")])
            .strings("name", &[Some("Ada"), Some("Bo")])
            .change(ChangeType::Insert, 0, 0)
            .change(ChangeType::Insert, 0, 0)
            .build();
        // Without its change columns, as a lookup's rows are.
        batch.arrow().unwrap().project(&[0, 1]).unwrap()
    }

    #[test]
    fn a_join_adds_the_found_rows_columns_before_the_change_columns() {
        set_table("owners", &["owner_id"], owners());
        let batch = BatchBuilder::new()
            .strings("deal", &[Some("d1"), Some("d2"), Some("d3")])
            .strings("owner", &[Some("o2"), None, Some("o9")])
            .change(ChangeType::Insert, 1, 0)
            .change(ChangeType::Insert, 1, 0)
            .change(ChangeType::Insert, 1, 0)
            .build();
        let joined = batch
            .join(&Join::new("owners", &["owner"]).prefix("owner_"))
            .unwrap();
        let names: Vec<_> = (0..3)
            .map(|row| {
                joined
                    .column("owner_name")
                    .unwrap()
                    .str(row)
                    .map(str::to_string)
            })
            .collect();
        assert_eq!(names, [Some("Bo".to_string()), None, None]);
        let schema = joined.arrow().unwrap().schema();
        assert_eq!(schema.field(2).name(), "owner_name");
        assert_eq!(schema.field(3).name(), CHANGE_TYPE);
        let found = get(
            "owners",
            &[
                vec![Scalar::Text("o1".into())],
                vec![Scalar::Text("nobody".into())],
            ],
        )
        .unwrap();
        assert_eq!(found.found, [true, false]);
        let names = found.rows.column(0).as_string::<i32>();
        assert_eq!(names.iter().collect::<Vec<_>>(), [Some("Ada"), None]);
        let clash = batch.join(&Join::new("owners", &["owner"]).columns(&["name"]));
        assert!(clash.is_ok());
        let error = joined
            .join(&Join::new("owners", &["owner"]).prefix("owner_"))
            .err()
            .unwrap();
        assert!(
            error
                .to_string()
                .contains("already has a column `owner_name`"),
            "{error}"
        );
        clear();
        assert!(get("owners", &[]).is_err());
    }
}

//! The fields an encode spec names, each as an Arrow array over the whole batch with
//! its nullability, so every format reads them the same way.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{
    Array, ArrayRef, BooleanArray, Float64Array, Int64Array, NullArray, RecordBatch, StringArray,
    make_array,
};
use arrow_buffer::NullBuffer;
use sluice_model::helpers::{
    CHANGE_COLUMNS, CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION, FieldValue, HelperError, Scalar,
};
use sluice_model::{Column, spark_substring};

/// One named field of every row of a batch.
#[derive(Clone, Debug)]
pub(crate) struct SourceField {
    /// The field's name in the record.
    pub name: String,
    /// Whether it may be null (from the table's schema, not from this batch's values).
    pub nullable: bool,
    /// Its values, nulls of enclosing structs folded in.
    pub array: ArrayRef,
}

/// Every data column of the batch under its own name, nested types kept.
pub(crate) fn whole_row(batch: &RecordBatch) -> Vec<SourceField> {
    batch
        .schema_ref()
        .fields()
        .iter()
        .zip(batch.columns())
        .filter(|(field, _)| !CHANGE_COLUMNS.contains(&field.name().as_str()))
        .map(|(field, array)| SourceField {
            name: field.name().clone(),
            nullable: field.is_nullable(),
            array: array.clone(),
        })
        .collect()
}

/// The fields of a struct array, under their own names.
pub(crate) fn struct_fields(array: &ArrayRef) -> Vec<SourceField> {
    let structs = array.as_struct();
    structs
        .fields()
        .iter()
        .zip(structs.columns())
        .map(|(field, child)| SourceField {
            name: field.name().clone(),
            nullable: field.is_nullable(),
            array: child.clone(),
        })
        .collect()
}

/// The item indexes of a list array's `row` in its values.
pub(crate) fn list_range(array: &ArrayRef, row: usize) -> std::ops::Range<usize> {
    match array.data_type() {
        arrow_schema::DataType::LargeList(_) => {
            let offsets = array.as_list::<i64>().value_offsets();
            offsets[row] as usize..offsets[row + 1] as usize
        }
        _ => {
            let offsets = array.as_list::<i32>().value_offsets();
            offsets[row] as usize..offsets[row + 1] as usize
        }
    }
}

/// The field `value` names, under `name`.
pub(crate) fn resolve(
    batch: &RecordBatch,
    name: &str,
    value: &FieldValue,
) -> Result<SourceField, HelperError> {
    let (array, nullable) = match value {
        FieldValue::Column(column) => column_array(batch, column)?,
        FieldValue::Substring { column, pos, len } => {
            let (array, nullable) = column_array(batch, column)?;
            let values = Column::new(array.as_ref());
            if !values.is_string() {
                return Err(HelperError(format!(
                    "substring needs a string column and `{column}` is not one."
                )));
            }
            let cut: StringArray = (0..array.len())
                .map(|row| {
                    values
                        .str(row)
                        .map(|s| spark_substring(s, *pos as usize, *len as usize))
                })
                .collect();
            (Arc::new(cut) as ArrayRef, nullable)
        }
        FieldValue::Constant(scalar) => constant(scalar, batch.num_rows()),
        FieldValue::ChangeType => column_array(batch, CHANGE_TYPE)?,
        FieldValue::CommitVersion => column_array(batch, COMMIT_VERSION)?,
        FieldValue::CommitTimestamp => column_array(batch, COMMIT_TIMESTAMP)?,
    };
    Ok(SourceField {
        name: name.to_string(),
        nullable,
        array,
    })
}

/// A top-level column, or a struct field by its dotted path with the nulls of the
/// structs around it; nullable when any of them is.
fn column_array(batch: &RecordBatch, name: &str) -> Result<(ArrayRef, bool), HelperError> {
    let missing = || HelperError(format!("The batch has no column named `{name}`."));
    let schema = batch.schema_ref();
    if let Ok(index) = schema.index_of(name) {
        return Ok((
            batch.column(index).clone(),
            schema.field(index).is_nullable(),
        ));
    }
    let mut parts = name.split('.');
    let first = parts.next().ok_or_else(missing)?;
    let index = schema.index_of(first).map_err(|_| missing())?;
    let mut array = batch.column(index).clone();
    let mut nullable = schema.field(index).is_nullable();
    let mut nulls = array.logical_nulls();
    for part in parts {
        let structs = array.as_struct_opt().ok_or_else(missing)?;
        let (position, field) = structs.fields().find(part).ok_or_else(missing)?;
        nullable |= field.is_nullable();
        array = structs.column(position).clone();
        nulls = NullBuffer::union(nulls.as_ref(), array.logical_nulls().as_ref());
    }
    let data = array
        .to_data()
        .into_builder()
        .nulls(nulls)
        .build()
        .map_err(|e| HelperError(format!("Column `{name}` could not be read: {e}.")))?;
    Ok((make_array(data), nullable))
}

/// A constant repeated for every row; only a null constant is nullable.
fn constant(scalar: &Scalar, rows: usize) -> (ArrayRef, bool) {
    match scalar {
        Scalar::Null => (Arc::new(NullArray::new(rows)), true),
        Scalar::Boolean(b) => (Arc::new(BooleanArray::from(vec![*b; rows])), false),
        Scalar::Integer(i) => (Arc::new(Int64Array::from(vec![*i; rows])), false),
        Scalar::Float(f) => (Arc::new(Float64Array::from(vec![*f; rows])), false),
        Scalar::Text(s) => (
            Arc::new(StringArray::from_iter_values(std::iter::repeat_n(s, rows))),
            false,
        ),
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::StructArray;
    use arrow_schema::{DataType, Field, Fields, Schema};

    use super::*;

    #[test]
    fn struct_fields_take_the_nulls_of_their_parents() {
        let inner = Fields::from(vec![Field::new("stage", DataType::Utf8, false)]);
        let doc = StructArray::new(
            inner.clone(),
            vec![Arc::new(StringArray::from(vec!["won", "lost"])) as ArrayRef],
            Some(NullBuffer::from(vec![true, false])),
        );
        let schema = Schema::new(vec![Field::new("doc", DataType::Struct(inner), true)]);
        let batch = RecordBatch::try_new(Arc::new(schema), vec![Arc::new(doc)]).unwrap();
        let field = resolve(&batch, "s", &FieldValue::Column("doc.stage".into())).unwrap();
        assert!(field.nullable, "a nullable parent makes the field nullable");
        assert!(field.array.is_valid(0));
        assert!(field.array.is_null(1));
        let missing = resolve(&batch, "s", &FieldValue::Column("doc.nope".into()));
        assert_eq!(
            missing.unwrap_err().0,
            "The batch has no column named `doc.nope`."
        );
    }

    #[test]
    fn substrings_and_constants_cover_every_row() {
        let schema = Schema::new(vec![Field::new("id", DataType::Utf8, true)]);
        let ids = StringArray::from(vec![Some("ObjectId('abc')"), None]);
        let batch = RecordBatch::try_new(Arc::new(schema), vec![Arc::new(ids)]).unwrap();
        let cut = FieldValue::Substring {
            column: "id".into(),
            pos: 11,
            len: 3,
        };
        let field = resolve(&batch, "cut", &cut).unwrap();
        assert_eq!(field.array.as_string::<i32>().value(0), "abc");
        assert!(field.array.is_null(1));
        let text = resolve(&batch, "c", &FieldValue::Constant(Scalar::Text("x".into()))).unwrap();
        assert!(!text.nullable);
        assert_eq!(text.array.len(), 2);
    }
}

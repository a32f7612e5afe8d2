//! Turns an Arrow batch of change rows into the contract's columnar batch.

use delta_kernel::arrow::array::{
    Array, ArrayRef, AsArray, StructArray, TimestampMicrosecondArray,
};
use delta_kernel::arrow::buffer::NullBuffer;
use delta_kernel::arrow::compute::cast;
use delta_kernel::arrow::datatypes::{
    DataType, Date32Type, Float32Type, Float64Type, Int32Type, Int64Type, TimeUnit,
};
use delta_kernel::arrow::record_batch::RecordBatch;
use delta_kernel::arrow::util::display::{ArrayFormatter, FormatOptions};

use crate::contract::v0_1::sluice::transform::types as wit;

/// Name of the change type column in a change feed batch.
pub const CHANGE_TYPE: &str = "_change_type";
/// Name of the commit version column in a change feed batch.
pub const COMMIT_VERSION: &str = "_commit_version";
/// Name of the commit timestamp column in a change feed batch.
pub const COMMIT_TIMESTAMP: &str = "_commit_timestamp";

/// Converts a change feed batch; data columns keep their order, structs are flattened.
pub fn change_batch(batch: &RecordBatch) -> Result<wit::ChangeBatch, String> {
    let num_rows = batch.num_rows();
    let mut columns = Vec::new();
    let schema = batch.schema();
    for (field, array) in schema.fields().iter().zip(batch.columns()) {
        if matches!(
            field.name().as_str(),
            CHANGE_TYPE | COMMIT_VERSION | COMMIT_TIMESTAMP
        ) {
            continue;
        }
        flatten(field.name(), array, None, &mut columns)?;
    }
    Ok(wit::ChangeBatch {
        num_rows: u32::try_from(num_rows)
            .map_err(|_| format!("{num_rows} rows is too many for one batch"))?,
        columns,
        change_types: change_types(batch)?,
        commit_versions: commit_versions(batch)?,
        commit_timestamps: commit_timestamps(batch)?,
    })
}

fn required<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a ArrayRef, String> {
    batch
        .column_by_name(name)
        .ok_or_else(|| format!("the batch has no `{name}` column"))
}

fn change_types(batch: &RecordBatch) -> Result<Vec<wit::ChangeType>, String> {
    let column = cast(required(batch, CHANGE_TYPE)?, &DataType::Utf8).map_err(|e| e.to_string())?;
    column
        .as_string::<i32>()
        .iter()
        .map(|value| match value {
            Some("insert") => Ok(wit::ChangeType::Insert),
            Some("update_preimage") => Ok(wit::ChangeType::UpdatePreimage),
            Some("update_postimage") => Ok(wit::ChangeType::UpdatePostimage),
            Some("delete") => Ok(wit::ChangeType::Delete),
            other => Err(format!("unknown _change_type {other:?}")),
        })
        .collect()
}

fn commit_versions(batch: &RecordBatch) -> Result<Vec<i64>, String> {
    let column =
        cast(required(batch, COMMIT_VERSION)?, &DataType::Int64).map_err(|e| e.to_string())?;
    Ok(column
        .as_primitive::<Int64Type>()
        .iter()
        .map(|v| v.unwrap_or_default())
        .collect())
}

fn commit_timestamps(batch: &RecordBatch) -> Result<Vec<i64>, String> {
    let column = cast(
        required(batch, COMMIT_TIMESTAMP)?,
        &DataType::Timestamp(TimeUnit::Microsecond, None),
    )
    .map_err(|e| e.to_string())?;
    let column = column
        .as_any()
        .downcast_ref::<TimestampMicrosecondArray>()
        .ok_or("`_commit_timestamp` is not a timestamp")?;
    Ok(column.iter().map(|v| v.unwrap_or_default()).collect())
}

/// Adds `array` (or its leaf fields, for a struct) to `out`; `parent_nulls` are the
/// enclosing structs' nulls, which Arrow does not push down into children.
fn flatten(
    name: &str,
    array: &ArrayRef,
    parent_nulls: Option<&NullBuffer>,
    out: &mut Vec<wit::Column>,
) -> Result<(), String> {
    let nulls = NullBuffer::union(parent_nulls, array.logical_nulls().as_ref());
    if let DataType::Struct(fields) = array.data_type() {
        let structs: &StructArray = array.as_struct();
        for (field, child) in fields.iter().zip(structs.columns()) {
            flatten(
                &format!("{name}.{}", field.name()),
                child,
                nulls.as_ref(),
                out,
            )?;
        }
        return Ok(());
    }
    let values =
        column_values(array, nulls.as_ref()).map_err(|e| format!("column `{name}`: {e}"))?;
    out.push(wit::Column {
        name: name.to_string(),
        values,
    });
    Ok(())
}

fn column_values(
    array: &ArrayRef,
    nulls: Option<&NullBuffer>,
) -> Result<wit::ColumnValues, String> {
    use wit::ColumnValues as V;
    let valid = |i: usize| nulls.is_none_or(|n| n.is_valid(i));
    let len = array.len();
    fn primitive<T, U>(
        array: &ArrayRef,
        len: usize,
        valid: impl Fn(usize) -> bool,
        map: impl Fn(T::Native) -> U,
    ) -> Vec<Option<U>>
    where
        T: delta_kernel::arrow::datatypes::ArrowPrimitiveType,
    {
        let values = array.as_primitive::<T>();
        (0..len)
            .map(|i| valid(i).then(|| map(values.value(i))))
            .collect()
    }
    let to = |ty: DataType| cast(array, &ty).map_err(|e| e.to_string());
    Ok(match array.data_type() {
        DataType::Boolean => {
            let values = array.as_boolean();
            V::Boolean(
                (0..len)
                    .map(|i| valid(i).then(|| values.value(i)))
                    .collect(),
            )
        }
        DataType::Int8 | DataType::Int16 | DataType::Int32 => V::Int32(primitive::<Int32Type, _>(
            &to(DataType::Int32)?,
            len,
            valid,
            |v| v,
        )),
        DataType::Int64 => V::Int64(primitive::<Int64Type, _>(array, len, valid, |v| v)),
        DataType::Float32 => V::Float32(primitive::<Float32Type, _>(array, len, valid, |v| v)),
        DataType::Float64 => V::Float64(primitive::<Float64Type, _>(array, len, valid, |v| v)),
        DataType::Date32 => V::Date(primitive::<Date32Type, _>(array, len, valid, |v| v)),
        DataType::Timestamp(_, zone) => {
            let micros = to(DataType::Timestamp(TimeUnit::Microsecond, None))?;
            let micros = micros
                .as_any()
                .downcast_ref::<TimestampMicrosecondArray>()
                .ok_or("cannot read timestamps")?;
            let values = (0..len)
                .map(|i| valid(i).then(|| micros.value(i)))
                .collect();
            if zone.is_some() {
                V::Timestamp(values)
            } else {
                V::TimestampNtz(values)
            }
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let strings = to(DataType::Utf8)?;
            let strings = strings.as_string::<i32>();
            V::Utf8(
                (0..len)
                    .map(|i| valid(i).then(|| strings.value(i).to_string()))
                    .collect(),
            )
        }
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
            let bytes = to(DataType::Binary)?;
            let bytes = bytes.as_binary::<i32>();
            V::Binary(
                (0..len)
                    .map(|i| valid(i).then(|| bytes.value(i).to_vec()))
                    .collect(),
            )
        }
        DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..) => V::Decimal(formatted(array, len, valid)?),
        _ => V::Text(formatted(array, len, valid)?),
    })
}

fn formatted(
    array: &ArrayRef,
    len: usize,
    valid: impl Fn(usize) -> bool,
) -> Result<Vec<Option<String>>, String> {
    let formatter = ArrayFormatter::try_new(array.as_ref(), &FormatOptions::default())
        .map_err(|e| e.to_string())?;
    Ok((0..len)
        .map(|i| valid(i).then(|| formatter.value(i).to_string()))
        .collect())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use delta_kernel::arrow::array::{Int64Array, StringArray};
    use delta_kernel::arrow::datatypes::{Field, Fields, Schema};

    use super::*;

    fn change_columns(n: usize) -> Vec<(Field, ArrayRef)> {
        vec![
            (
                Field::new(CHANGE_TYPE, DataType::Utf8, false),
                Arc::new(StringArray::from(vec!["insert"; n])) as ArrayRef,
            ),
            (
                Field::new(COMMIT_VERSION, DataType::Int64, false),
                Arc::new(Int64Array::from(vec![3; n])),
            ),
            (
                Field::new(
                    COMMIT_TIMESTAMP,
                    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                    false,
                ),
                Arc::new(TimestampMicrosecondArray::from(vec![7; n]).with_timezone("UTC")),
            ),
        ]
    }

    #[test]
    fn struct_fields_are_flattened_and_inherit_struct_nulls() {
        let inner = Fields::from(vec![Field::new("owner_id", DataType::Utf8, true)]);
        let owner = StructArray::new(
            inner.clone(),
            vec![Arc::new(StringArray::from(vec![Some("a"), Some("b")])) as ArrayRef],
            Some(NullBuffer::from(vec![true, false])),
        );
        let mut columns = vec![(
            Field::new("doc", DataType::Struct(inner), true),
            Arc::new(owner) as ArrayRef,
        )];
        columns.extend(change_columns(2));
        let (fields, arrays): (Vec<_>, Vec<_>) = columns.into_iter().unzip();
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).unwrap();

        let converted = change_batch(&batch).unwrap();

        assert_eq!(converted.num_rows, 2);
        assert_eq!(converted.columns.len(), 1);
        assert_eq!(converted.columns[0].name, "doc.owner_id");
        match &converted.columns[0].values {
            wit::ColumnValues::Utf8(v) => assert_eq!(v, &[Some("a".to_string()), None]),
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(converted.commit_versions, [3, 3]);
        assert_eq!(converted.commit_timestamps, [7, 7]);
    }

    #[test]
    fn a_batch_without_change_columns_is_refused() {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1]))]).unwrap();
        let err = change_batch(&batch).unwrap_err();
        assert!(err.contains(CHANGE_TYPE), "{err}");
    }
}

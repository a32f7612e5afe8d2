//! The batch in the contract's shapes: canonical change columns, typed columns (for
//! version 1's `columns` and version 0.1's batch).

use std::sync::Arc;

use delta_kernel::arrow::array::{Array, ArrayRef, AsArray, TimestampMicrosecondArray};
use delta_kernel::arrow::buffer::NullBuffer;
use delta_kernel::arrow::compute::cast;
use delta_kernel::arrow::datatypes::{
    DataType, Date32Type, Field, Float32Type, Float64Type, Int32Type, Int64Type, Schema, TimeUnit,
};
use delta_kernel::arrow::record_batch::RecordBatch;
use delta_kernel::arrow::util::display::{ArrayFormatter, FormatOptions};
use sluice_model::helpers::{CHANGE_COLUMNS, CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION};
use sluice_model::{LeafColumn, leaf_columns};

use crate::contract::{v0_1, v1::sluice::transform::types as wit};

/// The batch with its change columns in the contract's types: `_change_type` utf8,
/// `_commit_version` int64, `_commit_timestamp` timestamp (microseconds, UTC).
pub fn normalize(batch: &RecordBatch) -> Result<RecordBatch, String> {
    let schema = batch.schema();
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns = Vec::with_capacity(batch.num_columns());
    for name in CHANGE_COLUMNS {
        if batch.column_by_name(name).is_none() {
            return Err(format!("the batch has no `{name}` column"));
        }
    }
    for (field, array) in schema.fields().iter().zip(batch.columns()) {
        let wanted = match field.name().as_str() {
            CHANGE_TYPE => Some(DataType::Utf8),
            COMMIT_VERSION => Some(DataType::Int64),
            COMMIT_TIMESTAMP => Some(DataType::Timestamp(
                TimeUnit::Microsecond,
                Some("UTC".into()),
            )),
            _ => None,
        };
        match wanted {
            Some(ty) if array.data_type() != &ty => {
                columns
                    .push(cast(array, &ty).map_err(|e| format!("column `{}`: {e}", field.name()))?);
                fields.push(Arc::new(Field::new(field.name(), ty, field.is_nullable())));
            }
            _ => {
                columns.push(array.clone());
                fields.push(field.clone());
            }
        }
    }
    // The metadata says whether the batch is part of a snapshot (Debezium's `r` events).
    let schema = Schema::new(fields).with_metadata(schema.metadata().clone());
    RecordBatch::try_new(Arc::new(schema), columns).map_err(|e| e.to_string())
}

/// The batch's data columns (structs flattened, change columns left out).
pub fn data_columns(batch: &RecordBatch) -> Vec<LeafColumn> {
    leaf_columns(batch, &CHANGE_COLUMNS)
}

/// The data `leaves` named (all when `names` is empty) in typed form.
pub fn columns(leaves: &[LeafColumn], names: &[String]) -> Result<Vec<wit::Column>, String> {
    let chosen: Vec<_> = if names.is_empty() {
        leaves.iter().collect()
    } else {
        names
            .iter()
            .map(|name| {
                leaves
                    .iter()
                    .find(|leaf| &leaf.name == name)
                    .ok_or_else(|| format!("The batch has no column named `{name}`."))
            })
            .collect::<Result<_, _>>()?
    };
    chosen
        .into_iter()
        .map(|leaf| {
            let values = column_values(&leaf.array, leaf.nulls.as_ref())
                .map_err(|e| format!("column `{}`: {e}", leaf.name))?;
            Ok(wit::Column {
                name: leaf.name.clone(),
                values,
            })
        })
        .collect()
}

/// `_commit_version` of each row of a normalized batch.
pub fn commit_versions(batch: &RecordBatch) -> Vec<i64> {
    batch
        .column_by_name(COMMIT_VERSION)
        .map(|c| c.as_primitive::<Int64Type>().values().to_vec())
        .unwrap_or_default()
}

/// `_commit_timestamp` of each row of a normalized batch, in microseconds.
pub fn commit_timestamps(batch: &RecordBatch) -> Vec<i64> {
    batch
        .column_by_name(COMMIT_TIMESTAMP)
        .and_then(|c| c.as_any().downcast_ref::<TimestampMicrosecondArray>())
        .map(|c| c.values().to_vec())
        .unwrap_or_default()
}

/// A normalized batch as the skeleton contract's columnar batch.
pub fn change_batch_v0_1(
    batch: &RecordBatch,
) -> Result<v0_1::sluice::transform::types::ChangeBatch, String> {
    use v0_1::sluice::transform::types as old;
    let changes = sluice_model::helpers::change_types(batch).map_err(|e| e.0)?;
    let num_rows = u32::try_from(batch.num_rows())
        .map_err(|_| format!("{} rows is too many for one batch", batch.num_rows()))?;
    Ok(old::ChangeBatch {
        num_rows,
        columns: columns(&data_columns(batch), &[])?
            .into_iter()
            .map(|c| old::Column {
                name: c.name,
                values: match c.values {
                    wit::ColumnValues::Boolean(v) => old::ColumnValues::Boolean(v),
                    wit::ColumnValues::Int32(v) => old::ColumnValues::Int32(v),
                    wit::ColumnValues::Int64(v) => old::ColumnValues::Int64(v),
                    wit::ColumnValues::Float32(v) => old::ColumnValues::Float32(v),
                    wit::ColumnValues::Float64(v) => old::ColumnValues::Float64(v),
                    wit::ColumnValues::Utf8(v) => old::ColumnValues::Utf8(v),
                    wit::ColumnValues::Binary(v) => old::ColumnValues::Binary(v),
                    wit::ColumnValues::Date(v) => old::ColumnValues::Date(v),
                    wit::ColumnValues::Timestamp(v) => old::ColumnValues::Timestamp(v),
                    wit::ColumnValues::TimestampNtz(v) => old::ColumnValues::TimestampNtz(v),
                    wit::ColumnValues::Decimal(v) => old::ColumnValues::Decimal(v),
                    wit::ColumnValues::Text(v) => old::ColumnValues::Text(v),
                },
            })
            .collect(),
        change_types: changes
            .into_iter()
            .map(|c| match c {
                sluice_model::ChangeType::Insert => old::ChangeType::Insert,
                sluice_model::ChangeType::UpdatePreimage => old::ChangeType::UpdatePreimage,
                sluice_model::ChangeType::UpdatePostimage => old::ChangeType::UpdatePostimage,
                sluice_model::ChangeType::Delete => old::ChangeType::Delete,
            })
            .collect(),
        commit_versions: commit_versions(batch),
        commit_timestamps: commit_timestamps(batch),
    })
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

    use delta_kernel::arrow::array::{Int64Array, StringArray, StructArray};
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

        let converted = change_batch_v0_1(&normalize(&batch).unwrap()).unwrap();

        assert_eq!(converted.num_rows, 2);
        assert_eq!(converted.columns.len(), 1);
        assert_eq!(converted.columns[0].name, "doc.owner_id");
        match &converted.columns[0].values {
            v0_1::sluice::transform::types::ColumnValues::Utf8(v) => {
                assert_eq!(v, &[Some("a".to_string()), None])
            }
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
        let err = normalize(&batch).unwrap_err();
        assert!(err.contains(CHANGE_TYPE), "{err}");
    }
}

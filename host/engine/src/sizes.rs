//! What the host would build for a module, estimated from the batch before it is
//! built: results of `columns` and `arrow-ipc`, and the largest record an
//! `emit-encoded` spec can make. Estimates err on the large side.

use std::collections::HashMap;

use delta_kernel::arrow::array::{Array, AsArray};
use delta_kernel::arrow::datatypes::DataType;
use delta_kernel::arrow::record_batch::RecordBatch;
use sluice_model::helpers::CHANGE_COLUMNS;
use sluice_model::{LeafColumn, Record, leaf_columns};

use crate::contract::v1::sluice::transform::types as wit;

/// Most bytes JSON escaping makes of one byte of text (`\u0000`).
const JSON_ESCAPE_FACTOR: usize = 6;

/// Bytes any scalar that is not text takes as text, at most (numbers, dates, times).
const SCALAR_TEXT_BYTES: usize = 48;

/// How much larger text renderings of lists and maps get than their Arrow form (a
/// boolean is a bit in Arrow and `false, ` as text).
const NESTED_TEXT_FACTOR: usize = 64;

/// The bytes of an array's own rows (not of the buffers a slice shares with others);
/// the whole buffers when that cannot be told.
pub(crate) fn slice_bytes(array: &dyn Array) -> usize {
    let data = array.to_data();
    let view_data: usize = match array.data_type() {
        // Views keep their values in buffers the slice size leaves out.
        DataType::Utf8View => array.as_string_view().iter().flatten().map(str::len).sum(),
        DataType::BinaryView => array
            .as_binary_view()
            .iter()
            .flatten()
            .map(<[u8]>::len)
            .sum(),
        _ => 0,
    };
    data.get_slice_memory_size()
        .unwrap_or_else(|_| array.get_array_memory_size())
        + view_data
}

/// The size of a column in the contract's typed form: a slot per row and its values,
/// as text for the types the contract renders.
fn column_result_bytes(leaf: &LeafColumn) -> usize {
    let rows = leaf.array.len();
    let slots = rows * std::mem::size_of::<Option<String>>();
    slots
        + match leaf.array.data_type() {
            DataType::List(_)
            | DataType::LargeList(_)
            | DataType::ListView(_)
            | DataType::FixedSizeList(..)
            | DataType::Map(..)
            | DataType::Union(..) => slice_bytes(&leaf.array) * NESTED_TEXT_FACTOR,
            DataType::Decimal32(..)
            | DataType::Decimal64(..)
            | DataType::Decimal128(..)
            | DataType::Decimal256(..) => rows * SCALAR_TEXT_BYTES,
            _ => slice_bytes(&leaf.array),
        }
}

/// The result `columns(names)` would build: every named data column (all when `names`
/// is empty) once per time it is named. Unknown names count nothing (the call refuses
/// them before building anything).
pub(crate) fn columns_result_bytes(leaves: &[LeafColumn], names: &[String]) -> usize {
    if names.is_empty() {
        return leaves.iter().map(column_result_bytes).sum();
    }
    let by_name: HashMap<&str, &LeafColumn> = leaves
        .iter()
        .map(|leaf| (leaf.name.as_str(), leaf))
        .collect();
    names
        .iter()
        .filter_map(|name| by_name.get(name.as_str()))
        .map(|leaf| column_result_bytes(leaf))
        .sum()
}

/// The widest of the cells between consecutive `offsets`.
fn widest(offsets: impl Iterator<Item = usize>) -> usize {
    let mut previous = None;
    let mut widest = 0;
    for offset in offsets {
        if let Some(previous) = previous {
            widest = widest.max(offset.saturating_sub(previous));
        }
        previous = Some(offset);
    }
    widest
}

/// The largest value of one cell of `array`, as bytes or text: strings and bytes by
/// their widest value, structs by the sum of their fields' widest, lists and maps by
/// their longest entry count times their widest element.
fn largest_cell_bytes(array: &dyn Array) -> usize {
    let offsets32 = |o: &[i32]| widest(o.iter().map(|&o| o as usize));
    let offsets64 = |o: &[i64]| widest(o.iter().map(|&o| o as usize));
    match array.data_type() {
        DataType::Utf8 => offsets32(array.as_string::<i32>().value_offsets()),
        DataType::LargeUtf8 => offsets64(array.as_string::<i64>().value_offsets()),
        DataType::Binary => offsets32(array.as_binary::<i32>().value_offsets()),
        DataType::LargeBinary => offsets64(array.as_binary::<i64>().value_offsets()),
        DataType::Utf8View => array
            .as_string_view()
            .iter()
            .flatten()
            .map(str::len)
            .max()
            .unwrap_or(0),
        DataType::BinaryView => array
            .as_binary_view()
            .iter()
            .flatten()
            .map(<[u8]>::len)
            .max()
            .unwrap_or(0),
        DataType::Struct(fields) => fields
            .iter()
            .zip(array.as_struct().columns())
            .map(|(field, child)| field.name().len() + largest_cell_bytes(child.as_ref()) + 8)
            .sum(),
        DataType::List(_) => {
            let list = array.as_list::<i32>();
            offsets32(list.value_offsets()) * (largest_cell_bytes(list.values().as_ref()) + 8)
        }
        DataType::LargeList(_) => {
            let list = array.as_list::<i64>();
            offsets64(list.value_offsets()) * (largest_cell_bytes(list.values().as_ref()) + 8)
        }
        DataType::FixedSizeList(_, size) => {
            let list = array.as_fixed_size_list();
            *size as usize * (largest_cell_bytes(list.values().as_ref()) + 8)
        }
        DataType::Map(..) => {
            let map = array.as_map();
            offsets32(map.value_offsets())
                * (largest_cell_bytes(map.keys().as_ref())
                    + largest_cell_bytes(map.values().as_ref())
                    + 8)
        }
        DataType::ListView(_) | DataType::LargeListView(_) | DataType::Union(..) => {
            slice_bytes(array) * NESTED_TEXT_FACTOR
        }
        _ => SCALAR_TEXT_BYTES,
    }
}

/// The largest record `spec` can make of `batch`: its frame, key, value (JSON escaping
/// counted at its worst), topic and headers, from the widest cell of every column it
/// names. Computed before encoding, so a spec that could make one record larger than
/// the output cap is refused before the host builds it.
pub(crate) fn largest_encoded_record_bytes(batch: &RecordBatch, spec: &wit::EncodeSpec) -> usize {
    let leaves = leaf_columns(batch, &[]);
    // Only the columns the spec names are measured, each once.
    let mut widest: HashMap<&str, usize> = HashMap::new();
    let mut column = |name: &str| match leaves.iter().find(|leaf| leaf.name == name) {
        Some(leaf) => *widest
            .entry(leaf.name.as_str())
            .or_insert_with(|| largest_cell_bytes(&leaf.array)),
        None => 0,
    };
    let mut cell = |value: &wit::FieldValue| match value {
        wit::FieldValue::Column(name) => column(name),
        wit::FieldValue::Substring(s) => column(&s.column),
        wit::FieldValue::Constant(wit::Scalar::Text(text)) => text.len(),
        wit::FieldValue::Constant(_)
        | wit::FieldValue::ChangeType
        | wit::FieldValue::CommitVersion
        | wit::FieldValue::CommitTimestamp => SCALAR_TEXT_BYTES,
    };
    let json_field = |name: usize, value: usize| (name + value) * JSON_ESCAPE_FACTOR + 8;
    let value: usize = match &spec.value {
        wit::ValueEncoding::Json(fields) => fields
            .iter()
            .map(|f| json_field(f.name.len(), cell(&f.value)))
            .sum(),
        wit::ValueEncoding::JsonRow => batch
            .schema()
            .fields()
            .iter()
            .zip(batch.columns())
            .filter(|(field, _)| !CHANGE_COLUMNS.contains(&field.name().as_str()))
            .map(|(field, array)| {
                json_field(field.name().len(), largest_cell_bytes(array.as_ref()))
            })
            .sum(),
        wit::ValueEncoding::Tombstone => 0,
    };
    let headers: usize = spec
        .headers
        .iter()
        .map(|(name, value)| std::mem::size_of::<(String, Vec<u8>)>() + name.len() + cell(value))
        .sum();
    std::mem::size_of::<Record>()
        + spec.key.as_ref().map_or(0, &mut cell)
        + value
        + spec.topic.as_ref().map_or(0, String::len)
        + headers
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use delta_kernel::arrow::array::{ArrayRef, StringArray};
    use delta_kernel::arrow::datatypes::{Field, Schema};

    use super::*;

    fn batch(values: Vec<&str>) -> RecordBatch {
        let schema = Schema::new(vec![Field::new("id", DataType::Utf8, true)]);
        let column: ArrayRef = Arc::new(StringArray::from(values));
        RecordBatch::try_new(Arc::new(schema), vec![column]).unwrap()
    }

    fn spec(value: wit::ValueEncoding, headers: usize) -> wit::EncodeSpec {
        wit::EncodeSpec {
            rows: vec![0],
            key: Some(wit::FieldValue::Column("id".into())),
            value,
            delete_as_tombstone: false,
            topic: None,
            headers: vec![("h".into(), wit::FieldValue::Column("id".into())); headers],
        }
    }

    #[test]
    fn a_slice_counts_its_own_rows_only() {
        let big = batch(vec!["x"; 1000]);
        let slice = big.slice(0, 10);
        assert!(slice_bytes(slice.column(0).as_ref()) < slice_bytes(big.column(0).as_ref()) / 10);
    }

    #[test]
    fn the_largest_record_grows_with_the_widest_cell_and_every_naming_of_it() {
        let wide = "w".repeat(10_000);
        let batch = batch(vec!["a", &wide, "b"]);
        let one = largest_encoded_record_bytes(&batch, &spec(wit::ValueEncoding::JsonRow, 0));
        assert!(
            one >= 2 * 10_000,
            "key and value each hold the widest cell: {one}"
        );
        let many = largest_encoded_record_bytes(&batch, &spec(wit::ValueEncoding::Tombstone, 100));
        assert!(many >= 100 * 10_000, "{many}");
        let none = largest_encoded_record_bytes(&batch, &spec(wit::ValueEncoding::Tombstone, 0));
        assert!(none < 11_000, "{none}");
    }

    #[test]
    fn a_struct_cell_is_as_wide_as_its_widest_fields_not_its_whole_column() {
        use delta_kernel::arrow::array::StructArray;
        use delta_kernel::arrow::datatypes::Fields;
        let owner = StructArray::new(
            Fields::from(vec![Field::new("owner", DataType::Utf8, true)]),
            vec![Arc::new(StringArray::from(vec!["o123456789"; 10_000])) as ArrayRef],
            None,
        );
        let schema = Schema::new(vec![Field::new("doc", owner.data_type().clone(), true)]);
        let batch =
            RecordBatch::try_new(Arc::new(schema), vec![Arc::new(owner) as ArrayRef]).unwrap();
        let mut row = spec(wit::ValueEncoding::JsonRow, 0);
        row.key = None;
        let largest = largest_encoded_record_bytes(&batch, &row);
        assert!(largest < 1024, "{largest}");
    }

    #[test]
    fn named_columns_count_once_per_naming_and_unknown_names_not_at_all() {
        let batch = batch(vec!["abc"; 100]);
        let leaves = crate::convert::data_columns(&batch);
        let once = columns_result_bytes(&leaves, &["id".to_string()]);
        let twice = columns_result_bytes(&leaves, &["id".to_string(), "id".to_string()]);
        assert_eq!(twice, 2 * once);
        assert_eq!(columns_result_bytes(&leaves, &[]), once);
        assert_eq!(columns_result_bytes(&leaves, &["nope".to_string()]), 0);
    }
}

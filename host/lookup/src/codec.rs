//! Keys and rows as bytes. Arrow's row format encodes any column types and decodes
//! them back to the same Arrow types, so a looked-up row reaches the module typed as in
//! the table. The format may change between Arrow releases: a store records which
//! release of Sluice wrote it and is rebuilt from the table when that differs.

use std::sync::Arc;

use delta_kernel::arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use delta_kernel::arrow::compute::take;
use delta_kernel::arrow::datatypes::{Field, Schema, SchemaRef};
use delta_kernel::arrow::error::ArrowError;
use delta_kernel::arrow::row::{RowConverter, SortField};
use delta_kernel::arrow::util::display::{ArrayFormatter, FormatOptions};

/// Encodes keys of a lookup's key columns.
pub struct KeyCodec {
    converter: RowConverter,
}

impl KeyCodec {
    /// A codec for keys of these columns.
    pub fn new(key: &Schema) -> Result<KeyCodec, ArrowError> {
        Ok(KeyCodec {
            converter: converter(key)?,
        })
    }

    /// Each row's key as bytes (`None` when a part of it is null), from one array per
    /// key column in the key columns' types.
    pub fn encode(&self, columns: &[ArrayRef]) -> Result<Vec<Option<Vec<u8>>>, ArrowError> {
        let rows = self.converter.convert_columns(columns)?;
        Ok((0..rows.num_rows())
            .map(|i| {
                columns
                    .iter()
                    .all(|c| c.is_valid(i))
                    .then(|| rows.row(i).as_ref().to_vec())
            })
            .collect())
    }

    /// An encoded key as text, for messages.
    pub fn text(&self, key: &[u8]) -> String {
        let parser = self.converter.parser();
        match self.converter.convert_rows([parser.parse(key)]) {
            Ok(columns) => key_text(&columns, 0),
            Err(_) => format!("{key:02x?}"),
        }
    }
}

/// A row converter for the columns of `schema`, in its order.
fn converter(schema: &Schema) -> Result<RowConverter, ArrowError> {
    let fields = schema
        .fields()
        .iter()
        .map(|f| SortField::new(f.data_type().clone()))
        .collect();
    RowConverter::new(fields)
}

/// Row `row` of the key columns as text, for messages.
pub fn key_text(columns: &[ArrayRef], row: usize) -> String {
    let options = FormatOptions::default().with_null("null");
    let parts: Vec<String> = columns
        .iter()
        .map(|column| {
            ArrayFormatter::try_new(column.as_ref(), &options)
                .map(|f| f.value(row).to_string())
                .unwrap_or_else(|_| "?".to_string())
        })
        .collect();
    format!("({})", parts.join(", "))
}

/// Encodes the rows of a lookup's kept columns and decodes them back.
pub struct RowCodec {
    schema: SchemaRef,
    converter: RowConverter,
}

impl RowCodec {
    /// A codec for rows of these columns (all nullable on the way out: a key without a
    /// row reads as nulls).
    pub fn new(columns: &Schema) -> Result<RowCodec, ArrowError> {
        let nullable: Vec<Field> = columns
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        Ok(RowCodec {
            schema: Arc::new(Schema::new(nullable)),
            converter: converter(columns)?,
        })
    }

    /// The rows' schema.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Every row of `columns` as bytes.
    pub fn encode(&self, columns: &[ArrayRef]) -> Result<Vec<Vec<u8>>, ArrowError> {
        let rows = self.converter.convert_columns(columns)?;
        Ok(rows.iter().map(|row| row.as_ref().to_vec()).collect())
    }

    /// One row per entry of `rows`: the decoded row, or nulls for `None`.
    pub fn decode(&self, rows: &[Option<Vec<u8>>]) -> Result<RecordBatch, ArrowError> {
        let parser = self.converter.parser();
        let found: Vec<_> = rows
            .iter()
            .flatten()
            .map(|bytes| parser.parse(bytes))
            .collect();
        let decoded = self.converter.convert_rows(found)?;
        let mut next = 0u32;
        let indexes: UInt32Array = rows
            .iter()
            .map(|row| {
                row.as_ref().map(|_| {
                    next += 1;
                    next - 1
                })
            })
            .collect();
        let columns = decoded
            .iter()
            .map(|column| take(column.as_ref(), &indexes, None))
            .collect::<Result<Vec<_>, _>>()?;
        RecordBatch::try_new(self.schema.clone(), columns)
    }
}

#[cfg(test)]
mod tests {
    use delta_kernel::arrow::array::{Array, AsArray, Int64Array, StringArray};
    use delta_kernel::arrow::datatypes::{DataType, Int64Type};

    use super::*;

    #[test]
    fn rows_come_back_typed_with_nulls_for_keys_without_one() {
        let schema = Schema::new(vec![
            Field::new("name", DataType::Utf8, true),
            Field::new("region", DataType::Int64, false),
        ]);
        let codec = RowCodec::new(&schema).unwrap();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![Some("Ada"), None])),
            Arc::new(Int64Array::from(vec![7, 9])),
        ];
        let rows = codec.encode(&columns).unwrap();
        let batch = codec
            .decode(&[Some(rows[1].clone()), None, Some(rows[0].clone())])
            .unwrap();
        let names = batch.column(0).as_string::<i32>();
        assert_eq!(names.iter().collect::<Vec<_>>(), [None, None, Some("Ada")]);
        let regions = batch.column(1).as_primitive::<Int64Type>();
        assert_eq!(regions.iter().collect::<Vec<_>>(), [Some(9), None, Some(7)]);
        assert_eq!(batch.column(1).null_count(), 1);
    }

    #[test]
    fn a_key_with_a_null_part_has_no_bytes_and_keys_differ_by_every_part() {
        let schema = Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("b", DataType::Utf8, true),
        ]);
        let codec = KeyCodec::new(&schema).unwrap();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![Some(1), Some(1), None])),
            Arc::new(StringArray::from(vec![Some("x"), Some("y"), Some("x")])),
        ];
        let keys = codec.encode(&columns).unwrap();
        assert!(keys[0].is_some() && keys[1].is_some());
        assert_ne!(keys[0], keys[1]);
        assert_eq!(keys[2], None);
        assert_eq!(key_text(&columns, 2), "(null, x)");
        assert_eq!(codec.text(keys[1].as_ref().unwrap()), "(1, y)");
    }
}

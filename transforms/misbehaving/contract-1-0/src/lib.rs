//! A transform built against `sluice:transform@1.0.0` (`wit/v1.0/`), kept so every
//! build checks that the host still runs 1.0.0 modules: per row a packed record keyed
//! by `documentId` with the change type as value, then the host helpers' JSON of the
//! same rows.

wit_bindgen::generate!({
    path: "../../../wit/v1.0/transform.wit",
    world: "transform",
});

use exports::sluice::transform::transformer::Guest;
use sluice::transform::host::Batch;
use sluice::transform::types::{
    ColumnValues, EncodeSpec, FieldValue, JsonField, PackedRecords, TransformError, ValueEncoding,
};

/// The fixture's transformer, exported on Wasm targets.
pub struct ContractOneZero;

impl Guest for ContractOneZero {
    fn init(_params: Vec<(String, String)>) -> Result<(), String> {
        Ok(())
    }

    fn transform(batch: &Batch) -> Result<(), TransformError> {
        let columns = batch
            .columns(&["documentId".to_string()])
            .map_err(TransformError::Batch)?;
        let Some(ColumnValues::Utf8(ids)) = columns.into_iter().next().map(|c| c.values) else {
            return Err(TransformError::Batch("documentId is not a string".into()));
        };
        let mut packed = PackedRecords {
            data: Vec::new(),
            source_rows: Vec::new(),
            key_lengths: Vec::new(),
            value_lengths: Vec::new(),
            topics: Vec::new(),
            topic_indexes: Vec::new(),
            partitions: Vec::new(),
            header_names: Vec::new(),
            header_counts: Vec::new(),
            header_name_indexes: Vec::new(),
            header_value_lengths: Vec::new(),
        };
        for (row, (id, change)) in ids.iter().zip(batch.change_types()).enumerate() {
            let id = id.as_deref().unwrap_or_default();
            let value = format!("{change:?}");
            packed.data.extend_from_slice(id.as_bytes());
            packed.data.extend_from_slice(value.as_bytes());
            packed.source_rows.push(row as u32);
            packed.key_lengths.push(id.len() as i32);
            packed.value_lengths.push(value.len() as i32);
        }
        batch.emit_packed(&packed);
        batch
            .emit_encoded(&EncodeSpec {
                rows: (0..batch.num_rows()).collect(),
                key: Some(FieldValue::Column("documentId".into())),
                value: ValueEncoding::Json(vec![JsonField {
                    name: "id".into(),
                    value: FieldValue::Column("documentId".into()),
                }]),
                delete_as_tombstone: true,
                topic: None,
                headers: Vec::new(),
            })
            .map_err(TransformError::Batch)?;
        Ok(())
    }
}

#[cfg(target_arch = "wasm32")]
export!(ContractOneZero);

//! A transform built against `sluice:transform@0.1.0`: one record per row, keyed by
//! `documentId`, the change type as value.

wit_bindgen::generate!({
    path: "../../../wit/v0.1/transform.wit",
    world: "transform",
});

use exports::sluice::transform::transformer::Guest;
use sluice::transform::types::{ChangeBatch, ColumnValues, OutputRecord, TransformError};

/// The fixture's transformer, exported on Wasm targets.
pub struct Legacy;

impl Guest for Legacy {
    fn init(_params: Vec<(String, String)>) -> Result<(), String> {
        Ok(())
    }

    fn transform(batch: ChangeBatch) -> Result<Vec<OutputRecord>, TransformError> {
        let ids = batch
            .columns
            .iter()
            .find(|c| c.name == "documentId")
            .and_then(|c| match &c.values {
                ColumnValues::Utf8(ids) => Some(ids.clone()),
                _ => None,
            })
            .ok_or_else(|| TransformError::Batch("no documentId column".into()))?;
        Ok(ids
            .into_iter()
            .zip(batch.change_types)
            .enumerate()
            .map(|(row, (id, change))| OutputRecord {
                source_row: row as u32,
                topic: None,
                key: id.map(String::into_bytes),
                value: Some(format!("{change:?}").into_bytes()),
                headers: Vec::new(),
            })
            .collect())
    }
}

#[cfg(target_arch = "wasm32")]
export!(Legacy);

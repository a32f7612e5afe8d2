//! Emits every change row as JSON with its change columns, keyless, for inspecting a
//! table's change feed and for tests that compare it with the table's files.
//!
//! Parameter `deletes_topic`: when set, delete rows go to that topic instead of the
//! pipeline's.

use sluice_transform::{Batch, ChangeType, Error, Output, Params, Record, Transform};

/// The pass-through transform.
pub struct Passthrough {
    deletes_topic: Option<String>,
}

impl Transform for Passthrough {
    fn init(params: &Params) -> Result<Self, String> {
        Ok(Passthrough {
            deletes_topic: params.get("deletes_topic").map(str::to_string),
        })
    }

    fn transform(&mut self, batch: &Batch, out: &mut Output) -> Result<(), Error> {
        for row in batch.rows()? {
            let mut record = Record::new().value(row.to_json());
            if let Some(topic) = &self.deletes_topic
                && row.change_type() == ChangeType::Delete
            {
                record = record.topic(topic);
            }
            out.emit(&row, record);
        }
        Ok(())
    }
}

sluice_transform::export!(Passthrough);

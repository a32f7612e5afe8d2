//! {{name}}: a Sluice transform.
//!
//! Emits inserts and update post-images as JSON objects of the row, deletes as
//! tombstones, keyed by the string column the `key` parameter names (keyless when it
//! is not set). Update pre-images are dropped.

use sluice_transform::{Batch, ChangeType, Error, Output, Params, Record, Transform};

/// The transform.
pub struct Changes {
    key: Option<String>,
}

impl Transform for Changes {
    fn init(params: &Params) -> Result<Self, String> {
        Ok(Changes {
            key: params.get("key").map(str::to_string),
        })
    }

    fn transform(&mut self, batch: &Batch, out: &mut Output) -> Result<(), Error> {
        for row in batch.rows()? {
            let mut record = Record::new();
            if let Some(column) = &self.key
                && let Some(key) = row.str(column)?
            {
                record = record.key(key);
            }
            match row.change_type() {
                ChangeType::Insert | ChangeType::UpdatePostimage => {
                    out.emit(&row, record.value(row.to_json()));
                }
                ChangeType::Delete => out.emit(&row, record),
                ChangeType::UpdatePreimage => {}
            }
        }
        Ok(())
    }
}

sluice_transform::export!(Changes);

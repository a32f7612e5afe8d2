// Shared by `blue` and `green`: two modules with different digests whose records
// say which of them made them, for tests that swap modules under load. With
// parameter `count = "true"` they also count the rows seen in keyed state (a
// pipeline with `[state]`) and say the count in header `count`, so a test sees
// whether a swap kept the state or a reset emptied it.

use sluice_transform::{Batch, Error, Output, Params, Record, Transform, state};

/// Emits every change row as JSON, tagged with the module's colour.
pub struct Tagged {
    count: bool,
}

impl Transform for Tagged {
    fn init(params: &Params) -> Result<Self, String> {
        Ok(Tagged {
            count: params.get("count") == Some("true"),
        })
    }

    fn transform(&mut self, batch: &Batch, out: &mut Output) -> Result<(), Error> {
        sluice_transform::log::info(&format!("{TAG} got {} rows", batch.len()));
        for row in batch.rows()? {
            let mut record = Record::new().value(row.to_json()).header("tag", TAG);
            if self.count {
                let count = state::add_i64("rows", 1);
                record = record.header("count", count.to_string());
            }
            out.emit(&row, record);
        }
        Ok(())
    }
}

sluice_transform::export!(Tagged);

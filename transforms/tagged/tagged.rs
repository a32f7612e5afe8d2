// Shared by `blue` and `green`: two modules with different digests whose records
// say which of them made them, for tests that swap modules under load.

use sluice_transform::{Batch, Error, Output, Params, Record, Transform};

/// Emits every change row as JSON, tagged with the module's colour.
pub struct Tagged;

impl Transform for Tagged {
    fn init(_: &Params) -> Result<Self, String> {
        Ok(Tagged)
    }

    fn transform(&mut self, batch: &Batch, out: &mut Output) -> Result<(), Error> {
        sluice_transform::log::info(&format!("{TAG} got {} rows", batch.len()));
        for row in batch.rows()? {
            out.emit(&row, Record::new().value(row.to_json()).header("tag", TAG));
        }
        Ok(())
    }
}

sluice_transform::export!(Tagged);

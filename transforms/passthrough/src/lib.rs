//! Emits every change row as JSON with its change columns, keyless, for inspecting a
//! table's change feed and for tests that compare it with the table's files.

use sluice_transform::{Batch, Error, Output, Params, Record, Transform};

/// The pass-through transform.
pub struct Passthrough;

impl Transform for Passthrough {
    fn init(_params: &Params) -> Result<Self, String> {
        Ok(Passthrough)
    }

    fn transform(&mut self, batch: &Batch, out: &mut Output) -> Result<(), Error> {
        for row in batch.rows() {
            out.emit(&row, Record::new().value(row.to_json()));
        }
        Ok(())
    }
}

sluice_transform::export_transform!(Passthrough);

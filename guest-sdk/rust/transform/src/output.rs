//! Records a transform emits, rows it rejects, and the errors it reports.

use std::collections::HashSet;

use sluice_model::{PackedRecords, Record};

use crate::EncodeSpec;
use crate::batch::{Batch, Row};
use crate::error::{Error, helpers_error};
use crate::framing::Framing;

/// Records packed together, framed by the host when they carry a [`Framing`].
pub(crate) type Run = (PackedRecords, Option<Framing>);

/// The records a transform emits for one batch, in order, and the rows it rejected.
///
/// Records are packed as they are emitted, so a batch's output crosses the Wasm
/// boundary as a few flat lists (one per run of records with the same framing).
#[derive(Default)]
pub struct Output {
    /// Runs emitted before the current one, in order.
    done: Vec<Run>,
    packed: PackedRecords,
    /// The framing of the current run.
    framing: Option<Framing>,
    rejected: Vec<(u32, String)>,
    rejected_rows: HashSet<u32>,
    guest: bool,
}

impl Output {
    pub(crate) fn for_guest() -> Output {
        Output {
            guest: true,
            ..Output::default()
        }
    }

    /// Emits a record made from `row`.
    pub fn emit(&mut self, row: &Row<'_>, record: Record) {
        self.switch(None);
        self.packed.push(&Record {
            source_row: row.index(),
            ..record
        });
    }

    /// Emits a record to the pipeline's topic without headers, from borrowed bytes:
    /// the fastest way to emit (no allocation per record).
    pub fn emit_bytes(&mut self, row: u32, key: Option<&[u8]>, value: Option<&[u8]>) {
        self.switch(None);
        self.packed.push_parts(row, key, value);
    }

    /// Emits a record made from `row` whose key or value the module encoded with its
    /// own schema (`framing`): the host registers the schema in the pipeline's schema
    /// registry, checks that the bytes decode with it and writes Confluent's wire
    /// format header (the schema id, and Protobuf's message indexes) before them.
    /// Needs contract 1.1 and a `[sink.schema_registry]`. Natively (unit tests) the
    /// records keep the module's bytes.
    pub fn emit_framed(&mut self, row: &Row<'_>, framing: &Framing, record: Record) {
        self.switch(Some(framing));
        self.packed.push(&Record {
            source_row: row.index(),
            ..record
        });
    }

    /// Starts a new run when the framing changes, so runs cross the boundary whole.
    fn switch(&mut self, framing: Option<&Framing>) {
        let same = match (&self.framing, framing) {
            (None, None) => true,
            (Some(current), Some(next)) => current.same(next),
            _ => false,
        };
        if !same {
            self.end_run();
            self.framing = framing.cloned();
        }
    }

    fn end_run(&mut self) {
        if !self.packed.is_empty() {
            let packed = std::mem::take(&mut self.packed);
            self.done.push((packed, self.framing.clone()));
        }
    }

    /// Every run emitted so far, in order, leaving the output empty.
    fn take_runs(&mut self) -> Vec<Run> {
        self.end_run();
        std::mem::take(&mut self.done)
    }

    /// Marks `row` as failed with why; the pipeline's error policy decides what
    /// happens to it (stop, skip, or dead-letter), and the other rows carry on. A row
    /// is rejected once: later rejections of it are ignored, as the host does.
    pub fn reject(&mut self, row: &Row<'_>, message: impl Into<String>) {
        self.reject_row(row.index(), message);
    }

    /// [`Output::reject`] by row index.
    pub fn reject_row(&mut self, row: u32, message: impl Into<String>) {
        if self.rejected_rows.insert(row) {
            self.rejected.push((row, message.into()));
        }
    }

    /// Has the host make one record per selected row natively (see
    /// [`EncodeSpec`]); returns how many. Natively the same code runs in-process.
    pub fn encode(&mut self, batch: &Batch, spec: &EncodeSpec) -> Result<u32, Error> {
        match (batch.guest(), batch.native()) {
            (Some(handle), _) => {
                // Keep the records in emission order: what was packed so far goes first.
                for (packed, framing) in self.take_runs() {
                    handle.emit_run(packed, framing);
                }
                handle.emit_encoded(spec)
            }
            (None, Some(arrow)) => {
                self.switch(None);
                sluice_model::helpers::encode(arrow, spec, &mut self.packed).map_err(helpers_error)
            }
            (None, None) => Err(Error::Batch("The batch has no data.".into())),
        }
    }

    /// The records emitted so far, for unit tests. In a module, records handed to the
    /// host by [`Output::encode`] are no longer here.
    pub fn records(&self) -> Vec<Record> {
        debug_assert!(!self.guest, "records() is for native unit tests");
        self.done
            .iter()
            .map(|(packed, _)| packed)
            .chain([&self.packed])
            .flat_map(|packed| {
                packed
                    .clone()
                    .unpack(u32::MAX)
                    .expect("the SDK packs records consistently")
            })
            .collect()
    }

    /// The rows rejected so far, with why.
    pub fn rejected(&self) -> &[(u32, String)] {
        &self.rejected
    }

    pub(crate) fn into_parts(mut self) -> (Vec<Run>, Vec<(u32, String)>) {
        (self.take_runs(), self.rejected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_rejected_once_with_its_first_reason() {
        let mut out = Output::default();
        out.reject_row(3, "first");
        out.reject_row(3, "second");
        out.reject_row(4, "other");
        assert_eq!(
            out.rejected(),
            &[(3, "first".to_string()), (4, "other".to_string())]
        );
    }

    #[test]
    fn records_are_grouped_into_runs_of_one_framing_in_emission_order() {
        let mut builder =
            crate::BatchBuilder::new().strings("id", &[Some("a"), Some("b"), Some("c"), Some("d")]);
        for _ in 0..4 {
            builder = builder.change(crate::ChangeType::Insert, 1, 0);
        }
        let batch = builder.build();
        let rows: Vec<_> = batch.rows().unwrap().collect();
        let deals = Framing::value(crate::OwnSchema::json_schema(r#"{"type":"object"}"#));
        let same_deals = Framing::value(crate::OwnSchema::json_schema(r#"{"type":"object"}"#));
        let keys = Framing::new(Some(crate::OwnSchema::avro(r#""string""#)), None);
        let mut out = Output::default();
        out.emit_bytes(0, None, Some(b"plain"));
        out.emit_framed(&rows[1], &deals, Record::new().value("{}"));
        out.emit_framed(&rows[2], &same_deals, Record::new().value("{}"));
        out.emit_framed(&rows[3], &keys, Record::new().key("\u{2}d"));
        out.emit_bytes(3, None, None);
        let rows_of: Vec<u32> = out.records().iter().map(|r| r.source_row).collect();
        assert_eq!(rows_of, [0, 1, 2, 3, 3]);
        let (runs, _) = out.into_parts();
        let shape: Vec<(usize, Option<Framing>)> = runs
            .into_iter()
            .map(|(packed, framing)| (packed.source_rows.len(), framing))
            .collect();
        assert_eq!(
            shape,
            [(1, None), (2, Some(deals)), (1, Some(keys)), (1, None)]
        );
    }
}

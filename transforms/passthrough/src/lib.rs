//! Emits every change row as JSON with its change columns, keyless, for inspecting a
//! table's change feed and for tests that compare it with the table's files.
//!
//! Parameter `deletes_topic`: when set, delete rows go to that topic instead of the
//! pipeline's. Parameter `json_schema`: when set (a JSON Schema's text), the values are
//! framed with it: the host registers it and writes Confluent's wire format.

use sluice_transform::{
    Batch, ChangeType, Error, Framing, Output, OwnSchema, Params, Record, Transform,
};

/// The pass-through transform.
pub struct Passthrough {
    deletes_topic: Option<String>,
    framing: Option<Framing>,
}

impl Transform for Passthrough {
    fn init(params: &Params) -> Result<Self, String> {
        Ok(Passthrough {
            deletes_topic: params.get("deletes_topic").map(str::to_string),
            framing: params
                .get("json_schema")
                .map(|schema| Framing::value(OwnSchema::json_schema(schema))),
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
            match &self.framing {
                Some(framing) => out.emit_framed(&row, framing, record),
                None => out.emit(&row, record),
            }
        }
        Ok(())
    }
}

sluice_transform::export!(Passthrough);

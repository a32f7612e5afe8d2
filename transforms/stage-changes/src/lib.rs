//! Emits a deal only when its stage changed: a record keyed by the deal with
//! `{"deal": …, "from": …, "to": …}` (no `from` for a deal seen first), and a
//! tombstone when the deal is deleted. Updates and MERGEs that rewrite a deal without
//! moving its stage make no record, which a stateless transform cannot tell.
//!
//! State: `stage/<documentId>` holds each deal's last stage.

use sluice_transform::{
    Batch, ChangeType, Error, JsonObject, Output, Params, Transform, Value, state,
};

/// The transform.
pub struct StageChanges;

impl Transform for StageChanges {
    fn init(_: &Params) -> Result<Self, String> {
        Ok(StageChanges)
    }

    fn transform(&mut self, batch: &Batch, out: &mut Output) -> Result<(), Error> {
        let ids = batch.column("documentId")?;
        let stages = batch.column("fullDocument.stage")?;
        for row in batch.rows()? {
            let index = row.index() as usize;
            let Some(id) = ids.str(index) else {
                return Err(Error::row(row.index(), "The row has no documentId."));
            };
            let key = format!("stage/{id}");
            match row.change_type() {
                ChangeType::UpdatePreimage => {}
                ChangeType::Delete => {
                    if state::get(key.as_bytes()).is_some() {
                        state::delete(key.as_bytes());
                        out.emit_bytes(row.index(), Some(id.as_bytes()), None);
                    }
                }
                ChangeType::Insert | ChangeType::UpdatePostimage => {
                    let stage = stages.str(index).unwrap_or_default();
                    let before = state::get_str(&key);
                    if before.as_deref() == Some(stage) {
                        continue;
                    }
                    state::put_str(&key, stage);
                    let from = before.as_deref().map_or(Value::Null, Value::Str);
                    let value = JsonObject::new()
                        .field("deal", Value::Str(id))
                        .field("from", from)
                        .field("to", Value::Str(stage))
                        .finish();
                    out.emit_bytes(row.index(), Some(id.as_bytes()), Some(value.as_bytes()));
                }
            }
        }
        Ok(())
    }
}

sluice_transform::export!(StageChanges);

#[cfg(test)]
mod tests {
    use sluice_transform::BatchBuilder;

    use super::*;

    #[test]
    fn only_moves_of_stage_make_records() {
        state::clear();
        let batch = BatchBuilder::new()
            .strings(
                "documentId",
                &[Some("d1"), Some("d1"), Some("d1"), Some("d2"), Some("d2")],
            )
            .strings(
                "fullDocument.stage",
                &[Some("new"), Some("new"), Some("won"), Some("new"), None],
            )
            .change(ChangeType::Insert, 1, 0)
            .change(ChangeType::UpdatePostimage, 2, 0)
            .change(ChangeType::UpdatePostimage, 3, 0)
            .change(ChangeType::Insert, 3, 0)
            .change(ChangeType::Delete, 4, 0)
            .build();
        let mut transform = StageChanges::init(&Params::default()).unwrap();
        let mut out = Output::default();
        transform.transform(&batch, &mut out).unwrap();
        let made: Vec<(u32, Option<String>)> = out
            .records()
            .iter()
            .map(|r| {
                let value = r
                    .value
                    .clone()
                    .map(|v| String::from_utf8(v.to_vec()).unwrap());
                (r.source_row, value)
            })
            .collect();
        assert_eq!(
            made,
            [
                (0, Some(r#"{"deal":"d1","to":"new"}"#.to_string())),
                (
                    2,
                    Some(r#"{"deal":"d1","from":"new","to":"won"}"#.to_string())
                ),
                (3, Some(r#"{"deal":"d2","to":"new"}"#.to_string())),
                (4, None),
            ]
        );
        assert_eq!(state::get_str("stage/d1").as_deref(), Some("won"));
        assert_eq!(state::get(b"stage/d2"), None);
    }
}

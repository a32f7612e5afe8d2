//! The motivating pipeline as a transform: CRM deal changes from the bronze table to
//! the gold topic, as the `deal_gold1` Delta Live Tables query shapes them.
//!
//! Key: `documentId`. Value: JSON of the gold columns, the `ObjectId('…')` wrappers cut
//! to their 24 hex characters as Spark's `substring(x, 11, 24)` does. Deletes become
//! tombstones keyed by `documentId`.
//!
//! Parameter `change_types` (default `insert,update_postimage,delete`): the change
//! types to emit; `update_preimage` is dropped unless listed.

use sluice_transform::{
    Batch, ChangeType, Error, JsonObject, Output, Params, Record, Row, Transform, Value,
};

/// The gold-deals transform.
pub struct GoldDeals {
    emit: Vec<ChangeType>,
}

impl Transform for GoldDeals {
    fn init(params: &Params) -> Result<Self, String> {
        let names = params.get_or("change_types", "insert,update_postimage,delete");
        let emit = names
            .split(',')
            .map(|name| {
                ChangeType::parse(name).ok_or_else(|| {
                    format!(
                        "Parameter change_types has an unknown change type `{}`; use insert, update_preimage, update_postimage or delete.",
                        name.trim()
                    )
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(GoldDeals { emit })
    }

    fn transform(&mut self, batch: &Batch, out: &mut Output) -> Result<(), Error> {
        for row in batch
            .rows()
            .filter(|r| self.emit.contains(&r.change_type()))
        {
            let key = row.str("documentId")?.ok_or_else(|| {
                Error::row(row.index(), "The row has no documentId to key it by.")
            })?;
            let record = Record::new().key(key);
            let record = match row.change_type() {
                ChangeType::Delete => record,
                _ => record.value(gold_json(&row)?),
            };
            out.emit(&row, record);
        }
        Ok(())
    }
}

fn gold_json(row: &Row<'_>) -> Result<String, Error> {
    let cut = |column: &str| -> Result<Value<'_>, Error> {
        Ok(row
            .str(column)?
            .map_or(Value::Null, |s| Value::Str(spark_substring(s, 11, 24))))
    };
    Ok(JsonObject::new()
        .field("documentId", row.get("documentId")?)
        .field("eventTimestamp", row.get("eventTimestamp")?)
        .field("owner_id", cut("fullDocument.owner_id")?)
        .field("owner_type", row.get("fullDocument.owner_type")?)
        .field("account_id", cut("fullDocument.account_id")?)
        .field(
            "manager_account_id",
            cut("fullDocument.manager_account_id")?,
        )
        .field("hubspot_deal_id", row.get("fullDocument.hubspot_deal_id")?)
        .field("stage", row.get("fullDocument.stage")?)
        .field("status", row.get("fullDocument.status")?)
        .field("title", row.get("fullDocument.title")?)
        .finish())
}

/// Spark's `substring(s, pos, len)` for a positive 1-based `pos`: characters, not bytes,
/// and whatever part of the range exists.
fn spark_substring(s: &str, pos: usize, len: usize) -> &str {
    let mut chars = s
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(s.len()));
    let start = chars.nth(pos - 1).unwrap_or(s.len());
    let end = chars.nth(len - 1).unwrap_or(s.len());
    &s[start..end]
}

sluice_transform::export_transform!(GoldDeals);

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_transform::{BatchBuilder, ColumnValues};

    fn strings(values: &[Option<&str>]) -> ColumnValues {
        ColumnValues::Utf8(values.iter().map(|v| v.map(str::to_string)).collect())
    }

    #[test]
    fn substring_matches_spark() {
        let id = "ObjectId('65a1f0c2e4b0a1b2c3d4e5f6')";
        assert_eq!(spark_substring(id, 11, 24), "65a1f0c2e4b0a1b2c3d4e5f6");
        assert_eq!(spark_substring("short", 11, 24), "");
        assert_eq!(spark_substring("ObjectId('é5a1')", 11, 24), "é5a1')");
    }

    #[test]
    fn inserts_become_values_deletes_tombstones_preimages_vanish() {
        let owner = Some("ObjectId('65a1f0c2e4b0a1b2c3d4e5f6')");
        let mut builder = BatchBuilder::new()
            .column(
                "documentId",
                strings(&[Some("d1"), Some("d1"), Some("d1"), Some("d2")]),
            )
            .column("eventTimestamp", ColumnValues::Timestamp(vec![Some(0); 4]))
            .column("fullDocument.owner_id", strings(&[owner; 4]))
            .column(
                "fullDocument.stage",
                strings(&[Some("new"), Some("new"), Some("won"), None]),
            );
        for field in [
            "owner_type",
            "account_id",
            "manager_account_id",
            "hubspot_deal_id",
            "status",
            "title",
        ] {
            builder = builder.column(&format!("fullDocument.{field}"), strings(&[None; 4]));
        }
        let batch = builder
            .change(ChangeType::Insert, 1, 0)
            .change(ChangeType::UpdatePreimage, 2, 0)
            .change(ChangeType::UpdatePostimage, 2, 0)
            .change(ChangeType::Delete, 3, 0)
            .build();
        let mut transform = GoldDeals::init(&Params::default()).unwrap();
        let mut out = Output::default();
        transform.transform(&batch, &mut out).unwrap();
        let got: Vec<_> = out.records().iter().map(|(row, _)| *row).collect();
        assert_eq!(got, [0, 2, 3]);
        let expected_value = r#"{"documentId":"d1","eventTimestamp":"1970-01-01T00:00:00.000Z","owner_id":"65a1f0c2e4b0a1b2c3d4e5f6","stage":"won"}"#;
        assert_eq!(
            out.records()[1].1,
            Record::new().key("d1").value(expected_value)
        );
        assert_eq!(out.records()[2].1, Record::new().key("d2"));
    }

    #[test]
    fn unknown_change_type_parameter_is_refused() {
        let params =
            Params::from_pairs([("change_types".to_string(), "insert,upsert".to_string())]);
        let err = GoldDeals::init(&params).err().unwrap();
        assert!(err.contains("`upsert`"), "{err}");
    }
}

//! The motivating pipeline as a transform: CRM deal changes from the bronze table to
//! the gold topic, as the `deal_gold1` Delta Live Tables query shapes them.
//!
//! Key: `documentId`. Value: JSON of the gold columns, the `ObjectId('…')` wrappers cut
//! to their 24 hex characters as Spark's `substring(x, 11, 24)` does. Deletes become
//! tombstones keyed by `documentId`.
//!
//! Parameter `change_types` (default `insert,update_postimage,delete`): the change
//! types to emit; `update_preimage` is dropped unless listed. Parameter
//! `change_type_header`: when set, every record carries the row's change type in a
//! header of that name.

use sluice_transform::{
    Batch, BatchBuilder, ChangeType, Column, Error, JsonKey, JsonObject, Output, Params, Record,
    Transform, Value, spark_substring,
};

/// The gold columns: name in the record, source column, whether to cut an ObjectId.
pub const GOLD_FIELDS: [(&str, &str, bool); 10] = [
    ("documentId", "documentId", false),
    ("eventTimestamp", "eventTimestamp", false),
    ("owner_id", "fullDocument.owner_id", true),
    ("owner_type", "fullDocument.owner_type", false),
    ("account_id", "fullDocument.account_id", true),
    (
        "manager_account_id",
        "fullDocument.manager_account_id",
        true,
    ),
    ("hubspot_deal_id", "fullDocument.hubspot_deal_id", false),
    ("stage", "fullDocument.stage", false),
    ("status", "fullDocument.status", false),
    ("title", "fullDocument.title", false),
];

/// Reads the `change_types` parameter.
pub fn change_types_param(params: &Params) -> Result<Vec<ChangeType>, String> {
    params
        .get_or("change_types", "insert,update_postimage,delete")
        .split(',')
        .map(|name| {
            ChangeType::parse(name).ok_or_else(|| {
                format!(
                    "Parameter change_types has an unknown change type `{}`; use insert, update_preimage, update_postimage or delete.",
                    name.trim()
                )
            })
        })
        .collect()
}

/// The gold-deals transform.
pub struct GoldDeals {
    emit: Vec<ChangeType>,
    change_type_header: Option<String>,
    /// Fields after the gold ones: `(name, column, cut)` as in [`GOLD_FIELDS`].
    extra: &'static [(&'static str, &'static str, bool)],
}

impl GoldDeals {
    /// The gold transform with `extra` fields after the gold ones (columns a lookup
    /// join adds, for one).
    pub fn with_fields(
        params: &Params,
        extra: &'static [(&'static str, &'static str, bool)],
    ) -> Result<GoldDeals, String> {
        Ok(GoldDeals {
            emit: change_types_param(params)?,
            change_type_header: params.get("change_type_header").map(str::to_string),
            extra,
        })
    }
}

impl Transform for GoldDeals {
    fn init(params: &Params) -> Result<Self, String> {
        GoldDeals::with_fields(params, &[])
    }

    fn transform(&mut self, batch: &Batch, out: &mut Output) -> Result<(), Error> {
        let ids = batch.column("documentId")?;
        let fields = GOLD_FIELDS
            .iter()
            .chain(self.extra)
            .map(|&(name, column, cut)| Ok((JsonKey::new(name), batch.column(column)?, cut)))
            .collect::<Result<Vec<(JsonKey, Column<'_>, bool)>, Error>>()?;
        let mut json = String::new();
        for row in batch.rows()? {
            let change = row.change_type();
            if !self.emit.contains(&change) {
                continue;
            }
            let index = row.index() as usize;
            let key = ids.str(index).ok_or_else(|| {
                Error::row(row.index(), "The row has no documentId to key it by.")
            })?;
            if let Some(header) = &self.change_type_header {
                let mut record = Record::new().key(key).header(header, change.as_str());
                if change != ChangeType::Delete {
                    record = record.value(gold_json(&fields, index, String::new()));
                }
                out.emit(&row, record);
                continue;
            }
            if change == ChangeType::Delete {
                out.emit_bytes(row.index(), Some(key.as_bytes()), None);
                continue;
            }
            json = gold_json(&fields, index, std::mem::take(&mut json));
            out.emit_bytes(row.index(), Some(key.as_bytes()), Some(json.as_bytes()));
        }
        Ok(())
    }
}

/// The gold JSON of row `index`, written into `buffer`'s allocation.
fn gold_json(fields: &[(JsonKey, Column<'_>, bool)], index: usize, buffer: String) -> String {
    let mut object = JsonObject::in_buffer(buffer);
    for (key, column, cut) in fields {
        let value = match column.value(index) {
            Value::Str(s) if *cut => Value::Str(spark_substring(s, 11, 24)),
            value => value,
        };
        object.push_keyed(key, &value);
    }
    object.finish()
}

// A crate that builds on gold-deals (gold-deals-enriched) exports its own transform.
#[cfg(not(feature = "library"))]
sluice_transform::export!(GoldDeals);

/// Four changes of two deals (insert, update pre- and post-image, delete) shaped like
/// the bronze table, for unit tests of this and other deal transforms.
pub fn sample_batch() -> Batch {
    let owner = Some("ObjectId('65a1f0c2e4b0a1b2c3d4e5f6')");
    let mut builder = BatchBuilder::new()
        .strings(
            "documentId",
            &[Some("d1"), Some("d1"), Some("d1"), Some("d2")],
        )
        .timestamps("eventTimestamp", &[Some(0); 4])
        .strings("fullDocument.owner_id", &[owner; 4])
        .strings(
            "fullDocument.stage",
            &[Some("new"), Some("new"), Some("won"), None],
        );
    for field in [
        "owner_type",
        "account_id",
        "manager_account_id",
        "hubspot_deal_id",
        "status",
        "title",
    ] {
        builder = builder.strings(&format!("fullDocument.{field}"), &[None; 4]);
    }
    builder
        .change(ChangeType::Insert, 1, 0)
        .change(ChangeType::UpdatePreimage, 2, 0)
        .change(ChangeType::UpdatePostimage, 2, 0)
        .change(ChangeType::Delete, 3, 0)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_transform::Record;

    #[test]
    fn inserts_become_values_deletes_tombstones_preimages_vanish() {
        let mut transform = GoldDeals::init(&Params::default()).unwrap();
        let mut out = Output::default();
        transform.transform(&sample_batch(), &mut out).unwrap();
        let records = out.records();
        let rows: Vec<_> = records.iter().map(|r| r.source_row).collect();
        assert_eq!(rows, [0, 2, 3]);
        let expected_value = r#"{"documentId":"d1","eventTimestamp":"1970-01-01T00:00:00.000Z","owner_id":"65a1f0c2e4b0a1b2c3d4e5f6","stage":"won"}"#;
        assert_eq!(
            records[1],
            Record {
                source_row: 2,
                ..Record::new().key("d1").value(expected_value)
            }
        );
        assert_eq!(
            records[2],
            Record {
                source_row: 3,
                ..Record::new().key("d2")
            }
        );
    }

    #[test]
    fn unknown_change_type_parameter_is_refused() {
        let params =
            Params::from_pairs([("change_types".to_string(), "insert,upsert".to_string())]);
        let err = GoldDeals::init(&params).err().unwrap();
        assert!(err.contains("`upsert`"), "{err}");
    }
}

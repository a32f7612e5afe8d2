//! gold-deals as a careless revision might change it: the `title` field is renamed
//! `deal_title`, and deletes are dropped instead of becoming tombstones. The fixture
//! of the shadow-deploy tests, which must name exactly these records.

use sluice_transform::{
    Batch, ChangeType, Column, Error, JsonKey, JsonObject, Output, Params, Transform, Value,
    spark_substring,
};

/// The gold columns as gold-deals writes them, but `title` is `deal_title`: name in the
/// record, source column, whether to cut an ObjectId.
const FIELDS: [(&str, &str, bool); 10] = [
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
    ("deal_title", "fullDocument.title", false),
];

/// The revised transform.
pub struct RevisedGoldDeals;

impl Transform for RevisedGoldDeals {
    fn init(_: &Params) -> Result<Self, String> {
        Ok(RevisedGoldDeals)
    }

    fn transform(&mut self, batch: &Batch, out: &mut Output) -> Result<(), Error> {
        let ids = batch.column("documentId")?;
        let fields = FIELDS
            .iter()
            .map(|&(name, column, cut)| Ok((JsonKey::new(name), batch.column(column)?, cut)))
            .collect::<Result<Vec<(JsonKey, Column<'_>, bool)>, Error>>()?;
        for row in batch.rows()? {
            if !matches!(
                row.change_type(),
                ChangeType::Insert | ChangeType::UpdatePostimage
            ) {
                continue;
            }
            let index = row.index() as usize;
            let key = ids.str(index).ok_or_else(|| {
                Error::row(row.index(), "The row has no documentId to key it by.")
            })?;
            let mut object = JsonObject::in_buffer(String::new());
            for (name, column, cut) in &fields {
                let value = match column.value(index) {
                    Value::Str(s) if *cut => Value::Str(spark_substring(s, 11, 24)),
                    value => value,
                };
                object.push_keyed(name, &value);
            }
            out.emit_bytes(
                row.index(),
                Some(key.as_bytes()),
                Some(object.finish().as_bytes()),
            );
        }
        Ok(())
    }
}

sluice_transform::export!(RevisedGoldDeals);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletes_are_dropped_and_the_title_is_renamed() {
        let mut transform = RevisedGoldDeals::init(&Params::default()).unwrap();
        let mut out = Output::default();
        transform
            .transform(&gold_deals::sample_batch(), &mut out)
            .unwrap();
        let rows: Vec<_> = out.records().iter().map(|r| r.source_row).collect();
        assert_eq!(rows, [0, 2], "the delete of d2 (row 3) makes no record");
        let value = String::from_utf8(out.records()[1].value.clone().unwrap()).unwrap();
        assert!(value.contains("\"stage\":\"won\""), "{value}");
        assert!(!value.contains("\"title\""), "{value}");
    }
}

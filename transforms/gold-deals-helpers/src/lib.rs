//! The gold-deals transform written with the host helpers: the guest describes the
//! records and the host selects and encodes them natively, so no value is touched in
//! Wasm. Gives the same records as `gold-deals`.

use sluice_transform::{
    Batch, ChangeType, EncodeSpec, Error, FieldValue, Output, Params, Transform, ValueEncoding,
};

/// The gold-deals transform on host helpers.
pub struct GoldDealsHelpers {
    emit: Vec<ChangeType>,
    change_type_header: Option<String>,
}

impl Transform for GoldDealsHelpers {
    fn init(params: &Params) -> Result<Self, String> {
        let names = params.get_or("change_types", "insert,update_postimage,delete");
        let emit = names
            .split(',')
            .map(|name| ChangeType::parse(name).ok_or(format!("Unknown change type `{name}`.")))
            .collect::<Result<_, _>>()?;
        Ok(GoldDealsHelpers {
            emit,
            change_type_header: params.get("change_type_header").map(str::to_string),
        })
    }

    fn transform(&mut self, batch: &Batch, out: &mut Output) -> Result<(), Error> {
        let column = |c: &str| FieldValue::Column(c.to_string());
        let cut = |c: &str| FieldValue::Substring {
            column: c.to_string(),
            pos: 11,
            len: 24,
        };
        let fields = [
            ("documentId", column("documentId")),
            ("eventTimestamp", column("eventTimestamp")),
            ("owner_id", cut("fullDocument.owner_id")),
            ("owner_type", column("fullDocument.owner_type")),
            ("account_id", cut("fullDocument.account_id")),
            ("manager_account_id", cut("fullDocument.manager_account_id")),
            ("hubspot_deal_id", column("fullDocument.hubspot_deal_id")),
            ("stage", column("fullDocument.stage")),
            ("status", column("fullDocument.status")),
            ("title", column("fullDocument.title")),
        ];
        let spec = EncodeSpec {
            rows: batch.select_change_types(&self.emit, None)?,
            key: Some(column("documentId")),
            value: ValueEncoding::Json(fields.map(|(n, v)| (n.to_string(), v)).to_vec()),
            delete_as_tombstone: true,
            topic: None,
            headers: self
                .change_type_header
                .iter()
                .map(|name| (name.clone(), FieldValue::ChangeType))
                .collect(),
        };
        out.encode(batch, &spec)?;
        Ok(())
    }
}

sluice_transform::export!(GoldDealsHelpers);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makes_the_same_records_as_gold_deals() {
        let batch = gold_deals::sample_batch();
        let mut helpers = Output::default();
        GoldDealsHelpers::init(&Params::default())
            .unwrap()
            .transform(&batch, &mut helpers)
            .unwrap();
        let mut rows = Output::default();
        gold_deals::GoldDeals::init(&Params::default())
            .unwrap()
            .transform(&batch, &mut rows)
            .unwrap();
        assert_eq!(helpers.records().len(), 3);
        assert_eq!(helpers.records(), rows.records());
    }

    #[test]
    fn the_change_type_header_matches_gold_deals() {
        let params = Params::from_pairs([("change_type_header".into(), "op".into())]);
        let batch = gold_deals::sample_batch();
        let mut helpers = Output::default();
        GoldDealsHelpers::init(&params)
            .unwrap()
            .transform(&batch, &mut helpers)
            .unwrap();
        let mut rows = Output::default();
        gold_deals::GoldDeals::init(&params)
            .unwrap()
            .transform(&batch, &mut rows)
            .unwrap();
        let records = rows.records();
        assert_eq!(records[2].headers, [("op".to_string(), b"delete".to_vec())]);
        assert_eq!(records[2].value, None);
        assert_eq!(helpers.records(), records);
    }
}

//! gold-deals enriched from two lookup tables (contract 1.3): each record also carries
//! `owner_name` from `owners` (keyed by `owner_id`) and `account_segment` from
//! `accounts` (keyed by `account_id`), as those tables were when the deal changed.
//! A deal whose owner or account has no row gets no such field.

use gold_deals::GoldDeals;
use sluice_transform::lookup::Join;
use sluice_transform::{Batch, Error, Output, Params, Transform};

/// The fields the lookups add, after the gold ones.
const ENRICHED: [(&str, &str, bool); 2] = [
    ("owner_name", "owner_name", false),
    ("account_segment", "account_segment", false),
];

/// The enriched transform: the two joins, then gold-deals over the widened batch.
pub struct GoldDealsEnriched {
    gold: GoldDeals,
}

impl Transform for GoldDealsEnriched {
    fn init(params: &Params) -> Result<Self, String> {
        Ok(GoldDealsEnriched {
            gold: GoldDeals::with_fields(params, &ENRICHED)?,
        })
    }

    fn transform(&mut self, batch: &Batch, out: &mut Output) -> Result<(), Error> {
        let owners = Join::new("owners", &["fullDocument.owner_id"])
            .columns(&["name"])
            .prefix("owner_");
        let accounts = Join::new("accounts", &["fullDocument.account_id"])
            .columns(&["segment"])
            .prefix("account_");
        let enriched = batch.join(&owners)?.join(&accounts)?;
        self.gold.transform(&enriched, out)
    }
}

sluice_transform::export!(GoldDealsEnriched);

#[cfg(test)]
mod tests {
    use sluice_transform::arrow_array::RecordBatch;
    use sluice_transform::{BatchBuilder, ChangeType, lookup};

    use super::*;

    /// A lookup table's rows: string columns, without change columns.
    fn table(columns: &[(&str, &[Option<&str>])]) -> RecordBatch {
        let mut builder = BatchBuilder::new();
        for (name, values) in columns {
            builder = builder.strings(name, values);
        }
        for _ in 0..columns[0].1.len() {
            builder = builder.change(ChangeType::Insert, 0, 0);
        }
        let batch = builder.build();
        let indexes: Vec<usize> = (0..columns.len()).collect();
        batch.arrow().unwrap().project(&indexes).unwrap()
    }

    #[test]
    fn records_carry_the_owners_name_and_the_accounts_segment_where_there_are_rows() {
        lookup::set_table(
            "owners",
            &["owner_id"],
            table(&[("owner_id", &[Some("o1")]), ("name", &[Some("Ada")])]),
        );
        lookup::set_table(
            "accounts",
            &["account_id"],
            table(&[("account_id", &[Some("a2")]), ("segment", &[Some("smb")])]),
        );
        let mut builder = BatchBuilder::new()
            .strings("documentId", &[Some("d1"), Some("d2")])
            .timestamps("eventTimestamp", &[Some(0); 2])
            .strings("fullDocument.owner_id", &[Some("o1"), Some("o9")])
            .strings("fullDocument.account_id", &[Some("a1"), Some("a2")]);
        for field in [
            "owner_type",
            "manager_account_id",
            "hubspot_deal_id",
            "stage",
            "status",
            "title",
        ] {
            builder = builder.strings(&format!("fullDocument.{field}"), &[None; 2]);
        }
        let batch = builder
            .change(ChangeType::Insert, 1, 0)
            .change(ChangeType::Insert, 1, 0)
            .build();
        let mut transform = GoldDealsEnriched::init(&Params::default()).unwrap();
        let mut out = Output::default();
        transform.transform(&batch, &mut out).unwrap();
        let values: Vec<String> = out
            .records()
            .iter()
            .map(|r| String::from_utf8(r.value.clone().unwrap()).unwrap())
            .collect();
        assert!(
            values[0].ends_with(r#","owner_name":"Ada"}"#),
            "{}",
            values[0]
        );
        assert!(
            values[1].ends_with(r#","account_segment":"smb"}"#),
            "{}",
            values[1]
        );
        assert!(!values[1].contains("owner_name"), "{}", values[1]);
    }
}

//! Lookup tables over real Delta tables written by `scripts/deals_table.py`: the store
//! built from a snapshot and kept current from the change feed answers as of each
//! version a batch's commit time names, resumes from its file, and stops on a key with
//! two rows, naming it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sluice_lookup::{Consistency, LookupError, LookupSpec, LookupTable, RedbVersions, TableReader};
use sluice_source::arrow::array::{ArrayRef, AsArray, StringArray};
use sluice_source::{ChangeFeed, SourceOptions};
use sluice_tests::{
    Extra, PipelineFiles, consumed_key_values, deals_table, kafka_bootstrap, run_to_latest,
    transform_component, unique_topic,
};

const WAIT: Duration = Duration::from_secs(5);

fn owner_id(deal: u64) -> String {
    format!("ObjectId('{:024x}')", 0x65A1F0C2E4B0u64 * 1000 + deal)
}

fn spec(table: &str) -> LookupSpec {
    LookupSpec {
        table: table.to_string(),
        key: vec!["owner_id".into()],
        columns: vec!["name".into(), "region".into()],
    }
}

fn open(table: &str, dir: &std::path::Path) -> Result<LookupTable, LookupError> {
    let feed: Arc<dyn TableReader> =
        Arc::new(ChangeFeed::open(table, SourceOptions::default()).expect("the table opens"));
    LookupTable::open(
        spec(table),
        feed,
        Box::new(RedbVersions::open(dir, 8 << 20).expect("the store opens")),
    )
}

/// The names of the owners of deals 3, 5 and 7 as of `version`.
fn names(table: &LookupTable, version: Option<u64>) -> Vec<Option<String>> {
    let keys: ArrayRef = Arc::new(StringArray::from(vec![
        owner_id(3),
        owner_id(5),
        owner_id(7),
    ]));
    let (found, rows) = table.get(&[keys], version).expect("the store reads");
    let names: Vec<_> = rows
        .column(0)
        .as_string::<i32>()
        .iter()
        .map(|n| n.map(str::to_string))
        .collect();
    assert_eq!(found, names.iter().map(Option::is_some).collect::<Vec<_>>());
    names
}

#[test]
fn a_lookup_table_answers_as_of_each_commit_time_resumes_and_refuses_a_duplicate_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("owners");
    let table = path.to_str().unwrap();
    deals_table(&path, &["owners", "--rows", "10"]);
    deals_table(&path, &["owner-rename", "--start", "3"]);
    deals_table(&path, &["owner-delete", "--start", "5"]);
    let feed = ChangeFeed::open(table, SourceOptions::default()).unwrap();
    let committed = |v: u64| feed.version_info(v).unwrap().committed_ms * 1000;
    let store = dir.path().join("store");
    let owners = open(table, &store).unwrap();
    assert_eq!(owners.through(), 2);
    let s = |n: &str| Some(n.to_string());
    let at = |micros| {
        owners
            .read_version(Consistency::AsOf, micros, WAIT)
            .unwrap()
    };
    // Built from the snapshot of version 2.
    assert_eq!(at(committed(2)), Some(2));
    assert_eq!(
        names(&owners, Some(2)),
        [s("Owner 3 (renamed)"), None, s("Owner 7")]
    );
    // A batch committed between versions 1 and 2 reads version 1: rebuilt from its
    // snapshot, followed back up to 2.
    assert_eq!(at(committed(2) - 1), Some(1));
    assert_eq!(
        names(&owners, Some(1)),
        [s("Owner 3 (renamed)"), s("Owner 5"), s("Owner 7")]
    );
    assert_eq!(at(committed(1) - 1), Some(0));
    assert_eq!(
        names(&owners, Some(0)),
        [s("Owner 3"), s("Owner 5"), s("Owner 7")]
    );
    assert_eq!(at(committed(0) - 1), None, "before the table existed");
    assert_eq!(names(&owners, Some(2))[1], None);
    assert_eq!(
        owners.read_version(Consistency::Latest, 0, WAIT).unwrap(),
        Some(2)
    );
    drop(owners);

    // Reopened: resumed from the file at version 2, then followed to the new version.
    deals_table(&path, &["owner-rename", "--start", "7"]);
    let owners = open(table, &store).unwrap();
    assert_eq!(owners.through(), 3);
    assert_eq!(names(&owners, Some(3))[2], s("Owner 7 (renamed)"));
    assert_eq!(names(&owners, Some(1))[2], s("Owner 7"));

    deals_table(&path, &["owner-duplicate", "--start", "7"]);
    let error = owners
        .read_version(Consistency::AsOf, committed(4), WAIT)
        .unwrap_err();
    assert!(
        error.to_string().contains(&format!(
            "lookup table {table} has more than one row with key ({}) (version 4)",
            owner_id(7)
        )),
        "{error}"
    );
}

#[test]
fn a_lookup_of_a_missing_table_or_column_says_which() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere");
    let error = ChangeFeed::open(missing.to_str().unwrap(), SourceOptions::default())
        .err()
        .expect("no table there");
    assert!(error.to_string().contains("nowhere"), "{error}");
    let path = dir.path().join("accounts");
    deals_table(&path, &["accounts", "--rows", "3"]);
    let error = open(path.to_str().unwrap(), &dir.path().join("store"))
        .err()
        .expect("accounts have no owner_id");
    assert!(
        error
            .to_string()
            .contains("has no column `owner_id`; its columns are account_id, segment"),
        "{error}"
    );
}

/// `scripts/lookup_oracle.py`'s as-of join of the three tables: per deal insert or
/// update, its id, owner name and account segment.
fn oracle(deals: &Path, owners: &Path, accounts: &Path) -> Vec<serde_json::Value> {
    let output = std::process::Command::new("python3")
        .arg(sluice_tests::repo_root().join("scripts/lookup_oracle.py"))
        .args([deals, owners, accounts])
        .output()
        .expect("python3 runs");
    sluice_tests::json_lines(&output)
}

#[test]
fn the_enriched_gold_deals_give_what_an_independent_as_of_join_gives() {
    let dir = tempfile::tempdir().unwrap();
    let (deals, owners, accounts) = (
        dir.path().join("deals"),
        dir.path().join("owners"),
        dir.path().join("accounts"),
    );
    deals_table(&owners, &["owners", "--rows", "12"]);
    deals_table(&accounts, &["accounts", "--rows", "12"]);
    deals_table(&deals, &["create", "--rows", "12"]);
    // Owner 3 renamed between deal 3's insert and its update; owner 7 removed after
    // deal 7's update; deal 100 (from the merge) has neither owner nor account.
    deals_table(&owners, &["owner-rename", "--start", "3"]);
    deals_table(&deals, &["update"]);
    deals_table(&owners, &["owner-delete", "--start", "7"]);
    deals_table(&deals, &["delete"]);
    deals_table(&deals, &["merge"]);
    let topic = unique_topic("lookups-enriched");
    let files = PipelineFiles::new(
        &deals,
        &transform_component("gold-deals-enriched"),
        &topic,
        &kafka_bootstrap(),
        Extra {
            source: "starting_version = 0",
            ..Extra::default()
        },
    );
    let lookups = format!(
        r#"
[[lookup]]
name = "owners"
table = "{}"
key = ["owner_id"]
columns = ["name"]

[[lookup]]
name = "accounts"
table = "{}"
key = ["account_id"]
columns = ["segment"]
"#,
        owners.display(),
        accounts.display()
    );
    let mut config = std::fs::read_to_string(&files.config).unwrap();
    config.push_str(&lookups);
    std::fs::write(&files.config, config).unwrap();
    run_to_latest(&files.config);
    let mut records: Vec<serde_json::Value> = consumed_key_values(&topic)
        .into_iter()
        .filter(|(_, value)| value != "<none>")
        .map(|(_, value)| {
            let value: serde_json::Value = serde_json::from_str(&value).unwrap();
            serde_json::json!({
                "documentId": value["documentId"],
                "owner_name": value.get("owner_name").cloned().unwrap_or_default(),
                "account_segment": value.get("account_segment").cloned().unwrap_or_default(),
            })
        })
        .collect();
    let mut expected = oracle(&deals, &owners, &accounts);
    // Each deal's records in order; rows of one version come in the commit's order.
    let by_deal = |r: &serde_json::Value| r["documentId"].as_str().unwrap_or_default().to_string();
    records.sort_by_key(by_deal);
    expected.sort_by_key(by_deal);
    assert_eq!(records, expected);
    // The scenario has what it is for: a rename seen by the later change only, and a
    // deal without owner or account.
    let of = |id: &str| -> Vec<&serde_json::Value> {
        expected.iter().filter(|r| r["documentId"] == id).collect()
    };
    assert_eq!(of("deal-0003")[0]["owner_name"], "Owner 3");
    assert_eq!(of("deal-0003")[1]["owner_name"], "Owner 3 (renamed)");
    assert!(of("deal-0100")[0]["owner_name"].is_null());
}

//! With `change_headers = true`, every record carries its source row's change metadata;
//! a transform may send each record to a topic of its own.

use serde_json::Value;
use sluice_tests::{
    Extra, PipelineFiles, consume_all, deals_table, kafka_bootstrap, run_to_latest,
    transform_component, unique_topic,
};

#[test]
fn records_carry_their_rows_change_type_version_and_timestamp() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["scenario"]);
    let topic = unique_topic("headers");
    let files = PipelineFiles::new(
        &table,
        &transform_component("passthrough"),
        &topic,
        &kafka_bootstrap(),
        Extra {
            sink: "change_headers = true",
            ..Extra::default()
        },
    );
    run_to_latest(&files.config);

    let records = consume_all(&topic);
    assert_eq!(records.len(), 39, "every change row of the scenario");
    let mut change_types = std::collections::BTreeSet::new();
    for record in records {
        let row: Value = serde_json::from_str(record.value.as_deref().unwrap()).unwrap();
        let header = |name: &str| {
            record
                .headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("no {name} header"))
        };
        assert_eq!(
            header("sluice.change_type"),
            row["_change_type"].as_str().unwrap()
        );
        assert_eq!(
            header("sluice.commit_version"),
            row["_commit_version"].to_string()
        );
        assert!(header("sluice.commit_timestamp").parse::<i64>().unwrap() > 1_600_000_000_000_000);
        change_types.insert(header("sluice.change_type"));
    }
    assert_eq!(
        change_types.len(),
        4,
        "inserts, pre- and post-images and deletes: {change_types:?}"
    );
}

#[test]
fn a_transform_routes_records_to_topics_of_their_own() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["scenario"]);
    let topic = unique_topic("routed");
    let deletes = unique_topic("routed-deletes");
    let params = format!("deletes_topic = \"{deletes}\"");
    let files = PipelineFiles::new(
        &table,
        &transform_component("passthrough"),
        &topic,
        &kafka_bootstrap(),
        Extra {
            params: &params,
            ..Extra::default()
        },
    );
    run_to_latest(&files.config);
    let change_type = |record: &sluice_tests::Consumed| {
        let row: Value = serde_json::from_str(record.value.as_deref().unwrap()).unwrap();
        row["_change_type"].as_str().unwrap().to_string()
    };
    let deleted: Vec<String> = consume_all(&deletes).iter().map(change_type).collect();
    assert_eq!(deleted, ["delete", "delete"]);
    let rest = consume_all(&topic);
    assert_eq!(rest.len(), 37);
    assert!(rest.iter().all(|r| change_type(r) != "delete"));
}

//! Tables written by Spark and Databricks stream through the pass-through transform and
//! give exactly the rows their _change_data, add and remove files hold.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use sluice_tests::{
    Extra, PipelineFiles, consume_all, kafka_bootstrap, repo_root, run_to_latest,
    transform_component, unique_topic,
};

fn spark_table(name: &str) -> PathBuf {
    let path = repo_root().join("tests/data/delta-tables/spark").join(name);
    assert!(path.is_dir(), "fixture {} is missing", path.display());
    path
}

/// The oracle's rows, re-serialised so number formats match.
fn expected(table: &Path) -> Vec<String> {
    let output = Command::new("python3")
        .arg(repo_root().join("tests/support/expected_changes.py"))
        .arg(table)
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut rows: Vec<String> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap().to_string())
        .collect();
    rows.sort();
    rows
}

fn streamed(table: &Path) -> Vec<String> {
    let topic = unique_topic("passthrough");
    let files = PipelineFiles::new(
        table,
        &transform_component("passthrough"),
        &topic,
        &kafka_bootstrap(),
        Extra::default(),
    );
    run_to_latest(&files.config);
    let mut rows: Vec<String> = consume_all(&topic)
        .into_iter()
        .map(|record| {
            let mut row: Value =
                serde_json::from_str(record.value.as_deref().expect("a value")).unwrap();
            let timestamp = row.as_object_mut().unwrap().remove("_commit_timestamp");
            assert!(
                timestamp.is_some_and(|t| t.is_string()),
                "every row carries _commit_timestamp"
            );
            row.to_string()
        })
        .collect();
    rows.sort();
    rows
}

fn assert_same_changes(name: &str) {
    let table = spark_table(name);
    let want = expected(&table);
    assert!(!want.is_empty());
    assert_eq!(
        streamed(&table),
        want,
        "{name}: the streamed change feed differs from the table's files"
    );
}

#[test]
fn spark_partitioned_table_with_updates_and_a_delete() {
    assert_same_changes("cdf-table");
}

#[test]
fn spark_table_with_updates_a_delete_and_an_append() {
    assert_same_changes("cdf-table-non-partitioned");
}

#[test]
fn databricks_table_with_an_update() {
    assert_same_changes("simple_table_with_cdc");
}

//! Where a pipeline starts: a snapshot of a version followed by its changes (resumable
//! mid-snapshot), the first version at or after a timestamp, only new commits
//! (`latest`), and `--restart` from the configured start over a stored position.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_tests::{
    Consumed, Extra, PipelineFiles, consume_all, deals_table, kafka_bootstrap,
    run_expecting_failure, run_sluice, run_to_latest, spawn_sluice, stop_sluice,
    transform_component, unique_topic,
};

/// (change type, commit version) of each passthrough record, in order.
fn changes(records: &[Consumed]) -> Vec<(String, u64)> {
    records
        .iter()
        .map(|record| {
            let row: Value = serde_json::from_str(record.value.as_deref().unwrap()).unwrap();
            (
                row["_change_type"].as_str().unwrap().to_string(),
                row["_commit_version"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn count(changes: &[(String, u64)], change_type: &str, version: u64) -> usize {
    changes
        .iter()
        .filter(|(t, v)| t == change_type && *v == version)
        .count()
}

fn pipeline(table: &Path, topic: &str, source: &str, sink: &str) -> PipelineFiles {
    PipelineFiles::new(
        table,
        &transform_component("passthrough"),
        topic,
        &kafka_bootstrap(),
        Extra {
            source,
            sink,
            ..Extra::default()
        },
    )
}

#[test]
fn a_snapshot_then_its_changes_resumes_mid_snapshot_exactly_once() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "20000"]);
    deals_table(&table, &["append", "--start", "20000", "--rows", "10"]);
    deals_table(&table, &["update"]);
    deals_table(&table, &["delete"]);
    let topic = unique_topic("snapshot");
    let files = pipeline(
        &table,
        &topic,
        "snapshot = true\nstarting_version = 1\nbatch_rows = 500",
        "commit_rows = 500",
    );
    let mut sluice = spawn_sluice(&files.config);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let position = files.stored_position();
        let in_snapshot = position
            .as_ref()
            .is_some_and(|p| p["snapshot"] == true && p["row_offset"].as_u64() >= Some(1000));
        if in_snapshot {
            break;
        }
        assert!(
            position.is_none() || position.as_ref().unwrap()["snapshot"] == true,
            "the snapshot ended before the kill: {position:?}"
        );
        assert!(Instant::now() < deadline, "no progress into the snapshot");
        std::thread::sleep(Duration::from_millis(20));
    }
    sluice.kill().unwrap();
    sluice.wait().unwrap();
    run_to_latest(&files.config);
    assert_eq!(files.position(), Some((4, 0)));

    let changes = changes(&consume_all(&topic));
    assert_eq!(
        count(&changes, "insert", 1),
        20_010,
        "the snapshot of version 1"
    );
    assert_eq!(count(&changes, "update_preimage", 2), 2);
    assert_eq!(count(&changes, "update_postimage", 2), 2);
    assert_eq!(count(&changes, "delete", 3), 2);
    assert_eq!(changes.len(), 20_016, "nothing else, nothing twice");
}

#[test]
fn a_snapshot_without_a_version_is_of_the_latest_version() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["scenario"]);
    let topic = unique_topic("snapshot-latest");
    let files = pipeline(&table, &topic, "snapshot = true", "");
    run_to_latest(&files.config);
    let changes = changes(&consume_all(&topic));
    // The scenario leaves 29 deals at version 4: 30 made, 2 deleted, 1 merged in.
    assert_eq!(
        count(&changes, "insert", 4),
        29,
        "every row of the latest version"
    );
    assert_eq!(
        changes.len(),
        29,
        "nothing of the earlier versions: {changes:?}"
    );
    assert_eq!(files.position(), Some((5, 0)));
}

#[test]
fn a_starting_timestamp_starts_at_the_first_commit_after_it() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "5"]);
    std::thread::sleep(Duration::from_millis(1100));
    let start = humantime::format_rfc3339_millis(std::time::SystemTime::now());
    std::thread::sleep(Duration::from_millis(50));
    deals_table(&table, &["append", "--start", "5", "--rows", "3"]);
    deals_table(&table, &["update"]);

    let topic = unique_topic("from-timestamp");
    let source = format!("starting_timestamp = \"{start}\"");
    let files = pipeline(&table, &topic, &source, "");
    run_to_latest(&files.config);
    let changes = changes(&consume_all(&topic));
    assert_eq!(count(&changes, "insert", 1), 3);
    assert_eq!(count(&changes, "update_postimage", 2), 2);
    assert!(changes.iter().all(|(_, v)| *v >= 1), "{changes:?}");

    let future =
        humantime::format_rfc3339(std::time::SystemTime::now() + Duration::from_secs(3600));
    let late = pipeline(
        &table,
        &unique_topic("late"),
        &format!("starting_timestamp = \"{future}\""),
        "",
    );
    let stderr = run_expecting_failure(&late.config);
    assert!(
        stderr.contains("has no commit at or after the starting timestamp"),
        "{stderr}"
    );
}

#[test]
fn latest_delivers_only_commits_made_after_the_start() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "5"]);
    let topic = unique_topic("latest");
    let files = pipeline(&table, &topic, "starting_version = \"latest\"", "");
    let mut sluice = spawn_sluice(&files.config);
    let deadline = Instant::now() + Duration::from_secs(60);
    while files.position() != Some((1, 0)) {
        assert!(Instant::now() < deadline, "the pipeline did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    deals_table(&table, &["append", "--start", "5", "--rows", "2"]);
    files.wait_for_position(&mut sluice, 2, Duration::from_secs(60));
    assert!(stop_sluice(&mut sluice).success());
    let changes = changes(&consume_all(&topic));
    assert_eq!(changes, [("insert".into(), 1), ("insert".into(), 1)]);
}

#[test]
fn restart_ignores_the_stored_position_and_starts_where_the_config_says() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["scenario"]);
    let topic = unique_topic("restart");
    let files = pipeline(&table, &topic, "starting_version = 4", "");
    run_to_latest(&files.config);
    assert_eq!(files.position(), Some((5, 0)));
    let first = consume_all(&topic).len();
    // Without --restart the stored position wins: nothing new.
    run_to_latest(&files.config);
    assert_eq!(consume_all(&topic).len(), first);
    let again = run_sluice(&files.config, &["--stop-at-latest", "--restart"]);
    assert!(again.status.success());
    assert_eq!(consume_all(&topic).len(), 2 * first);
}

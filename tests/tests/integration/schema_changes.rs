//! A schema change a pipeline cannot follow (a dropped, renamed or retyped column) stops
//! it wherever it is when the table changes: while following, or reading a history
//! from the start. The message names the change, nothing of the changed version is
//! produced, and the restart it suggests (`sluice position reset`) goes on from there.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_tests::{
    Extra, PipelineFiles, consume_all, deals_table, kafka_bootstrap, run_expecting_failure,
    run_to_latest, sluice_binary, spawn_sluice_logged, transform_component, unique_topic,
};

fn pipeline(table: &Path, topic: &str) -> PipelineFiles {
    PipelineFiles::new(
        table,
        &transform_component("passthrough"),
        topic,
        &kafka_bootstrap(),
        Extra::default(),
    )
}

/// Commit versions of the passthrough records in `topic`.
fn versions(topic: &str) -> Vec<u64> {
    consume_all(topic)
        .iter()
        .map(|record| {
            let row: Value = serde_json::from_str(record.value.as_deref().unwrap()).unwrap();
            row["_commit_version"].as_u64().unwrap()
        })
        .collect()
}

/// Version 0: 20 deals; 1: ADD COLUMNS region; 2: deal 3's region set; 3: five deals
/// appended after the column was added.
fn table_with_region(table: &Path) {
    deals_table(table, &["create", "--rows", "20"]);
    deals_table(table, &["region"]);
    deals_table(table, &["append", "--start", "20", "--rows", "5"]);
}

/// Waits for `child` to exit; its status and log.
fn exited(child: &mut Child, log: &Path, timeout: Duration) -> (bool, String) {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status.success(), std::fs::read_to_string(log).unwrap());
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "the pipeline did not stop in {timeout:?}:\n{}",
                std::fs::read_to_string(log).unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn following_pipelines_stop_at_a_dropped_renamed_or_retyped_column() {
    let work = tempfile::tempdir().unwrap();
    let cases = [
        (
            "dropped",
            vec!["drop"],
            "column `region` was dropped or renamed",
        ),
        (
            "renamed",
            vec!["rename", "--to", "area"],
            "column `region` was dropped or renamed",
        ),
        (
            "retyped",
            vec!["retype", "--name", "eventTimestamp"],
            "column `eventTimestamp` changed type from timestamp to string",
        ),
    ];
    let mut running = Vec::new();
    for (name, _, _) in &cases {
        let table = work.path().join(name);
        table_with_region(&table);
        let topic = unique_topic(&format!("schema-{name}"));
        let files = pipeline(&table, &topic);
        let log = work.path().join(format!("{name}.log"));
        let child = spawn_sluice_logged(&files.config, &log);
        running.push((table, topic, files, log, child));
    }
    for ((name, change, detail), (table, topic, files, log, mut child)) in cases.iter().zip(running)
    {
        files.wait_for_position_logging(&mut child, 4, Duration::from_secs(60), Some(&log));
        // The pipeline follows version 3; version 4 changes the schema under it.
        deals_table(&table, change);
        let (succeeded, log) = exited(&mut child, &log, Duration::from_secs(60));
        assert!(!succeeded, "{name}: the pipeline carried on:\n{log}");
        assert!(
            log.contains("changed its schema at version 4") && log.contains(detail),
            "{name}: the stop does not name the change:\n{log}"
        );
        assert!(
            log.contains("sluice position reset --to-version 4"),
            "{name}: {log}"
        );
        let delivered = versions(&topic);
        assert_eq!(
            delivered.len(),
            20 + 2 + 5,
            "{name}: the inserts, deal 3's update and the appends"
        );
        assert!(
            delivered.iter().all(|&v| v < 4),
            "{name}: records of the changed version were produced: {delivered:?}"
        );
        assert_eq!(files.position(), Some((4, 0)), "{name}");

        if *name == "retyped" {
            // The retyping overwrite's own changes cannot be read (its removed files
            // have the old type; Spark refuses that version too): the stop is the point.
            continue;
        }
        // The restart the message suggests takes version 4's schema as the new start.
        let reset = Command::new(sluice_binary())
            .args(["position", "reset", "--to-version", "4", "--config"])
            .arg(&files.config)
            .output()
            .unwrap();
        assert!(
            reset.status.success(),
            "{}",
            String::from_utf8_lossy(&reset.stderr)
        );
        run_to_latest(&files.config);
        assert_eq!(files.position(), Some((5, 0)), "{name}");
        let rewritten = versions(&topic).iter().filter(|&&v| v == 4).count();
        // The overwrite removes the 25 deals and adds them back, reshaped.
        assert_eq!(rewritten, 50, "{name}: version 4 after the reset");
    }
}

#[test]
fn a_history_read_from_the_start_stops_at_the_change_that_breaks_it() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    table_with_region(&table);
    // Version 4 drops the column again: versions 0 and 4 have the same schema, so the
    // whole history looks like one schema from its ends.
    deals_table(&table, &["drop"]);
    let topic = unique_topic("schema-history");
    let files = pipeline(&table, &topic);
    let stderr = run_expecting_failure(&files.config);
    assert!(
        stderr.contains("changed its schema at version 4")
            && stderr.contains("column `region` was dropped or renamed"),
        "the stop blames the wrong change: {stderr}"
    );
    assert_eq!(
        stderr.matches("changed its schema at version 4").count(),
        1,
        "the stop is said once, not again as its cause: {stderr}"
    );
    let delivered = versions(&topic);
    assert_eq!(
        delivered.len(),
        20 + 2 + 5,
        "versions 0 to 3 are delivered before the stop: {delivered:?}"
    );
    assert_eq!(files.position(), Some((4, 0)));
}

//! The motivating case: a deals table gets appends, then an UPDATE, a DELETE and a
//! MERGE while the pipeline runs. A plain Delta stream crashes at the first update;
//! Sluice keeps running and delivers every change as the gold-deals transform shapes it.

use std::path::Path;
use std::time::Duration;

use sluice_tests::{
    Consumed, PipelineFiles, by_key, consume_all, deals_table, kafka_bootstrap, repo_root,
    run_sluice, spawn_sluice, stop_sluice, transform_component, unique_topic,
};

const WAIT: Duration = Duration::from_secs(90);

#[test]
fn updates_deletes_and_merges_stream_while_the_pipeline_runs() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "20"]);
    deals_table(&table, &["append", "--start", "20", "--rows", "10"]);
    let topic = unique_topic("gold-deals");
    let files = PipelineFiles::new(
        &table,
        &transform_component("gold-deals"),
        &topic,
        &kafka_bootstrap(),
        "",
        "",
    );

    let mut sluice = spawn_sluice(&files.config);
    files.wait_for_position(&mut sluice, 2, WAIT);
    for (step, version_after) in [("update", 3), ("delete", 4), ("merge", 5)] {
        deals_table(&table, &[step]);
        files.wait_for_position(&mut sluice, version_after, WAIT);
    }
    assert!(
        sluice.try_wait().unwrap().is_none(),
        "the pipeline stopped on its own"
    );
    assert!(
        stop_sluice(&mut sluice).success(),
        "the pipeline did not shut down cleanly"
    );

    let got = by_key(consume_all(&topic).iter().map(Consumed::line));
    assert_matches_golden(&got, &repo_root().join("tests/golden/gold-deals.txt"));
}

#[test]
fn a_killed_pipeline_resumes_from_its_stored_position_and_loses_nothing() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "3000"]);
    deals_table(&table, &["append", "--start", "3000", "--rows", "1000"]);
    for step in ["update", "delete", "merge"] {
        deals_table(&table, &[step]);
    }
    let module = transform_component("gold-deals");
    let bootstrap = kafka_bootstrap();

    let reference_topic = unique_topic("gold-deals-reference");
    let reference = PipelineFiles::new(
        &table,
        &module,
        &reference_topic,
        &bootstrap,
        "batch_rows = 50",
        "",
    );
    assert!(
        run_sluice(&reference.config, &["--stop-at-latest"])
            .status
            .success()
    );
    let expected: Vec<String> = consume_all(&reference_topic)
        .iter()
        .map(Consumed::line)
        .collect();
    // 4000 inserts, 2 updated deals, 2 tombstones, 2 deals changed by the merge.
    assert_eq!(expected.len(), 4000 + 2 + 2 + 2);

    let topic = unique_topic("gold-deals-restart");
    let files = PipelineFiles::new(&table, &module, &topic, &bootstrap, "batch_rows = 50", "");
    let mut sluice = spawn_sluice(&files.config);
    while files.position().is_none() {
        assert!(
            sluice.try_wait().unwrap().is_none(),
            "sluice exited before storing a position"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    sluice.kill().unwrap();
    sluice.wait().unwrap();
    let killed_at = files.position().unwrap();
    assert!(
        killed_at < (5, 0),
        "the pipeline finished before it was killed ({killed_at:?}): nothing was tested"
    );

    let restarted = run_sluice(&files.config, &["--stop-at-latest"]);
    assert!(
        restarted.status.success(),
        "{}",
        String::from_utf8_lossy(&restarted.stderr)
    );
    let stderr = String::from_utf8_lossy(&restarted.stderr);
    assert!(
        stderr.contains("Resuming from the stored position"),
        "{stderr}"
    );

    let got: Vec<String> = consume_all(&topic).iter().map(Consumed::line).collect();
    let mut distinct = got.clone();
    distinct.sort();
    distinct.dedup();
    let mut want = expected.clone();
    want.sort();
    let missing: Vec<&String> = want
        .iter()
        .filter(|l| distinct.binary_search(l).is_err())
        .collect();
    let extra: Vec<&String> = distinct
        .iter()
        .filter(|l| want.binary_search(l).is_err())
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "after a crash at {killed_at:?} and a restart, {} records are missing and {} are extra; first missing: {:?}; first extra: {:?}",
        missing.len(),
        extra.len(),
        missing.first(),
        extra.first()
    );
    // At-least-once: only the batch in flight at the kill may be repeated.
    assert!(
        got.len() - expected.len() <= 50,
        "{} records repeated",
        got.len() - expected.len()
    );
    assert_eq!(files.position(), Some((5, 0)));
}

/// Compares with a checked-in golden file; `SLUICE_BLESS=1` rewrites it instead.
fn assert_matches_golden(got: &[String], golden: &Path) {
    let text = got.iter().map(|l| format!("{l}\n")).collect::<String>();
    if std::env::var_os("SLUICE_BLESS").is_some() {
        std::fs::write(golden, &text).unwrap();
    }
    let want =
        std::fs::read_to_string(golden).unwrap_or_else(|e| panic!("{}: {e}", golden.display()));
    assert_eq!(text, want, "records differ from {}", golden.display());
}

//! The motivating case: a deals table gets appends, then an UPDATE, a DELETE and a
//! MERGE while the pipeline runs. A plain Delta stream crashes at the first update;
//! Sluice keeps running and delivers every change as the gold-deals transform shapes it.

use std::path::Path;
use std::time::Duration;

use sluice_tests::{
    Consumed, Extra, PipelineFiles, by_key, consume_all, deals_table, kafka_bootstrap, repo_root,
    spawn_sluice, stop_sluice, transform_component, unique_topic,
};

const WAIT: Duration = Duration::from_secs(90);

#[test]
fn updates_deletes_and_merges_stream_while_the_pipeline_runs() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "20"]);
    deals_table(&table, &["append", "--start", "20", "--rows", "10"]);
    let topic = unique_topic("gold-deals");
    let module = transform_component("gold-deals");
    let files = PipelineFiles::new(
        &table,
        &module,
        &topic,
        &kafka_bootstrap(),
        Extra::default(),
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

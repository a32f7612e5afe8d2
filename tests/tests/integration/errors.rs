//! Bad input stops the pipeline with a message that says what is wrong and what to do.

use std::path::Path;

use sluice_tests::{
    Extra, PipelineFiles, consume_all, deals_table, kafka_bootstrap, run_expecting_failure,
    transform_component, unique_topic,
};

fn fails_with(table: &Path, module: &Path, bootstrap: &str, expected: &[&str]) {
    let files = PipelineFiles::new(
        table,
        module,
        &unique_topic("errors"),
        bootstrap,
        Extra::default(),
    );
    let stderr = run_expecting_failure(&files.config);
    for text in expected {
        assert!(stderr.contains(text), "stderr lacks {text:?}: {stderr}");
    }
}

fn cdf_table(dir: &Path) -> std::path::PathBuf {
    let table = dir.join("deals");
    deals_table(&table, &["create", "--rows", "3"]);
    table
}

#[test]
fn a_missing_table_path_is_named() {
    let work = tempfile::tempdir().unwrap();
    let missing = work.path().join("no-such-table");
    fails_with(
        &missing,
        &transform_component("passthrough"),
        &kafka_bootstrap(),
        &["no-such-table", "does not exist"],
    );
}

#[test]
fn a_table_without_change_data_feed_says_how_to_enable_it() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("plain");
    deals_table(&table, &["plain", "--rows", "3"]);
    fails_with(
        &table,
        &transform_component("passthrough"),
        &kafka_bootstrap(),
        &[
            "does not have the change data feed enabled",
            "ALTER TABLE <table> SET TBLPROPERTIES (delta.enableChangeDataFeed = true)",
        ],
    );
}

#[test]
fn a_missing_module_file_is_named() {
    let work = tempfile::tempdir().unwrap();
    let table = cdf_table(work.path());
    fails_with(
        &table,
        &work.path().join("nowhere.wasm"),
        &kafka_bootstrap(),
        &["Cannot read transform module", "nowhere.wasm"],
    );
}

#[test]
fn a_core_module_or_a_non_wasm_file_is_not_a_component() {
    let work = tempfile::tempdir().unwrap();
    let table = cdf_table(work.path());
    let core = work.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    fails_with(
        &table,
        &core,
        &kafka_bootstrap(),
        &["core.wasm", "not a component", "sluice build"],
    );
    let text = work.path().join("notes.wasm");
    std::fs::write(&text, "hello").unwrap();
    fails_with(
        &table,
        &text,
        &kafka_bootstrap(),
        &["notes.wasm", "is not a WebAssembly file"],
    );
}

#[test]
fn an_unreachable_broker_is_named_after_a_bounded_wait() {
    let work = tempfile::tempdir().unwrap();
    let table = cdf_table(work.path());
    let started = std::time::Instant::now();
    fails_with(
        &table,
        &transform_component("passthrough"),
        "127.0.0.1:1",
        &["Kafka at 127.0.0.1:1 did not answer"],
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "the wait was not bounded"
    );
}

#[test]
fn a_record_too_large_for_kafka_names_its_delta_row_and_keeps_the_good_versions() {
    let work = tempfile::tempdir().unwrap();
    let table = cdf_table(work.path());
    deals_table(&table, &["big", "--start", "3", "--title-bytes", "20000"]);
    let topic = unique_topic("too-large");
    let files = PipelineFiles::new(
        &table,
        &transform_component("passthrough"),
        &topic,
        &kafka_bootstrap(),
        Extra {
            sink: "commit_per_version = true",
            kafka: "\"message.max.bytes\" = 10000",
            ..Extra::default()
        },
    );
    for _attempt in 0..2 {
        let stderr = run_expecting_failure(&files.config);
        for text in [
            "refused the record made from change row 0 of table version 1",
            "Message size too large",
            "Raise `message.max.bytes`",
        ] {
            assert!(stderr.contains(text), "stderr lacks {text:?}: {stderr}");
        }
        assert_eq!(files.position(), Some((0, 3)), "version 0 stays delivered");
        assert_eq!(consume_all(&topic).len(), 3, "version 0's records, once");
    }
}

#[test]
fn vacuumed_files_are_named_with_the_way_out() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    // The update rewrites the file holding deals 3 and 7; VACUUM then deletes the old one.
    deals_table(&table, &["create", "--rows", "10"]);
    deals_table(&table, &["update"]);
    deals_table(&table, &["vacuum"]);
    let topic = unique_topic("vacuumed");
    let files = PipelineFiles::new(
        &table,
        &transform_component("passthrough"),
        &topic,
        &kafka_bootstrap(),
        Extra::default(),
    );
    let stderr = run_expecting_failure(&files.config);
    for text in [
        "a file needed for versions 0..=3 is missing, usually because VACUUM removed it",
        "or start again from a snapshot of the table",
    ] {
        assert!(stderr.contains(text), "stderr lacks {text:?}: {stderr}");
    }
    assert!(consume_all(&topic).is_empty(), "nothing was delivered");
}

#[test]
fn versions_whose_log_was_cleaned_up_name_the_earliest_available() {
    let work = tempfile::tempdir().unwrap();
    let table = cdf_table(work.path());
    deals_table(&table, &["append", "--start", "3", "--rows", "2"]);
    deals_table(&table, &["append", "--start", "5", "--rows", "2"]);
    deals_table(&table, &["checkpoint"]);
    for version in [0, 1] {
        std::fs::remove_file(table.join(format!("_delta_log/{version:020}.json"))).unwrap();
    }
    fails_with(
        &table,
        &transform_component("passthrough"),
        &kafka_bootstrap(),
        &[
            "no longer has version 0",
            "the earliest available version is 2",
        ],
    );
}

#[test]
fn a_table_recreated_behind_the_pipelines_back_is_named() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["scenario"]);
    let files = PipelineFiles::new(
        &table,
        &transform_component("passthrough"),
        &unique_topic("recreated"),
        &kafka_bootstrap(),
        Extra::default(),
    );
    sluice_tests::run_to_latest(&files.config);
    std::fs::remove_dir_all(&table).unwrap();
    deals_table(&table, &["create", "--rows", "3"]);
    let stderr = run_expecting_failure(&files.config);
    for text in [
        "is at version 5, past table",
        "latest version 0",
        "the table was recreated",
        "sluice run --restart",
    ] {
        assert!(stderr.contains(text), "stderr lacks {text:?}: {stderr}");
    }
}

//! `sluice check` validates a pipeline without running it and lists every problem.

use sluice_tests::{
    Extra, PipelineFiles, create_topic, deals_table, kafka_bootstrap, sluice_check,
    transform_component, unique_topic,
};

#[test]
fn a_good_pipeline_passes_every_check() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create"]);
    let topic = unique_topic("check");
    create_topic(&kafka_bootstrap(), &topic, 1);
    let files = PipelineFiles::new(
        &table,
        &transform_component("passthrough"),
        &topic,
        &kafka_bootstrap(),
        Extra {
            transform: "module_cache_dir = \"compiled\"",
            ..Extra::default()
        },
    );
    let (ok, out) = sluice_check(&files.config);
    assert!(ok, "{out}");
    let cached: Vec<_> = std::fs::read_dir(files.dir.path().join("compiled"))
        .expect("the module cache was written")
        .collect();
    assert_eq!(cached.len(), 1, "one compiled module, named by its digest");
    let (ok, out) = sluice_check(&files.config);
    assert!(ok, "the cached module loads: {out}");
    for part in ["config", "table", "module", "kafka"] {
        assert!(
            out.lines()
                .any(|l| l.trim_start().starts_with("ok") && l.contains(part)),
            "{part}: {out}"
        );
    }
    assert_eq!(files.position(), None, "checking stores no position");
}

#[test]
fn every_problem_is_listed_not_only_the_first() {
    let work = tempfile::tempdir().unwrap();
    let files = PipelineFiles::new(
        &work.path().join("no-such-table"),
        &work.path().join("no-such-module.wasm"),
        &unique_topic("check-bad"),
        "127.0.0.1:1",
        Extra::default(),
    );
    let (ok, out) = sluice_check(&files.config);
    assert!(!ok, "{out}");
    let problems: Vec<_> = out.lines().filter(|l| l.contains("PROBLEM")).collect();
    assert_eq!(problems.len(), 3, "{out}");
    assert!(
        problems[0].contains("table") && problems[0].contains("no-such-table"),
        "{out}"
    );
    assert!(
        problems[1].contains("module") && problems[1].contains("no-such-module.wasm"),
        "{out}"
    );
    assert!(
        problems[2].contains("kafka") && problems[2].contains("127.0.0.1:1"),
        "{out}"
    );
    assert!(out.contains("3 problem(s) found"), "{out}");
}

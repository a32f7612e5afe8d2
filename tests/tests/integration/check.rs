//! `sluice check` validates a pipeline without running it and lists every problem.

use sluice_tests::{
    Extra, PipelineFiles, create_topic, deals_table, kafka_bootstrap, sluice_binary, sluice_check,
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

/// `sluice check` and `sluice preview --config` refuse what the pipeline would: records
/// naming a topic off `[sink] allowed_topics` fail their rows.
#[test]
fn check_and_preview_show_records_on_topics_the_pipeline_may_not_write() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "30"]);
    let topic = unique_topic("check-topics");
    create_topic(&kafka_bootstrap(), &topic, 1);
    let files = PipelineFiles::new(
        &table,
        &transform_component("misbehaving/behaviors"),
        &topic,
        &kafka_bootstrap(),
        Extra {
            params: "behavior = \"foreign-topic\"\nbad_ids = \"deal-0007\"\ntopic = \"elsewhere\"",
            sink: &format!("allowed_topics = [\"{topic}-side\"]"),
            ..Extra::default()
        },
    );
    let (ok, out) = sluice_check(&files.config);
    assert!(!ok, "{out}");
    assert!(
        out.lines().any(|l| l.contains("PROBLEM")
            && l.contains("`elsewhere`")
            && l.contains("allowed_topics")),
        "{out}"
    );

    let preview = std::process::Command::new(sluice_binary())
        .args(["preview", "--config"])
        .arg(&files.config)
        .output()
        .expect("sluice runs");
    assert!(preview.status.success(), "{preview:?}");
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&preview.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let rejected: Vec<_> = lines
        .iter()
        .filter(|l| l.get("rejected").is_some())
        .collect();
    assert_eq!(rejected.len(), 1, "{lines:?}");
    assert_eq!(rejected[0]["row"], 7);
    assert!(
        rejected[0]["rejected"]
            .as_str()
            .unwrap()
            .contains("`elsewhere`"),
        "{lines:?}"
    );
    assert_eq!(
        lines.len(),
        30,
        "the other 29 rows' records, and the rejection"
    );
    assert!(lines.iter().all(|l| l["topic"] != "elsewhere"), "{lines:?}");
}

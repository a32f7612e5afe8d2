//! The error policy against the real broker: rows a module rejects or fails on stop
//! the pipeline (`fail`), are left out (`skip`), or go to a dead-letter topic with
//! their Delta coordinates in the same transaction as the good records
//! (`dead-letter`). Traps get one retry on a fresh instance, then the same policy.

use serde_json::Value;
use sluice_tests::{
    Extra, PipelineFiles, consume_all, deals_table, kafka_bootstrap, run_expecting_failure,
    run_to_latest, transform_component, unique_topic,
};

/// A 30-deal table (version 0) with deals 7 and 21 poisoned.
fn table(dir: &std::path::Path) -> std::path::PathBuf {
    let table = dir.join("deals");
    deals_table(&table, &["create", "--rows", "30"]);
    table
}

fn params(behavior: &str) -> String {
    format!("behavior = \"{behavior}\"\nbad_ids = \"deal-0007,deal-0021\"")
}

fn pipeline(
    table: &std::path::Path,
    topic: &str,
    behavior: &str,
    transform: &str,
) -> PipelineFiles {
    PipelineFiles::new(
        table,
        &transform_component("misbehaving/behaviors"),
        topic,
        &kafka_bootstrap(),
        Extra {
            params: &params(behavior),
            transform,
            ..Extra::default()
        },
    )
}

fn keys(topic: &str) -> Vec<String> {
    consume_all(topic)
        .into_iter()
        .map(|r| r.key.unwrap_or_default())
        .collect()
}

fn good_keys() -> Vec<String> {
    (0..30)
        .filter(|i| *i != 7 && *i != 21)
        .map(|i| format!("deal-{i:04}"))
        .collect()
}

#[test]
fn dead_letters_carry_the_row_the_error_and_its_coordinates_exactly_once() {
    let work = tempfile::tempdir().unwrap();
    let table = table(work.path());
    for behavior in ["reject", "error-row"] {
        let topic = unique_topic(&format!("dlq-{behavior}"));
        let dead = format!("{topic}-dead");
        let transform = format!("on_error = \"dead-letter\"\ndead_letter_topic = \"{dead}\"");
        let files = pipeline(&table, &topic, behavior, &transform);
        run_to_latest(&files.config);
        // A second run finds nothing new: nothing is produced twice.
        run_to_latest(&files.config);

        assert_eq!(
            keys(&topic),
            good_keys(),
            "{behavior}: the good records, once, in order"
        );
        let letters = consume_all(&dead);
        assert_eq!(
            letters.len(),
            2,
            "{behavior}: one dead letter per poisoned deal"
        );
        for (letter, (deal, row)) in letters.iter().zip([("deal-0007", 7), ("deal-0021", 21)]) {
            let value: Value = serde_json::from_str(letter.value.as_deref().unwrap()).unwrap();
            assert_eq!(value["version"], 0, "{behavior}");
            assert_eq!(value["row"], row, "{behavior}");
            assert_eq!(value["change_type"], "insert");
            assert_eq!(value["error_kind"], "row");
            assert_eq!(value["error"], format!("deal {deal} is poisoned"));
            assert_eq!(value["data"]["documentId"], deal);
            assert_eq!(value["module"], "misbehaving");
            assert!(value["table"].as_str().unwrap().ends_with("deals"));
            assert!(
                letter
                    .key
                    .as_deref()
                    .unwrap()
                    .ends_with(&format!("@0#{row}"))
            );
        }
    }
}

#[test]
fn skip_leaves_failed_rows_out_and_fail_stops_before_them() {
    let work = tempfile::tempdir().unwrap();
    let table = table(work.path());

    let topic = unique_topic("skip");
    let files = pipeline(&table, &topic, "reject", "on_error = \"skip\"");
    let log = run_to_latest(&files.config);
    assert_eq!(keys(&topic), good_keys());
    assert_eq!(
        log.matches("The transform failed on a change row").count(),
        2,
        "each skipped row is logged: {log}"
    );

    let topic = unique_topic("fail");
    let files = pipeline(&table, &topic, "reject", "");
    let log = run_expecting_failure(&files.config);
    assert!(
        log.contains("stopped at table")
            && log.contains("version 0, change row 7")
            && log.contains("deal deal-0007 is poisoned"),
        "{log}"
    );
    assert!(
        keys(&topic).is_empty(),
        "nothing of the failed batch is delivered"
    );
    assert_eq!(
        files.position(),
        Some((0, 0)),
        "the position stays before the batch"
    );
}

#[test]
fn a_module_that_traps_twice_on_a_batch_is_retried_once_then_handled_by_the_policy() {
    let work = tempfile::tempdir().unwrap();
    let table = table(work.path());
    // The hog's deadline is long so that memory, not a loaded machine's clock, stops it.
    for (behavior, kind, deadline) in [
        ("panic", "panic", "300ms"),
        ("loop", "deadline exceeded", "300ms"),
        ("hog", "memory limit exceeded", "30s"),
    ] {
        let topic = unique_topic(&format!("trap-{behavior}"));
        let dead = format!("{topic}-dead");
        let transform = format!(
            "on_error = \"dead-letter\"\ndead_letter_topic = \"{dead}\"\nbatch_timeout = \"{deadline}\"\nmemory_limit_mib = 64"
        );
        let files = pipeline(&table, &topic, behavior, &transform);
        let log = run_to_latest(&files.config);
        assert!(
            log.contains("retrying the batch once on a fresh instance"),
            "{behavior}: {log}"
        );
        assert!(keys(&topic).is_empty(), "{behavior}: the one batch failed");
        let letters = consume_all(&dead);
        assert_eq!(
            letters.len(),
            30,
            "{behavior}: every row of the batch is a dead letter"
        );
        let value: Value = serde_json::from_str(letters[0].value.as_deref().unwrap()).unwrap();
        assert_eq!(value["error_kind"], "trap");
        assert!(
            value["error"].as_str().unwrap().contains(kind),
            "{behavior}: {value}"
        );

        let topic = unique_topic(&format!("trap-fail-{behavior}"));
        let transform = format!("batch_timeout = \"{deadline}\"\nmemory_limit_mib = 64");
        let files = pipeline(&table, &topic, behavior, &transform);
        let log = run_expecting_failure(&files.config);
        assert!(
            log.contains(&format!("crashed ({kind})")),
            "{behavior}: {log}"
        );
    }
}

#[test]
fn bad_output_is_named_and_the_host_stays_up() {
    let work = tempfile::tempdir().unwrap();
    let table = table(work.path());
    for (behavior, message) in [
        (
            "malformed",
            "malformed packed records: record 0's key runs past the end of data",
        ),
        ("giant", "emitted more than 8 MiB of records for one batch"),
    ] {
        let topic = unique_topic(&format!("bad-{behavior}"));
        let files = pipeline(&table, &topic, behavior, "max_output_mib = 8");
        let log = run_expecting_failure(&files.config);
        assert!(log.contains(message), "{behavior}: {log}");
        assert!(keys(&topic).is_empty());

        let topic = unique_topic(&format!("bad-skip-{behavior}"));
        let dead = format!("{topic}-dead");
        let transform = format!(
            "max_output_mib = 8\non_error = \"dead-letter\"\ndead_letter_topic = \"{dead}\""
        );
        let files = pipeline(&table, &topic, behavior, &transform);
        run_to_latest(&files.config);
        assert!(keys(&topic).is_empty(), "{behavior}");
        let letters = consume_all(&dead);
        assert_eq!(
            letters.len(),
            30,
            "{behavior}: the whole batch is dead-lettered"
        );
        assert!(
            letters[0].value.as_deref().unwrap().contains(message),
            "{behavior}"
        );
    }
}

#[test]
fn a_fuel_budget_stops_an_endless_loop_deterministically() {
    let work = tempfile::tempdir().unwrap();
    let table = table(work.path());
    let topic = unique_topic("fuel");
    let files = pipeline(&table, &topic, "loop", "fuel_per_batch = 50000000");
    let log = run_expecting_failure(&files.config);
    assert!(log.contains("crashed (fuel budget exhausted)"), "{log}");
}

#[test]
fn an_instance_that_grew_past_the_threshold_is_replaced_between_batches() {
    let work = tempfile::tempdir().unwrap();
    let table = table(work.path());
    let topic = unique_topic("recycle");
    let files = PipelineFiles::new(
        &table,
        &transform_component("misbehaving/behaviors"),
        &topic,
        &kafka_bootstrap(),
        Extra {
            source: "batch_rows = 10",
            transform: "recycle_memory_mib = 1",
            params: "behavior = \"reject\"",
            sink: "",
            kafka: "",
            state: None,
        },
    );
    let log = run_to_latest(&files.config);
    assert_eq!(
        log.matches("Replacing a transform instance").count(),
        3,
        "one fresh instance after each of the three batches: {log}"
    );
    let all: Vec<String> = (0..30).map(|i| format!("deal-{i:04}")).collect();
    assert_eq!(
        keys(&topic),
        all,
        "every record once, in order, across the fresh instances"
    );
}

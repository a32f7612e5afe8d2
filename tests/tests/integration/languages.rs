//! Transforms in every language the SDKs cover, built by `sluice build`, against the
//! real broker: gold-deals in Rust, JavaScript, Python, C and Go makes byte-identical
//! records in the same order, and each language's module meets the host's CPU and
//! memory limits with the same error kinds as Rust's.

use sluice_tests::{
    Consumed, Extra, PipelineFiles, consume_all, deals_table, kafka_bootstrap, preview_records,
    run_expecting_failure, run_to_latest, transform_component, unique_topic,
};

/// gold-deals in each language, Rust first (the reference).
const GOLD_DEALS: [(&str, &str); 5] = [
    ("rust", "gold-deals"),
    ("js", "gold-deals-js"),
    ("python", "gold-deals-python"),
    ("c", "gold-deals-c"),
    ("go", "gold-deals-go"),
];

/// The limit fixtures in each language, Rust first (the reference).
const BEHAVIORS: [(&str, &str); 5] = [
    ("rust", "misbehaving/behaviors"),
    ("js", "misbehaving/behaviors-js"),
    ("python", "misbehaving/behaviors-python"),
    ("c", "misbehaving/behaviors-c"),
    ("go", "misbehaving/behaviors-go"),
];

/// The limits every language's fixture runs under: a 1 s deadline and a 96 MiB memory
/// cap (the memory hogs get a longer deadline, so that memory is what stops them).
const LIMITS: &str = "batch_timeout = \"1s\"\nmemory_limit_mib = 96";

/// A pipeline through a language's limit fixture.
fn behaviors_pipeline(
    table: &std::path::Path,
    module: &str,
    topic: &str,
    limits: &str,
    params: &str,
) -> PipelineFiles {
    PipelineFiles::new(
        table,
        &transform_component(module),
        topic,
        &kafka_bootstrap(),
        Extra {
            transform: limits,
            params,
            ..Extra::default()
        },
    )
}

fn delivered(table: &std::path::Path, module: &str, language: &str) -> Vec<Consumed> {
    let topic = unique_topic(&format!("parity-{language}"));
    let files = PipelineFiles::new(
        table,
        &transform_component(module),
        &topic,
        &kafka_bootstrap(),
        Extra {
            source: "batch_rows = 700",
            params: "change_type_header = \"op\"",
            ..Extra::default()
        },
    );
    run_to_latest(&files.config);
    consume_all(&topic)
}

#[test]
fn gold_deals_makes_byte_identical_records_in_every_language() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["bulk", "--rows", "3000"]);
    deals_table(&table, &["churn", "--rows", "3000"]);
    for step in ["update", "delete", "merge"] {
        deals_table(&table, &[step]);
    }

    let reference = delivered(&table, GOLD_DEALS[0].1, GOLD_DEALS[0].0);
    let tombstones = reference.iter().filter(|r| r.value.is_none()).count();
    let updates = reference
        .iter()
        .filter(|r| r.headers == [("op".to_string(), "update_postimage".to_string())])
        .count();
    assert!(reference.len() > 3000, "{} records", reference.len());
    assert!(
        tombstones > 0 && updates > 0,
        "{tombstones} tombstones, {updates} updates"
    );
    assert!(reference.iter().all(|r| r.headers.len() == 1));

    for (language, module) in &GOLD_DEALS[1..] {
        let records = delivered(&table, module, language);
        assert_eq!(records.len(), reference.len(), "{language}: record count");
        for (i, (got, want)) in records.iter().zip(&reference).enumerate() {
            assert_eq!(got, want, "{language}: record {i} differs from Rust's");
        }
    }

    // Row by row, Go reads every value as C does. A dozen batches once crashed Go: its
    // collector ran while the host wrote the columns into its memory.
    let batches = ["--batch-rows", "700"];
    let c_rows = preview_records(&table, &transform_component("passthrough-c"), &batches);
    let go_rows = preview_records(&table, &transform_component("passthrough-go"), &batches);
    assert_eq!(go_rows.len(), c_rows.len());
    assert!(
        go_rows == c_rows,
        "passthrough-go differs from passthrough-c"
    );
}

#[test]
fn every_language_meets_the_deadline_fuel_and_memory_limits_with_rusts_error_kinds() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "30"]);
    let fuel = format!("{LIMITS}\nfuel_per_batch = 300000000");
    // Go's allocator once took over a second to reach 96 MiB on a loaded CI host.
    let hog = "batch_timeout = \"60s\"\nmemory_limit_mib = 96";
    for (behavior, limits, kind) in [
        ("loop", LIMITS, "deadline exceeded"),
        ("loop", fuel.as_str(), "fuel budget exhausted"),
        ("hog", hog, "memory limit exceeded"),
    ] {
        for (language, module) in BEHAVIORS {
            let topic = unique_topic(&format!("limits-{language}-{behavior}"));
            // Rust's fixture misbehaves only on batches holding a bad row.
            let params = format!("behavior = \"{behavior}\"\nbad_ids = \"deal-0007\"");
            let files = behaviors_pipeline(&table, module, &topic, limits, &params);
            let log = run_expecting_failure(&files.config);
            assert!(
                log.contains(&format!("crashed ({kind})")),
                "{language} {behavior}: {log}"
            );
            assert!(consume_all(&topic).is_empty(), "{language} {behavior}");
        }
    }
}

#[test]
fn every_language_runs_under_the_limits_when_it_behaves() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "30"]);
    for (language, module) in BEHAVIORS {
        let topic = unique_topic(&format!("behaves-{language}"));
        let files = behaviors_pipeline(&table, module, &topic, LIMITS, "");
        run_to_latest(&files.config);
        let keys: Vec<_> = consume_all(&topic).into_iter().map(|r| r.key).collect();
        let expected: Vec<_> = (0..30).map(|i| Some(format!("deal-{i:04}"))).collect();
        assert_eq!(keys, expected, "{language}");
    }
}

#[test]
fn every_sdk_has_the_host_select_and_encode_rows() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "30"]);
    for (language, module) in &BEHAVIORS[1..] {
        let topic = unique_topic(&format!("where-{language}"));
        let params = "behavior = \"where\"\nid = \"deal-0003\"";
        let files = behaviors_pipeline(&table, module, &topic, LIMITS, params);
        run_to_latest(&files.config);
        let records = consume_all(&topic);
        assert_eq!(records.len(), 1, "{language}: {records:?}");
        assert_eq!(records[0].key.as_deref(), Some("deal-0003"), "{language}");
        let value: serde_json::Value =
            serde_json::from_str(records[0].value.as_deref().unwrap()).unwrap();
        assert_eq!(value["documentId"], "deal-0003", "{language}");
        assert_eq!(value["fullDocument"]["title"], "Deal 3", "{language}");
    }
}

#[test]
fn a_go_module_reading_every_column_keeps_its_memory_from_batch_to_batch() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["bulk", "--rows", "50000"]);
    let topic = unique_topic("go-memory");
    // The host replaces an instance whose memory passes half its cap (16 MiB here).
    // Go once kept every string the host handed over pinned, and was replaced every
    // few batches.
    let files = PipelineFiles::new(
        &table,
        &transform_component("passthrough-go"),
        &topic,
        &kafka_bootstrap(),
        Extra {
            source: "batch_rows = 2000",
            transform: "memory_limit_mib = 32",
            ..Extra::default()
        },
    );
    let log = run_to_latest(&files.config);
    assert!(
        !log.contains("Replacing a transform instance"),
        "passthrough-go outgrew half its cap: {log}"
    );
}

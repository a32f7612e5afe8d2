//! The contract's version handshake and sandbox, and its three input paths, through
//! `sluice preview` (no Kafka): modules built for 1.0.0 and for the skeleton's contract
//! still run, bytes a module frames with its own schema are checked,
//! unknown versions, foreign components, WASI-hungry modules, core modules and random
//! bytes are refused with their own message, and the Arrow, typed and helper paths
//! (the last one also from Python) make identical records.

use std::path::Path;

use sluice_tests::{
    deals_table, preview_output, preview_records, repo_root, transform_component, wasip2_component,
};

fn preview_ok(table: &Path, module: &Path, args: &[&str]) -> String {
    let output = preview_output(table, module, args);
    assert!(
        output.status.success(),
        "preview failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn preview_err(table: &Path, module: &Path) -> String {
    let output = preview_output(table, module, &[]);
    assert!(!output.status.success(), "preview succeeded");
    String::from_utf8(output.stderr).unwrap()
}

fn small_table(dir: &Path) -> std::path::PathBuf {
    let table = dir.join("deals");
    deals_table(&table, &["create", "--rows", "5"]);
    table
}

#[test]
fn a_module_built_for_the_skeletons_contract_still_runs() {
    let work = tempfile::tempdir().unwrap();
    let table = small_table(work.path());
    let records = preview_records(
        &table,
        &transform_component("misbehaving/legacy-contract"),
        &[],
    );
    assert_eq!(records.len(), 5);
    for (i, record) in records.iter().enumerate() {
        assert_eq!(record["key"], format!("deal-{i:04}"));
        assert_eq!(record["value"], "ChangeType::Insert");
        assert_eq!(record["row"], i);
        assert_eq!(record["version"], 0);
    }
}

#[test]
fn a_module_built_for_contract_1_0_runs_beside_1_1_modules() {
    let work = tempfile::tempdir().unwrap();
    let table = small_table(work.path());
    let records = preview_records(
        &table,
        &transform_component("misbehaving/contract-1-0"),
        &[],
    );
    assert_eq!(records.len(), 10, "{records:?}");
    for (i, record) in records.iter().enumerate() {
        let row = i % 5;
        assert_eq!(record["key"], format!("deal-{row:04}"));
        assert_eq!(record["row"], row);
        let value = match i < 5 {
            true => "ChangeType::Insert".to_string(),
            false => format!("{{\"id\":\"deal-{row:04}\"}}"),
        };
        assert_eq!(record["value"], value);
    }
    // A 1.1 module in the same host (the same process) frames its own bytes.
    let new = preview_records(&table, &transform_component("own-schema"), &[]);
    let first = &new[0];
    assert_eq!(
        first["value"],
        serde_json::json!({"documentId": "deal-0000", "change": "insert", "version": 0})
    );
    assert_eq!(first["value_schema"]["type"], "AVRO");
    assert_eq!(first["value_schema"]["name"], "crm.Change");
}

#[test]
fn bytes_that_do_not_decode_with_the_modules_own_schema_fail_the_batch() {
    let work = tempfile::tempdir().unwrap();
    let table = small_table(work.path());
    let module = transform_component("own-schema");
    for format in ["avro", "protobuf", "json-schema"] {
        let output = preview_output(
            &table,
            &module,
            &[
                "--param",
                &format!("format={format}"),
                "--param",
                "corrupt_row=3",
            ],
        );
        assert!(!output.status.success(), "{format}: preview succeeded");
        let err = String::from_utf8_lossy(&output.stderr);
        let kind = match format {
            "avro" => "AVRO",
            "protobuf" => "PROTOBUF",
            _ => "JSON",
        };
        assert!(
            err.contains(&format!(
                "record 3 of an emit-framed call (row 3): its value does not decode with its {kind} schema"
            )),
            "{format}: {err}"
        );
    }
}

#[test]
fn modules_the_host_cannot_run_are_refused_with_their_reason() {
    let work = tempfile::tempdir().unwrap();
    let table = small_table(work.path());

    let err = preview_err(&table, &transform_component("misbehaving/future-contract"));
    assert!(
        err.contains("was built for contract sluice:transform/transformer@9.0.0, which this host does not support; it supports sluice:transform/transformer@1.3.0, sluice:transform/transformer@1.2.0, sluice:transform/transformer@1.1.0, sluice:transform/transformer@1.0.0, sluice:transform/transformer@0.1.0"),
        "{err}"
    );

    let err = preview_err(&table, &wasip2_component("misbehaving/wrong-world"));
    assert!(
        err.contains(
            "is a component but not a Sluice transform: it exports [example:greeter/greet"
        ),
        "{err}"
    );

    let err = preview_err(&table, &transform_component("misbehaving/foreign-import"));
    assert!(
        err.contains("imports `example:vault/secrets`, which the host does not provide"),
        "{err}"
    );

    // WASI links (interpreted guests need it) but reaches nothing.
    let err = preview_err(&table, &wasip2_component("misbehaving/wasi-hungry"));
    assert!(err.contains("refused its parameters: file: Err("), "{err}");
    assert!(err.contains("env: Err(NotPresent)"), "{err}");
    assert!(err.contains("socket: Err("), "{err}");
    assert!(
        err.contains("clock: Ok(0)"),
        "the wall clock reads the epoch: {err}"
    );

    let random = work.path().join("random.wasm");
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let bytes: Vec<u8> = (0..4096)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    std::fs::write(&random, bytes).unwrap();
    let err = preview_err(&table, &random);
    assert!(err.contains("is not a WebAssembly file"), "{err}");

    transform_component("gold-deals");
    let core = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| repo_root().join("target"), std::path::PathBuf::from)
        .join("guests/wasm32-unknown-unknown/release/gold_deals.wasm");
    let err = preview_err(&table, &core);
    assert!(
        err.contains("is a core WebAssembly module, not a component"),
        "{err}"
    );
}

#[test]
fn the_arrow_typed_and_helper_paths_make_identical_records() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["scenario"]);
    let gold = transform_component("gold-deals");
    let arrow = preview_ok(&table, &gold, &[]);
    let typed = preview_ok(&table, &gold, &["--param", "sluice.input=typed"]);
    let helpers = preview_ok(&table, &transform_component("gold-deals-helpers"), &[]);
    assert!(arrow.lines().count() > 30, "{arrow}");
    assert!(
        arrow.contains(r#""value":null"#),
        "deletes are tombstones: {arrow}"
    );
    assert_eq!(typed, arrow, "typed path");
    assert_eq!(helpers, arrow, "host helpers");
    // An interpreted guest (CPython, with WASI sealed) on the helpers, byte for byte.
    let python = preview_ok(&table, &transform_component("gold-deals-python"), &[]);
    assert_eq!(python, arrow, "Python on the host helpers");
}

#[test]
fn a_module_flooding_the_log_is_rate_limited_and_keeps_working() {
    let work = tempfile::tempdir().unwrap();
    let table = small_table(work.path());
    let output = preview_output(
        &table,
        &transform_component("misbehaving/behaviors"),
        &["--param", "behavior=flood", "--param", "bad_ids=deal-0002"],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let logged = stderr.matches("flood message").count();
    assert!(
        (1..=40).contains(&logged),
        "10,000 messages, at most the burst of 40 logged: {logged}"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        stdout.lines().count(),
        5,
        "4 records and 1 rejected row: {stdout}"
    );
    assert!(
        stdout.contains(r#""rejected":"deal deal-0002 is poisoned""#),
        "{stdout}"
    );
}

#[test]
fn a_python_exception_is_reported_with_its_traceback() {
    let work = tempfile::tempdir().unwrap();
    let table = small_table(work.path());
    let err = preview_err(&table, &transform_component("misbehaving/python-raises"));
    assert!(err.contains("crashed (panic)"), "{err}");
    assert!(err.contains("The module wrote to stderr:"), "{err}");
    assert!(err.contains("Traceback (most recent call last):"), "{err}");
    assert!(
        err.contains("ValueError: cannot handle a batch of 5 deals"),
        "{err}"
    );
}

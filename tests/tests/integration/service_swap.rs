//! `sluice serve`: a module swapped five times while its pipeline streams a
//! multi-version table exactly once. Every record arrives once, and each was made by
//! the module the position record that follows it names.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use serde_json::Value;
use sluice_tests::service::{Serve, pipeline_config};
use sluice_tests::{
    Extra, consume_all, deals_table, kafka_bootstrap, transform_component, unique_topic,
};

/// Deals in version 0, and in each appended version.
const ROWS: u64 = 2_000;

#[test]
fn swapping_under_load_loses_and_repeats_nothing() {
    let blue = transform_component("tagged/blue");
    let green = transform_component("tagged/green");
    let tables = tempfile::tempdir().unwrap();
    let table = tables.path().join("deals");
    deals_table(&table, &["create", "--rows", &ROWS.to_string()]);
    deals_table(
        &table,
        &[
            "appends",
            "--start",
            &ROWS.to_string(),
            "--rows",
            &ROWS.to_string(),
            "--versions",
            "40",
        ],
    );
    let mut latest = 40;

    let bootstrap = kafka_bootstrap();
    let kafka = format!("\"bootstrap.servers\" = \"{bootstrap}\"");
    let serve = Serve::tenant("acme", &kafka);
    let digests = [
        serve.upload("acme", &blue, "blue"),
        serve.upload("acme", &green, "green"),
    ];
    let tag_of: BTreeMap<&str, &str> = [
        (digests[0].as_str(), "blue"),
        (digests[1].as_str(), "green"),
    ]
    .into();
    let topic = unique_topic("swap");
    // Small batches and transactions of several versions, so swaps land mid-stream
    // with uncommitted work to commit at the boundary.
    let config = pipeline_config(
        &table,
        &topic,
        None,
        Extra {
            source: "batch_rows = 250",
            sink: "commit_rows = 10000",
            ..Extra::default()
        },
    );
    // Unique per run: positions outlive the test in the broker.
    let name = topic.clone();
    serve.create("acme", &name, &config, &digests[0]);

    let mut pauses = Vec::new();
    for swap in 1..=5 {
        let next = &digests[swap % 2];
        let (status, report) = serve.call(
            "POST",
            &format!("/v1/tenants/acme/pipelines/{name}/deploy"),
            Some(serve.token("acme")),
            Some(serde_json::json!({ "module": next })),
        );
        assert_eq!(status, 200, "swap {swap} failed: {report}");
        assert_eq!(report["outcome"], "switched", "{report}");
        assert_eq!(report["to"].as_str(), Some(next.as_str()));
        pauses.push(report["pause_ms"].as_f64().unwrap());
        eprintln!(
            "swap {swap}: at {}, pause {:.2} ms committing {} rows (compile and checks {:.1} ms)",
            report["position"],
            report["pause_ms"].as_f64().unwrap(),
            report["committed_rows"],
            report["prepare_ms"].as_f64().unwrap()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    // A commit after the swaps, picked up by the last module.
    deals_table(
        &table,
        &[
            "append",
            "--start",
            &((latest + 1) * ROWS).to_string(),
            "--rows",
            &ROWS.to_string(),
        ],
    );
    latest += 1;
    let status = serve.wait_caught_up("acme", &name, latest, Duration::from_secs(120));
    assert_eq!(status["counters"]["swaps"], 5, "{status}");
    assert_eq!(status["state"], "running");
    pauses.sort_by(f64::total_cmp);
    eprintln!(
        "swap pause at the batch boundary: median {:.2} ms, max {:.2} ms",
        pauses[2], pauses[4]
    );

    // Every deal exactly once, in commit order.
    let records = consume_all(&topic);
    let total = (latest + 1) * ROWS;
    assert_eq!(records.len() as u64, total, "every change row once");
    let ids: HashSet<String> = records
        .iter()
        .map(|r| {
            let row: Value = serde_json::from_str(r.value.as_deref().unwrap()).unwrap();
            row["documentId"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(ids.len() as u64, total, "no deal repeated");

    // Each record was made by the module the next position record names.
    let positions: Vec<(u64, String)> = consume_all(&format!("sluice-position-acme.{name}"))
        .iter()
        .map(|p| {
            let p: Value = serde_json::from_str(p.value.as_deref().unwrap()).unwrap();
            let index = p["version"].as_u64().unwrap() * ROWS + p["row_offset"].as_u64().unwrap();
            (index, p["module_digest"].as_str().unwrap().to_string())
        })
        .collect();
    let mut tags_seen = BTreeMap::new();
    for (index, record) in records.iter().enumerate() {
        let tag = record
            .headers
            .iter()
            .find(|(k, _)| k == "tag")
            .map(|(_, v)| v.as_str())
            .expect("a tag header");
        let (_, digest) = positions
            .iter()
            .find(|(end, _)| *end > index as u64)
            .unwrap_or_else(|| panic!("no position after record {index}"));
        assert_eq!(
            tag_of[digest.as_str()],
            tag,
            "record {index} was made by {tag}, but the position after it names {}",
            tag_of[digest.as_str()]
        );
        *tags_seen.entry(tag.to_string()).or_insert(0) += 1;
    }
    eprintln!("records per module: {tags_seen:?}");
    assert_eq!(tags_seen.len(), 2, "both modules made records");
}

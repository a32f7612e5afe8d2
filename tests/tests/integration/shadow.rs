//! Shadow deploys under `sluice serve`, against a real broker, real tables and real
//! components: gold-deals in its own shadow finds nothing; a revision that renames a
//! field and drops deletes is caught record by record, as an independent comparison of
//! two previews counts it; the live topic meanwhile gets exactly the live module's
//! records once, under a concurrent writer; a promote under load is a normal swap; a
//! candidate that loops or hogs memory is stopped by its own budget, one flooding the
//! log is cut to the log rate, and the live output is untouched, also by a discard
//! under load; a
//! stateful candidate counts on from a copy of the live state and never writes it.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_tests::service::{CountingPipeline, Serve, counted, pipeline_config};
use sluice_tests::{
    Extra, consumed_key_values, deals_table, kafka_bootstrap, preview_records, transform_component,
    unique_topic,
};

/// Record counts as the shadow reports them: equal, changed, added, missing.
type Counts = (u64, u64, u64, u64);

/// One record of a preview, for comparing: key and value as text.
fn key_value(record: &Value) -> (String, String) {
    let text = |v: &Value| match v {
        Value::Null => "<none>".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    (text(&record["key"]), text(&record["value"]))
}

/// The previewed records of `module` on versions `from..=to`, by change row, in order.
fn by_row(
    table: &Path,
    module: &Path,
    from: u64,
    to: u64,
) -> BTreeMap<(u64, u64), Vec<(String, String)>> {
    let mut rows: BTreeMap<(u64, u64), Vec<(String, String)>> = BTreeMap::new();
    let range = [
        "--from".to_string(),
        from.to_string(),
        "--to".to_string(),
        to.to_string(),
    ];
    let args: Vec<&str> = range.iter().map(String::as_str).collect();
    for record in preview_records(table, module, &args) {
        let at = (
            record["version"].as_u64().unwrap(),
            record["row"].as_u64().unwrap(),
        );
        rows.entry(at).or_default().push(key_value(&record));
    }
    rows
}

/// How two modules' previews of the same versions differ, record by record, paired by
/// change row and order within the row: the comparison the shadow must agree with.
fn compare_previews(
    live: &BTreeMap<(u64, u64), Vec<(String, String)>>,
    candidate: &BTreeMap<(u64, u64), Vec<(String, String)>>,
) -> (Counts, Vec<(u64, u64)>) {
    let (mut equal, mut changed, mut added, mut missing) = (0, 0, 0, 0);
    let mut differing = Vec::new();
    let empty = Vec::new();
    let mut rows: Vec<&(u64, u64)> = live.keys().chain(candidate.keys()).collect();
    rows.sort();
    rows.dedup();
    for at in rows {
        let (a, b) = (
            live.get(at).unwrap_or(&empty),
            candidate.get(at).unwrap_or(&empty),
        );
        for index in 0..a.len().max(b.len()) {
            match (a.get(index), b.get(index)) {
                (Some(x), Some(y)) if x == y => equal += 1,
                (Some(_), Some(_)) => changed += 1,
                (Some(_), None) => missing += 1,
                _ => added += 1,
            }
            if a.get(index) != b.get(index) {
                differing.push(*at);
            }
        }
    }
    ((equal, changed, added, missing), differing)
}

fn counts(report: &Value, topic: &str) -> Counts {
    let c = &report["topics"][topic];
    let n = |f: &str| c[f].as_u64().unwrap_or_default();
    (n("equal"), n("changed"), n("added"), n("missing"))
}

/// Waits until the shadow has compared every batch the live module handed it, up to
/// version `latest` (or has ended).
fn wait_for_shadow(serve: &Serve, name: &str, latest: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (status, report) = serve.call(
            "GET",
            &format!("/v1/tenants/acme/pipelines/{name}/shadow"),
            Some(serve.token("acme")),
            None,
        );
        assert_eq!(status, 200, "{report}");
        let through = &report["through"];
        if (through["version"].as_u64() == Some(latest) && *through == report["live_through"])
            || report["phase"] != "running"
        {
            return report;
        }
        assert!(
            Instant::now() < deadline,
            "the shadow did not catch up with version {latest}: {report}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A service with tenant `acme`, `modules` uploaded (their digests, in order), and a
/// gold-deals pipeline on `table` caught up with version 0 (its name is its topic).
fn served_pipeline(
    table: &Path,
    modules: &[(&Path, &str)],
    prefix: &str,
    extra: Extra<'_>,
) -> (Serve, Vec<String>, String) {
    let kafka = format!("\"bootstrap.servers\" = \"{}\"", kafka_bootstrap());
    let serve = Serve::tenant("acme", &kafka);
    let digests: Vec<String> = modules
        .iter()
        .map(|(path, name)| serve.upload("acme", path, name))
        .collect();
    let topic = unique_topic(prefix);
    let config = pipeline_config(table, &topic, None, extra);
    serve.create("acme", &topic, &config, &digests[0]);
    serve.wait_caught_up("acme", &topic, 0, Duration::from_secs(60));
    (serve, digests, topic)
}

/// Starts appending `versions` versions of `rows` deals from `start` to `table` on a
/// thread of its own, and returns once the writer is under way.
fn appending_meanwhile(
    table: &Path,
    start: u64,
    rows: u64,
    versions: u64,
) -> std::thread::JoinHandle<()> {
    let table = table.to_path_buf();
    let writer = std::thread::spawn(move || {
        let [start, rows, versions] = [start, rows, versions].map(|n| n.to_string());
        deals_table(
            &table,
            &[
                "appends",
                "--start",
                &start,
                "--rows",
                &rows,
                "--versions",
                &versions,
            ],
        );
    });
    std::thread::sleep(Duration::from_millis(300));
    writer
}

fn post(serve: &Serve, path: &str, body: Option<Value>) -> (u16, Value) {
    serve.call("POST", path, Some(serve.token("acme")), body)
}

#[test]
fn shadows_compare_record_by_record_and_never_touch_the_live_output() {
    let gold = transform_component("gold-deals");
    let revised = transform_component("gold-deals-revised");
    let tables = tempfile::tempdir().unwrap();
    let table = tables.path().join("deals");
    deals_table(&table, &["create", "--rows", "2000"]);

    let (serve, digests, topic) = served_pipeline(
        &table,
        &[(&gold, "gold-deals"), (&revised, "gold-deals-revised")],
        "shadow",
        Extra {
            source: "batch_rows = 250",
            ..Extra::default()
        },
    );
    let (gold_digest, revised_digest) = (&digests[0], &digests[1]);
    let name = topic.clone();
    let at = |path: &str| format!("/v1/tenants/acme/pipelines/{name}{path}");

    // gold-deals in its own shadow, while a writer appends, updates, deletes and merges.
    let (status, started) = post(
        &serve,
        &at("/shadow"),
        Some(serde_json::json!({ "module": gold_digest })),
    );
    assert_eq!(status, 200, "{started}");
    assert_eq!(started["phase"], "running");
    let writer_table = table.clone();
    let writer = std::thread::spawn(move || {
        deals_table(
            &writer_table,
            &[
                "appends",
                "--start",
                "2000",
                "--rows",
                "300",
                "--versions",
                "2",
            ],
        );
        for step in ["update", "delete", "merge"] {
            deals_table(&writer_table, &[step]);
        }
    });
    writer.join().unwrap();
    serve.wait_caught_up("acme", &name, 5, Duration::from_secs(120));
    let report = wait_for_shadow(&serve, &name, 5);
    let expected = by_row(&table, &gold, 1, 5);
    let records: u64 = expected.values().map(|r| r.len() as u64).sum();
    assert_eq!(report["phase"], "running", "{report}");
    assert_eq!(counts(&report, &topic), (records, 0, 0, 0), "{report}");
    assert_eq!(report["differences"], serde_json::json!([]));
    assert_eq!(report["skipped_batches"], 0);
    assert_eq!(report["failed_batches"], 0);
    assert_eq!(report["live_cost"]["records"], records);
    assert_eq!(report["candidate_cost"]["records"], records);

    // The revision in the shadow (replacing the first), over more appends and churn.
    let (status, started) = post(
        &serve,
        &at("/shadow"),
        Some(serde_json::json!({ "module": revised_digest, "differences": 1000 })),
    );
    assert_eq!(status, 200, "{started}");
    let writer_table = table.clone();
    let writer = std::thread::spawn(move || {
        deals_table(
            &writer_table,
            &[
                "appends",
                "--start",
                "2600",
                "--rows",
                "300",
                "--versions",
                "1",
            ],
        );
        deals_table(&writer_table, &["churn", "--rows", "2000"]);
    });
    writer.join().unwrap();
    serve.wait_caught_up("acme", &name, 9, Duration::from_secs(120));
    let report = wait_for_shadow(&serve, &name, 9);
    let (expected_counts, differing) = compare_previews(
        &by_row(&table, &gold, 6, 9),
        &by_row(&table, &revised, 6, 9),
    );
    assert!(
        expected_counts.1 > 0 && expected_counts.3 > 0,
        "the revision changes records and drops deletes: {expected_counts:?}"
    );
    assert_eq!(counts(&report, &topic), expected_counts, "{report}");
    let named: Vec<(u64, u64)> = report["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["version"].as_u64().unwrap(), d["row"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        named,
        differing[..differing.len().min(1000)],
        "the sample names the differing rows in table order"
    );
    let deleted = report["differences"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["kind"] == "missing")
        .expect("a dropped delete is among the differences");
    assert!(deleted["live"]["value"].is_null(), "a tombstone: {deleted}");
    assert!(deleted["candidate"].is_null(), "{deleted}");
    let renamed = report["differences"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["kind"] == "changed")
        .expect("a renamed field is among the differences");
    let candidate_value = renamed["candidate"]["value"].as_str().unwrap();
    assert!(
        candidate_value.contains("\"deal_title\"")
            && renamed["live"]["value"]
                .as_str()
                .unwrap()
                .contains("\"title\""),
        "{renamed}"
    );

    // The CLI shows the same report as a diff.
    let (ok, shown, stderr) = serve.cli("acme", &["pipeline", "shadow", "show", &name]);
    assert!(ok, "{stderr}");
    assert!(shown.contains("Shadow of gold-deals-revised"), "{shown}");
    assert!(
        shown.contains("+ value: {") && shown.contains("deal_title"),
        "{shown}"
    );

    // Promote under load: a normal swap at a boundary, nothing lost or repeated.
    let writer = appending_meanwhile(&table, 3000, 300, 4);
    let (status, promoted) = post(&serve, &at("/shadow/promote"), None);
    assert_eq!(status, 200, "{promoted}");
    assert_eq!(promoted["to"].as_str(), Some(revised_digest.as_str()));
    assert_eq!(promoted["outcome"], "switched", "{promoted}");
    writer.join().unwrap();
    serve.wait_caught_up("acme", &name, 13, Duration::from_secs(120));
    let (_, after) = serve.call("GET", &at("/shadow"), Some(serve.token("acme")), None);
    assert_eq!(after["phase"], "stopped");
    assert_eq!(after["reason"], "it was promoted");

    // The topic holds gold-deals' records before the boundary and the revision's after
    // it, each change row's once, in table order.
    let boundary = (
        promoted["position"]["version"].as_u64().unwrap(),
        promoted["position"]["row_offset"].as_u64().unwrap(),
    );
    let mut expected = Vec::new();
    for (at, records) in by_row(&table, &gold, 0, 13) {
        if at < boundary {
            expected.extend(records);
        }
    }
    for (at, records) in by_row(&table, &revised, 0, 13) {
        if at >= boundary {
            expected.extend(records);
        }
    }
    let delivered = consumed_key_values(&topic);
    assert_eq!(delivered.len(), expected.len());
    assert!(
        delivered == expected,
        "the live topic is not the live modules' records"
    );

    // Discarding forgets the shadow.
    let (status, _) = post(&serve, &at("/shadow/discard"), None);
    assert_eq!(status, 200);
    let (status, _) = serve.call("GET", &at("/shadow"), Some(serve.token("acme")), None);
    assert_eq!(status, 404);
}

#[test]
fn hostile_candidates_are_stopped_by_their_budgets_and_the_live_output_is_untouched() {
    let gold = transform_component("gold-deals");
    let hostile = transform_component("misbehaving/behaviors");
    let tables = tempfile::tempdir().unwrap();
    let kafka = format!("\"bootstrap.servers\" = \"{}\"", kafka_bootstrap());
    let serve = Serve::tenant("acme", &kafka);
    let gold_digest = serve.upload("acme", &gold, "gold-deals");
    let hostile_digest = serve.upload("acme", &hostile, "behaviors");
    // What stops each candidate: its deadline, its memory cap; a flood of logs is cut
    // to the log rate and stops nothing (the flooder then rejects the bad row, which
    // the `skip` policy passes over).
    for (behavior, stopped_by) in [
        ("loop", Some("deadline exceeded")),
        ("hog", Some("memory limit exceeded")),
        ("flood", None),
    ] {
        let table = tables.path().join(behavior);
        deals_table(&table, &["create", "--rows", "200"]);
        let name = unique_topic(&format!("shadow-{behavior}"));
        // gold-deals ignores the parameters the hostile module reads; one bad deal in
        // each of the versions written below.
        let params = format!(
            "behavior = \"{behavior}\"\nbad_ids = \"deal-0200,deal-0300,deal-0400,deal-0500\""
        );
        let transform = match stopped_by {
            Some(_) => "batch_timeout = \"300ms\"\nmemory_limit_mib = 64",
            None => "batch_timeout = \"300ms\"\nmemory_limit_mib = 64\non_error = \"skip\"",
        };
        let config = pipeline_config(
            &table,
            &name,
            None,
            Extra {
                transform,
                params: &params,
                ..Extra::default()
            },
        );
        serve.create("acme", &name, &config, &gold_digest);
        serve.wait_caught_up("acme", &name, 0, Duration::from_secs(60));
        let at = |path: &str| format!("/v1/tenants/acme/pipelines/{name}{path}");
        let (status, started) = post(
            &serve,
            &at("/shadow"),
            Some(serde_json::json!({ "module": hostile_digest })),
        );
        assert_eq!(status, 200, "{behavior}: {started}");
        deals_table(
            &table,
            &[
                "appends",
                "--start",
                "200",
                "--rows",
                "100",
                "--versions",
                "4",
            ],
        );
        let status = serve.wait_caught_up("acme", &name, 4, Duration::from_secs(120));
        assert_eq!(status["state"], "running", "{behavior}: {status}");
        let report = wait_for_shadow(&serve, &name, 4);
        match stopped_by {
            Some(error) => {
                assert_eq!(report["phase"], "stopped", "{behavior}: {report}");
                assert!(
                    report["reason"]
                        .as_str()
                        .unwrap()
                        .contains("failed 3 batches in a row"),
                    "{behavior}: {report}"
                );
                assert_eq!(report["failed_batches"], 3, "{behavior}: {report}");
                assert!(
                    report["errors"][0]["error"]
                        .as_str()
                        .unwrap()
                        .contains(error),
                    "{behavior}: the error names the budget: {report}"
                );
            }
            None => {
                assert_eq!(report["phase"], "running", "{behavior}: {report}");
                assert_eq!(report["failed_batches"], 0, "{behavior}: {report}");
                assert_eq!(
                    report["rejections"]["candidate_only"], 4,
                    "{behavior}: the bad row of each version: {report}"
                );
                let logged = serve.log().matches("flood message").count();
                assert!(
                    logged < 1_000,
                    "40,000 messages, {logged} logged past the log rate"
                );
                // Discarded while a writer appends: the live output stays whole.
                let writer = appending_meanwhile(&table, 600, 100, 4);
                let (status, discarded) = post(&serve, &at("/shadow/discard"), None);
                assert_eq!(status, 200, "{discarded}");
                writer.join().unwrap();
                serve.wait_caught_up("acme", &name, 8, Duration::from_secs(120));
            }
        }
        // The live topic: exactly gold-deals' records of every version, once.
        let latest = if stopped_by.is_some() { 4 } else { 8 };
        let expected: Vec<(String, String)> = by_row(&table, &gold, 0, latest)
            .into_values()
            .flatten()
            .collect();
        let delivered = consumed_key_values(&name);
        assert!(delivered == expected, "{behavior}: the live output changed");
    }
}

#[test]
fn a_stateful_shadow_counts_on_from_a_copy_and_never_writes_the_live_state() {
    let pipeline = CountingPipeline::start("shadow-state");
    let (serve, name) = (&pipeline.serve, &pipeline.name);

    // Green counts rows in state as blue does: from the copy, it must count the same.
    let (ok, out, err) = serve.cli(
        "acme",
        &[
            "pipeline",
            "deploy",
            name,
            "--module",
            &pipeline.green,
            "--shadow",
        ],
    );
    assert!(ok, "{err}");
    assert!(out.contains("Shadow of green"), "{out}");
    for start in [100, 150, 200] {
        pipeline.append(start, 50);
    }
    serve.wait_caught_up("acme", name, 3, Duration::from_secs(120));
    let report = wait_for_shadow(serve, name, 3);
    assert_eq!(report["phase"], "running", "{report}");
    let state = &report["state"];
    assert_eq!(state["copied_keys"], 1, "{report}");
    assert_eq!(state["keys"], 1, "{report}");
    let batches = report["batches"].as_u64().unwrap();
    assert!(batches >= 3, "{report}");
    assert_eq!(state["changes_equal"], batches, "{report}");
    assert_eq!(state["changes_differ"], 0, "{report}");
    // Every record differs only in its tag: the counts agree.
    let (equal, changed, added, missing) = counts(&report, name);
    assert_eq!((equal, added, missing), (0, 0, 0), "{report}");
    assert_eq!(changed, report["rows"].as_u64().unwrap(), "{report}");
    for difference in report["differences"].as_array().unwrap() {
        let header = |side: &str, header: &str| {
            difference[side]["headers"]
                .as_array()
                .unwrap()
                .iter()
                .find(|h| h[0] == header)
                .map(|h| h[1].clone())
        };
        assert_eq!(header("live", "count"), header("candidate", "count"));
        assert_eq!(header("candidate", "tag").unwrap(), "green");
    }
    let (ok, shown, err) = serve.cli("acme", &["pipeline", "shadow", "show", name]);
    assert!(ok, "{err}");
    assert!(
        shown.contains("State: the candidate works on a copy of 1 keys"),
        "{shown}"
    );

    // The live pipeline counted every row once, and its state is its own.
    assert_eq!(counted(name), (1..=250).collect::<Vec<_>>());
    let (ok, value, err) = serve.cli("acme", &["pipeline", "state", "get", name, "rows"]);
    assert!(ok, "{err}");
    assert_eq!(value, "250\n");
    let (status, discarded) = post(
        serve,
        &format!("/v1/tenants/acme/pipelines/{name}/shadow/discard"),
        None,
    );
    assert_eq!(status, 200, "{discarded}");
}

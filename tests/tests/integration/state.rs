//! Keyed state against a real broker, real tables and the account example: the open
//! deals per group it keeps equal the table's, through SIGKILLs at random moments while
//! a writer commits, and after the node's copy of the state is lost; a module growing
//! its state past the pipeline's limit stops with the state error. Under `sluice serve`,
//! a deploy keeps the state, a deploy with a reset empties it, and deleting the
//! pipeline deletes its changelog.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::producer::{BaseProducer, Producer};
use sluice_tests::service::{CountingPipeline, counted};
use sluice_tests::{
    Extra, PipelineFiles, consume_all, deals_table, kafka_bootstrap, preview_records,
    run_expecting_failure, run_to_latest, sluice_binary, spawn_sluice_logged, transform_component,
    unique_topic, wait_until_started,
};

const KILLS: usize = 30;

/// The compacted view of `topic`: each key's last value, tombstones removing it.
fn latest_by_key(topic: &str) -> BTreeMap<String, String> {
    let mut latest = BTreeMap::new();
    for record in consume_all(topic) {
        let key = record.key.expect("account records have keys");
        match record.value {
            Some(value) => latest.insert(key, value),
            None => latest.remove(&key),
        };
    }
    latest
}

/// What the example must show for `table`, computed without Sluice: the open deals
/// per stage in the table's latest snapshot as delta-rs reads it, as the example's
/// records (`{"account": stage, "open_deals": n}` keyed by the stage).
fn open_per_stage(table: &std::path::Path) -> BTreeMap<String, String> {
    let script = r#"
import json, os, sys
from collections import Counter
from deltalake import DeltaTable
deals = DeltaTable(sys.argv[1]).to_pyarrow_table(columns=["fullDocument"]).column(0).to_pylist()
print(json.dumps(Counter(d["stage"] for d in deals if d["status"] == "open")), flush=True)
# deltalake's runtime threads can abort the interpreter's exit ("terminate called
# without an active exception") after the answer is out: leave without that exit.
os._exit(0)
"#;
    let output = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(table)
        .output()
        .expect("python3 runs");
    assert!(output.status.success(), "{output:?}");
    let counts: BTreeMap<String, u64> = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        counts.len() > 1,
        "the scenario leaves deals open at one stage only: {counts:?}"
    );
    counts
        .into_iter()
        .map(|(stage, n)| {
            let record = format!(r#"{{"account":"{stage}","open_deals":{n}}}"#);
            (stage, record)
        })
        .collect()
}

#[test]
fn open_deals_per_group_stay_exact_through_kills_a_writer_and_a_lost_store() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("deals");
    deals_table(&table, &["create", "--rows", "2000"]);
    let module = transform_component("account-pipeline");
    let topic = unique_topic("open-deals");
    let state_dir = dir.path().join("state");
    let state = format!("dir = \"{}\"", state_dir.display());
    let files = PipelineFiles::new(
        &table,
        &module,
        &topic,
        &kafka_bootstrap(),
        Extra {
            source: "batch_rows = 150",
            params: r#"group_by = "fullDocument.stage""#,
            sink: "commit_rows = 300",
            state: Some(&state),
            ..Extra::default()
        },
    );
    // The writer commits appends, then the update, delete and merge, while the
    // pipeline is killed again and again.
    let writer_table = table.clone();
    let writer = std::thread::spawn(move || {
        for step in 0..10 {
            let start = (2000 + step * 300).to_string();
            deals_table(
                &writer_table,
                &["append", "--start", &start, "--rows", "300"],
            );
        }
        for step in ["update", "delete", "merge"] {
            deals_table(&writer_table, &[step]);
        }
    });
    let seed = std::env::var("SLUICE_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("state kill test: seed {seed} (replay with SLUICE_CRASH_SEED={seed})");
    let mut random = seed;
    let log = files.dir.path().join("sluice.log");
    for _ in 0..KILLS {
        let mut sluice = spawn_sluice_logged(&files.config, &log);
        wait_until_started(&mut sluice, &log);
        random ^= random << 13;
        random ^= random >> 7;
        random ^= random << 17;
        std::thread::sleep(Duration::from_millis(random % 700));
        sluice.kill().unwrap();
        sluice.wait().unwrap();
    }
    writer.join().unwrap();
    run_to_latest(&files.config);
    assert_eq!(latest_by_key(&topic), open_per_stage(&table));

    // The node loses its copy (a move to another node): the next run restores it from
    // the changelog alone and counts on from there.
    std::fs::remove_dir_all(&state_dir).unwrap();
    deals_table(&table, &["append", "--start", "5000", "--rows", "100"]);
    let output = run_to_latest(&files.config);
    assert!(
        output.contains("Restored the pipeline's state from its changelog."),
        "{output}"
    );
    assert_eq!(latest_by_key(&topic), open_per_stage(&table));

    // `sluice state` shows, reads and exports it, and resets it.
    let shown: serde_json::Value =
        serde_json::from_str(&state_cli(&files.config, &["show", "--json"])).unwrap();
    // An entry per open deal (5095 at one stage, 1 at the other) and a count per group.
    assert_eq!(shown["keys"], 5095 + 1 + 2, "{shown}");
    assert_eq!(
        state_cli(&files.config, &["get", "open/contractsent"]),
        "1\n"
    );
    let exported = state_cli(&files.config, &["export"]);
    let entries: Vec<serde_json::Value> = exported
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(entries.len(), 5098);
    assert!(
        entries.contains(&serde_json::json!({"key": "open/appointmentscheduled", "value": "5095"}))
    );
    let changelog = shown["changelog_topic"].as_str().unwrap().to_string();
    state_cli(&files.config, &["reset"]);
    assert!(!state_dir.exists());
    wait_until_deleted(&changelog, &|| String::new());
    deals_table(&table, &["append", "--start", "5100", "--rows", "100"]);
    run_to_latest(&files.config);
    let after_reset = &latest_by_key(&topic)["appointmentscheduled"];
    assert_eq!(
        after_reset,
        r#"{"account":"appointmentscheduled","open_deals":100}"#
    );
}

/// `sluice state <args> --config <config>`'s output; panics with its errors if it fails.
fn state_cli(config: &std::path::Path, args: &[&str]) -> String {
    let output = std::process::Command::new(sluice_binary())
        .arg("state")
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "sluice state {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The JavaScript, Python, Go and C examples count as the Rust one does, and each takes
/// over the state the one before wrote: the stored bytes are the same in every SDK.
#[test]
fn the_examples_in_every_language_count_alike_and_take_over_each_others_state() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("deals");
    deals_table(&table, &["create", "--rows", "2000"]);
    deals_table(&table, &["append", "--start", "2000", "--rows", "300"]);
    let rust = transform_component("account-pipeline");
    let js = transform_component("account-pipeline-js");
    let python = transform_component("account-pipeline-python");
    let go = transform_component("account-pipeline-go");
    let c = transform_component("account-pipeline-c");
    let pipeline = |module: &std::path::Path, topic: &str, state: &str| {
        PipelineFiles::new(
            &table,
            module,
            topic,
            &kafka_bootstrap(),
            Extra {
                source: "batch_rows = 150",
                params: r#"group_by = "fullDocument.stage""#,
                sink: "commit_rows = 300",
                state: Some(state),
                ..Extra::default()
            },
        )
    };
    let state_of = |name: &str| format!("dir = \"{}\"", dir.path().join(name).display());
    // Each language alone over the whole scenario.
    let alone: Vec<(String, PipelineFiles)> =
        [("js", &js), ("python", &python), ("go", &go), ("c", &c)]
            .into_iter()
            .map(|(language, module)| {
                let topic = unique_topic(&format!("open-deals-{language}"));
                let files = pipeline(module, &topic, &state_of(language));
                (topic, files)
            })
            .collect();
    // Rust, then JavaScript, then Python, then Go, then C on one pipeline (its
    // position and state).
    let mixed_topic = unique_topic("open-deals-mixed");
    let mixed = state_of("mixed");
    run_to_latest(&pipeline(&rust, &mixed_topic, &mixed).config);
    for step in ["update", "delete", "merge"] {
        deals_table(&table, &[step]);
    }
    run_to_latest(&pipeline(&js, &mixed_topic, &mixed).config);
    deals_table(&table, &["append", "--start", "2300", "--rows", "300"]);
    run_to_latest(&pipeline(&python, &mixed_topic, &mixed).config);
    deals_table(&table, &["append", "--start", "2600", "--rows", "300"]);
    run_to_latest(&pipeline(&go, &mixed_topic, &mixed).config);
    deals_table(&table, &["append", "--start", "2900", "--rows", "300"]);
    run_to_latest(&pipeline(&c, &mixed_topic, &mixed).config);
    let expected = open_per_stage(&table);
    for (topic, files) in &alone {
        run_to_latest(&files.config);
        assert_eq!(latest_by_key(topic), expected, "{topic}");
    }
    assert_eq!(latest_by_key(&mixed_topic), expected);
}

/// The stage-change filter emits a deal only when its stage moved: the MERGE that
/// rewrites deal 100 unchanged makes no record, and a delete makes a tombstone.
#[test]
fn the_stage_filter_emits_only_moves_of_stage() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("deals");
    deals_table(&table, &["create", "--rows", "200"]);
    for step in ["update", "delete", "merge"] {
        deals_table(&table, &[step]);
    }
    let topic = unique_topic("stage-changes");
    let state = format!("dir = \"{}\"", dir.path().join("state").display());
    let files = PipelineFiles::new(
        &table,
        &transform_component("stage-changes"),
        &topic,
        &kafka_bootstrap(),
        Extra {
            state: Some(&state),
            ..Extra::default()
        },
    );
    run_to_latest(&files.config);
    let records = consume_all(&topic);
    // 200 first stages, 2 deals won, 2 deleted, deal 1 moved by the merge.
    assert_eq!(records.len(), 200 + 2 + 2 + 1);
    let of = |deal: &str| -> Vec<Option<String>> {
        records
            .iter()
            .filter(|r| r.key.as_deref() == Some(deal))
            .map(|r| r.value.clone())
            .collect()
    };
    assert_eq!(
        of("deal-0100"),
        [Some(
            r#"{"deal":"deal-0100","to":"appointmentscheduled"}"#.to_string()
        )],
        "the unchanged merge made no record"
    );
    assert_eq!(
        of("deal-0001").last().cloned().flatten().as_deref(),
        Some(r#"{"deal":"deal-0001","from":"appointmentscheduled","to":"contractsent"}"#)
    );
    assert_eq!(
        of("deal-0005").last(),
        Some(&None),
        "a delete is a tombstone"
    );
    assert_eq!(latest_by_key(&topic).len(), 198);
}

/// A preview keeps state in memory from a seed file and writes what it ends with, in
/// the form `sluice state export` writes: a transform's state logic is tried offline.
#[test]
fn a_preview_starts_from_a_state_file_and_writes_the_state_it_ends_with() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("deals");
    deals_table(&table, &["create", "--rows", "100"]);
    let seed = dir.path().join("seed.jsonl");
    // 40 deals of another source are already open at the stage.
    std::fs::write(
        &seed,
        "{\"key\":\"open/appointmentscheduled\",\"value\":\"40\"}\n",
    )
    .unwrap();
    let after = dir.path().join("after.jsonl");
    let (seed_arg, after_arg) = (seed.display().to_string(), after.display().to_string());
    let records = preview_records(
        &table,
        &transform_component("account-pipeline"),
        &[
            "--param",
            "group_by=fullDocument.stage",
            "--state",
            &seed_arg,
            "--state-out",
            &after_arg,
        ],
    );
    let last = records.last().expect("the count is emitted");
    assert_eq!(
        last["value"], r#"{"account":"appointmentscheduled","open_deals":140}"#,
        "{last}"
    );
    let written = std::fs::read_to_string(&after).unwrap();
    assert!(
        written.contains(r#"{"key":"open/appointmentscheduled","value":"140"}"#),
        "{written}"
    );
    assert_eq!(
        written.lines().count(),
        101,
        "a key per open deal and the count"
    );
}

#[test]
fn a_module_growing_its_state_past_the_limit_stops_with_the_state_error() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("deals");
    deals_table(&table, &["create", "--rows", "200"]);
    let topic = unique_topic("state-limit");
    let state = format!(
        "dir = \"{}\"\nmax_keys = 50",
        dir.path().join("state").display()
    );
    let files = PipelineFiles::new(
        &table,
        &transform_component("account-pipeline"),
        &topic,
        &kafka_bootstrap(),
        Extra {
            state: Some(&state),
            ..Extra::default()
        },
    );
    let log = run_expecting_failure(&files.config);
    assert!(log.contains("state limit exceeded"), "{log}");
    assert!(log.contains("[state] max_keys"), "{log}");
    assert!(consume_all(&topic).is_empty());
}

#[test]
fn a_stateful_module_in_a_pipeline_without_state_is_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("deals");
    deals_table(&table, &["create", "--rows", "10"]);
    let files = PipelineFiles::new(
        &table,
        &transform_component("account-pipeline"),
        &unique_topic("stateless"),
        &kafka_bootstrap(),
        Extra::default(),
    );
    let log = run_expecting_failure(&files.config);
    assert!(log.contains("could not use state"), "{log}");
    assert!(log.contains("give the pipeline a [state] section"), "{log}");
}

/// Whether `topic` exists on the test broker (asked among all topics: asking for one
/// may create it).
fn topic_exists(topic: &str) -> bool {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", kafka_bootstrap())
        .create()
        .unwrap();
    let metadata = producer
        .client()
        .fetch_metadata(None, Duration::from_secs(10))
        .unwrap();
    metadata
        .topics()
        .iter()
        .any(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty())
}

/// Waits until `topic` is gone: Kafka deletes topics in the background.
fn wait_until_deleted(topic: &str, log: &dyn Fn() -> String) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while topic_exists(topic) {
        assert!(
            std::time::Instant::now() < deadline,
            "changelog topic {topic} was not deleted; log:\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The `count` header of each record of `topic`, in order.
#[test]
fn a_served_pipeline_keeps_its_state_through_a_deploy_and_a_reset_or_delete_removes_it() {
    let pipeline = CountingPipeline::start("served-state");
    let (serve, name, topic) = (&pipeline.serve, &pipeline.name, &pipeline.name);
    let (blue, green) = (&pipeline.blue, &pipeline.green);
    let status = serve.status("acme", name);
    let first_changelog = status["changelog_topic"].as_str().unwrap().to_string();
    assert_eq!(counted(topic), (1..=100).collect::<Vec<_>>());
    let deploy = |module: &str| {
        let (status, report) = serve.call(
            "POST",
            &format!("/v1/tenants/acme/pipelines/{name}/deploy"),
            Some(serve.token("acme")),
            Some(serde_json::json!({ "module": module })),
        );
        assert_eq!(status, 200, "{report}");
        report
    };
    let append = |start: u64| pipeline.append(start, 50);

    // Kept: green counts on from blue's count.
    assert_eq!(deploy(green)["outcome"], "switched");
    append(100);
    serve.wait_caught_up("acme", name, 1, Duration::from_secs(120));
    assert_eq!(counted(topic), (1..=150).collect::<Vec<_>>());

    // Read from the command line, through the API, from the store the pipeline holds.
    let state_cli = |args: &[&str]| {
        let args = [&["pipeline", "state"], args].concat();
        let (ok, out, err) = serve.cli("acme", &args);
        assert!(ok, "sluice pipeline state {args:?} failed: {err}");
        out
    };
    assert_eq!(state_cli(&["get", name, "rows"]), "150\n");
    assert_eq!(
        state_cli(&["export", name]),
        "{\"key\":\"rows\",\"value\":\"150\"}\n"
    );
    let shown: serde_json::Value = serde_json::from_str(&state_cli(&["show", name])).unwrap();
    assert_eq!(
        shown["changelog_topic"],
        first_changelog.as_str(),
        "{shown}"
    );
    assert_eq!(shown["keys"], 1, "{shown}");
    let (ok, _, err) = serve.cli("acme", &["pipeline", "state", "get", name, "nope"]);
    assert!(!ok && err.contains("404") && err.contains("nope"), "{err}");

    // Reset: blue starts from nothing in a new changelog; the old one is deleted.
    let (ok, out, err) = serve.cli(
        "acme",
        &[
            "pipeline",
            "deploy",
            name,
            "--module",
            blue,
            "--reset-state",
        ],
    );
    assert!(ok, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["outcome"], "restarted", "{report}");
    eprintln!(
        "a deploy with a state reset held the pipeline for {} ms",
        report["pause_ms"]
    );
    wait_until_deleted(&first_changelog, &|| serve.log());
    append(150);
    let status = serve.wait_caught_up("acme", name, 2, Duration::from_secs(120));
    let changelog = status["changelog_topic"].as_str().unwrap().to_string();
    assert_ne!(changelog, first_changelog);
    let after_reset: Vec<u64> = counted(topic)[150..].to_vec();
    assert_eq!(after_reset, (1..=50).collect::<Vec<_>>());
    let last = consume_all(&changelog)
        .pop()
        .expect("the new changelog has the count");
    assert_eq!(last.value.as_deref(), Some("50"));

    // A reset alone, with the module kept.
    let report: serde_json::Value = serde_json::from_str(&state_cli(&["reset", name])).unwrap();
    assert_eq!(report["outcome"], "restarted", "{report}");
    wait_until_deleted(&changelog, &|| serve.log());
    append(200);
    let status = serve.wait_caught_up("acme", name, 3, Duration::from_secs(120));
    let changelog = status["changelog_topic"].as_str().unwrap().to_string();
    assert_eq!(counted(topic)[200..], (1..=50).collect::<Vec<_>>());
    assert_eq!(state_cli(&["get", name, "rows"]), "50\n");

    // Deleted with the pipeline.
    let (status, body) = serve.call(
        "DELETE",
        &format!("/v1/tenants/acme/pipelines/{name}"),
        Some(serve.token("acme")),
        None,
    );
    assert_eq!(status, 204, "{body}");
    wait_until_deleted(&changelog, &|| serve.log());
}

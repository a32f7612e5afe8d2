//! Replays under `sluice serve`, against a real broker, real tables and real
//! components: versions 3..7 sent again through another module into a topic of their
//! own equal `sluice preview` of that range, while the pipeline itself carries on; so
//! does a range named by commit times; a replay whose service is SIGKILLed 10 times
//! finishes with exactly the same records; in a cluster, a replay whose node is
//! SIGKILLed finishes on the other node with exactly the same records.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_tests::service::{Serve, TenantSpec, cluster_lines, pipeline_config};
use sluice_tests::{
    Extra, consumed_key_values, deals_table, kafka_bootstrap, preview_records, transform_component,
    unique_topic,
};

/// The key and value `sluice preview` shows of `module` on versions `from..=to`, in
/// order, as text.
fn previewed(table: &Path, module: &Path, from: u64, to: u64) -> Vec<(String, String)> {
    let (from, to) = (from.to_string(), to.to_string());
    preview_records(table, module, &["--from", &from, "--to", &to])
        .iter()
        .map(|record| {
            let text = |v: &Value| v.as_str().map_or("<none>".to_string(), str::to_string);
            (text(&record["key"]), text(&record["value"]))
        })
        .collect()
}

/// Writes `table`'s versions 0 to 4: 500 deals, then four appends of 10,000.
fn deals_versions_0_to_4(table: &Path) {
    deals_table(table, &["create", "--rows", "500"]);
    deals_table(
        table,
        &[
            "appends",
            "--start",
            "500",
            "--rows",
            "10000",
            "--versions",
            "4",
        ],
    );
}

/// Starts a replay of `name` and returns the replay pipeline's name.
fn replay(serve: &Serve, name: &str, body: Value) -> String {
    let (status, created) = serve.call(
        "POST",
        &format!("/v1/tenants/acme/pipelines/{name}/replays"),
        Some(serve.token("acme")),
        Some(body),
    );
    assert_eq!(status, 201, "{created}");
    created["name"].as_str().unwrap().to_string()
}

fn wait_finished(serve: &Serve, name: &str) -> Value {
    serve.wait_for("acme", name, Duration::from_secs(180), |s| {
        assert_ne!(s["state"], "failed", "{s}");
        s["state"] == "finished"
    })
}

#[test]
fn a_replay_sends_its_range_through_its_module_and_survives_kills() {
    let gold = transform_component("gold-deals");
    let revised = transform_component("gold-deals-revised");
    let tables = tempfile::tempdir().unwrap();
    let table = tables.path().join("deals");
    deals_versions_0_to_4(&table);
    for step in ["update", "delete", "merge"] {
        deals_table(&table, &[step]);
    }

    let kafka = format!("\"bootstrap.servers\" = \"{}\"", kafka_bootstrap());
    let mut serve = Serve::tenant("acme", &kafka);
    let gold_digest = serve.upload("acme", &gold, "gold-deals");
    let revised_digest = serve.upload("acme", &revised, "gold-deals-revised");
    let topic = unique_topic("replayed-live");
    // Small batches and transactions, so the replay below is still running at every
    // kill.
    let config = pipeline_config(
        &table,
        &topic,
        None,
        Extra {
            source: "batch_rows = 100",
            sink: "commit_rows = 100",
            ..Extra::default()
        },
    );
    let name = topic.clone();
    serve.create("acme", &name, &config, &gold_digest);
    serve.wait_caught_up("acme", &name, 7, Duration::from_secs(120));

    // Versions 3..7 through the revision, while the pipeline follows on.
    let replayed = unique_topic("replayed");
    let first = replay(
        &serve,
        &name,
        serde_json::json!({
            "from_version": 3, "to_version": 7, "topic": replayed, "module": revised_digest,
        }),
    );
    assert_eq!(first, format!("{name}-replay-3-7"));
    deals_table(&table, &["append", "--start", "50000", "--rows", "10"]);
    let finished = wait_finished(&serve, &first);
    assert_eq!(finished["position"]["version"], 8, "{finished}");
    assert_eq!(
        consumed_key_values(&replayed),
        previewed(&table, &revised, 3, 7)
    );
    // The pipeline itself carried on through the new version, its records its own.
    serve.wait_caught_up("acme", &name, 8, Duration::from_secs(60));
    assert_eq!(consumed_key_values(&topic), previewed(&table, &gold, 0, 8));

    // A refused replay names what to do.
    let (status, refused) = serve.call(
        "POST",
        &format!("/v1/tenants/acme/pipelines/{name}/replays"),
        Some(serve.token("acme")),
        Some(serde_json::json!({ "from_version": 1, "to_version": 2, "topic": topic })),
    );
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("a topic of its own"),
        "{refused}"
    );

    // A range by commit time, from the command line: the times of versions 5 and 7
    // (the log files' modification times, as the table has no in-commit times; each
    // was written by a process of its own, so no other version shares its time).
    let committed = |version: u64| {
        let log = table.join(format!("_delta_log/{version:020}.json"));
        let time = std::fs::metadata(log).unwrap().modified().unwrap();
        humantime::format_rfc3339_millis(time).to_string()
    };
    let by_time = unique_topic("replayed-by-time");
    let (ok, out, err) = serve.cli(
        "acme",
        &[
            "pipeline",
            "replay",
            &name,
            "--from-timestamp",
            &committed(5),
            "--to-timestamp",
            &committed(7),
            "--topic",
            &by_time,
            "--module",
            &revised_digest,
            "--name",
            &unique_topic("by-time"),
            "--wait",
        ],
    );
    assert!(ok, "{err}");
    assert!(
        err.contains("of 7,"),
        "the progress names the last version: {err}"
    );
    let status: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(status["ending_version"], 7, "{status}");
    assert_eq!(
        consumed_key_values(&by_time),
        previewed(&table, &revised, 5, 7)
    );

    // Versions 1..8 again, the service SIGKILLed 10 times while the replay runs.
    let again = unique_topic("replayed-killed");
    // Unique per run: positions outlive the test in the broker.
    let killed = unique_topic("killed-replay");
    let second = replay(
        &serve,
        &name,
        serde_json::json!({
            "from_version": 1, "to_version": 8, "topic": again, "name": killed,
        }),
    );
    assert_eq!(second, killed);
    let mut kills = 0;
    let started = Instant::now();
    while kills < 10 {
        std::thread::sleep(Duration::from_millis(100 + 50 * (kills % 4)));
        let status = serve.status("acme", &second);
        assert_ne!(
            status["state"], "finished",
            "the replay ended before kill {kills}"
        );
        serve.kill();
        kills += 1;
        serve.restart();
        assert!(started.elapsed() < Duration::from_secs(300));
    }
    wait_finished(&serve, &second);
    assert_eq!(consumed_key_values(&again), previewed(&table, &gold, 1, 8));
}

#[test]
fn a_replay_in_a_cluster_finishes_on_another_node_when_its_node_is_killed() {
    let gold = transform_component("gold-deals");
    let tables = tempfile::tempdir().unwrap();
    let table = tables.path().join("deals");
    deals_versions_0_to_4(&table);
    let bootstrap = kafka_bootstrap();
    let server = cluster_lines(&unique_topic("replay-cluster"), 12, &bootstrap);
    let kafka = format!("\"bootstrap.servers\" = \"{bootstrap}\"");
    let tenants = [TenantSpec {
        name: "acme",
        limits: "",
        kafka: &kafka,
    }];
    let mut nodes: Vec<Serve> = (0..2)
        .map(|_| Serve::start(&tenants, &server, ""))
        .collect();
    let digest = nodes[0].upload("acme", &gold, "gold-deals");
    let name = unique_topic("cluster-replayed-live");
    // Small transactions, so the replay is still running when its node is killed.
    let config = pipeline_config(
        &table,
        &name,
        None,
        Extra {
            source: "batch_rows = 100",
            sink: "commit_rows = 100",
            ..Extra::default()
        },
    );
    nodes[0].create("acme", &name, &config, &digest);
    nodes[0].wait_caught_up("acme", &name, 4, Duration::from_secs(120));

    let topic = unique_topic("cluster-replayed");
    let replayed = replay(
        &nodes[1],
        &name,
        serde_json::json!({
            "from_version": 1, "to_version": 4, "topic": topic,
            "name": unique_topic("cluster-replay"),
        }),
    );
    // Killed on whichever node runs it, once it has delivered something.
    let key = format!("acme/{replayed}");
    let deadline = Instant::now() + Duration::from_secs(120);
    let runner = loop {
        let runner = nodes.iter().position(|node| node.running().contains(&key));
        if let Some(runner) = runner {
            let status = nodes[runner].status("acme", &replayed);
            if status["counters"]["rows_in"].as_u64() > Some(0) {
                assert_ne!(
                    status["state"], "finished",
                    "the replay ended before the kill"
                );
                break runner;
            }
        }
        assert!(Instant::now() < deadline, "the replay was not placed");
        std::thread::sleep(Duration::from_millis(50));
    };
    nodes[runner].kill();
    let killed = Instant::now();
    let survivor = &nodes[1 - runner];
    wait_finished(survivor, &replayed);
    eprintln!(
        "the replay finished on the surviving node {:.1} s after its node was killed",
        killed.elapsed().as_secs_f64()
    );
    assert_eq!(consumed_key_values(&topic), previewed(&table, &gold, 1, 4));
}

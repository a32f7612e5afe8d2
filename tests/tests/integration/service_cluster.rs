//! Three `sluice serve` nodes as one cluster on a real broker: pipelines of two tenants
//! created through different nodes spread over the nodes; when a node that runs some is
//! killed (SIGKILL) while the tables receive commits, its pipelines resume on the others,
//! and every change row reaches Kafka exactly once.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_tests::service::{Serve, TenantSpec, pipeline_config};
use sluice_tests::{
    Extra, consume_all, deals_table, kafka_bootstrap, transform_component, unique_topic,
};

const PIPELINES: usize = 6;
const TENANTS: [&str; 2] = ["acme", "globex"];

/// The pipelines (as `tenant/name`) a node says it runs.
fn running_on(node: &Serve) -> BTreeSet<String> {
    let (status, view) = node.call("GET", "/v1/cluster", Some(&node.operator), None);
    assert_eq!(status, 200, "the node describes its part: {view}");
    view["running"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect()
}

/// Waits until every topic holds `expected` records; returns how long that took.
fn wait_records(topics: &[String], expected: usize, nodes: &[&Serve]) -> Duration {
    let started = Instant::now();
    for topic in topics {
        loop {
            let count = consume_all(topic).len();
            if count >= expected {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(180),
                "topic {topic} has {count} of {expected} records after 3 minutes; logs:\n{}",
                nodes
                    .iter()
                    .map(|n| n.log())
                    .collect::<Vec<_>>()
                    .join("\n----\n")
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    started.elapsed()
}

#[test]
fn pipelines_spread_over_nodes_and_move_when_a_node_is_killed() {
    let passthrough = transform_component("passthrough");
    let dir = tempfile::tempdir().unwrap();
    let tables: Vec<PathBuf> = (0..PIPELINES)
        .map(|i| dir.path().join(format!("deals{i}")))
        .collect();
    for table in &tables {
        deals_table(table, &["create", "--rows", "40"]);
    }
    let bootstrap = kafka_bootstrap();
    let cluster = unique_topic("cluster");
    let server = format!(
        "[cluster]\nname = \"{cluster}\"\nslots = 12\n[cluster.kafka]\n\"bootstrap.servers\" = \"{bootstrap}\"\n"
    );
    let kafka = format!("\"bootstrap.servers\" = \"{bootstrap}\"");
    let tenants: Vec<TenantSpec<'_>> = TENANTS
        .iter()
        .map(|name| TenantSpec {
            name,
            limits: "max_pipelines = 10",
            kafka: &kafka,
        })
        .collect();
    let mut nodes: Vec<Serve> = (0..3)
        .map(|_| Serve::start(&tenants, &server, ""))
        .collect();

    // A module uploaded through one node is every node's.
    let digest = nodes[0].upload("acme", &passthrough, "passthrough");
    assert_eq!(
        nodes[1].upload("globex", &passthrough, "passthrough"),
        digest
    );
    let topics: Vec<String> = (0..PIPELINES)
        .map(|i| unique_topic(&format!("cl{i}")))
        .collect();
    let pipelines: Vec<(&str, String)> = (0..PIPELINES)
        .map(|i| {
            (
                TENANTS[i % 2],
                format!("p{i}-{}", cluster.rsplit('-').next().unwrap()),
            )
        })
        .collect();
    for (i, (tenant, name)) in pipelines.iter().enumerate() {
        let config = pipeline_config(
            &tables[i],
            &topics[i],
            None,
            Extra {
                transform: "memory_limit_mib = 32",
                ..Extra::default()
            },
        );
        // Through a different node each time.
        nodes[i % 3].create(tenant, name, &config, &digest);
    }
    let everyone: Vec<&Serve> = nodes.iter().collect();
    wait_records(&topics, 40, &everyone);

    // Each pipeline runs on exactly one node.
    let all: BTreeSet<String> = pipelines.iter().map(|(t, n)| format!("{t}/{n}")).collect();
    let placed: Vec<BTreeSet<String>> = nodes.iter().map(running_on).collect();
    for pipeline in &all {
        let owners = placed.iter().filter(|p| p.contains(pipeline)).count();
        assert_eq!(owners, 1, "{pipeline} runs on one node: {placed:?}");
    }
    let victim = (0..3)
        .max_by_key(|&i| placed[i].len())
        .expect("three nodes");
    let moved = placed[victim].clone();
    eprintln!("placement: {placed:?}; killing node {victim}, which runs {moved:?}");

    // Under load: a commit before the kill, one after.
    for table in &tables {
        deals_table(table, &["append", "--start", "40", "--rows", "40"]);
    }
    nodes[victim].kill();
    let killed = Instant::now();
    for table in &tables {
        deals_table(table, &["append", "--start", "80", "--rows", "40"]);
    }
    let survivors: Vec<&Serve> = nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != victim)
        .map(|(_, n)| n)
        .collect();
    wait_records(&topics, 120, &survivors);
    eprintln!(
        "every table delivered through version 2 {:.1} s after the kill",
        killed.elapsed().as_secs_f64()
    );
    let now_placed: BTreeSet<String> = survivors.iter().flat_map(|n| running_on(n)).collect();
    assert_eq!(now_placed, all, "the survivors run every pipeline");

    for (i, topic) in topics.iter().enumerate() {
        let records = consume_all(topic);
        assert_eq!(records.len(), 120, "pipeline {i}: every change row once");
        let values: BTreeSet<Option<String>> = records.iter().map(|r| r.value.clone()).collect();
        assert_eq!(values.len(), 120, "pipeline {i}: no row repeated");
    }
    // A status read through any node shows the pipeline.
    let (tenant, name) = &pipelines[0];
    let status: Value = survivors[0].status(tenant, name);
    assert_eq!(status["state"], "running");

    // A deploy through the node that does not run the pipeline: the node that runs it
    // switches at a batch boundary, and the next commit's records are the new module's.
    let pipeline = format!("{tenant}/{name}");
    let (runner, other): (Vec<&Serve>, Vec<&Serve>) = survivors
        .iter()
        .partition(|node| running_on(node).contains(&pipeline));
    let (runner, other) = (runner[0], other[0]);
    let green = other.upload(tenant, &transform_component("tagged/green"), "green");
    let (code, report) = other.call(
        "POST",
        &format!("/v1/tenants/{tenant}/pipelines/{name}/deploy"),
        Some(other.token(tenant)),
        Some(serde_json::json!({ "module": green })),
    );
    assert_eq!(code, 200, "the deploy is accepted: {report}");
    assert_eq!(report["outcome"], "stored", "{report}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !runner
        .log()
        .lines()
        .any(|line| line.contains("Switched the pipeline to a new module") && line.contains(&green))
    {
        assert!(
            Instant::now() < deadline,
            "the running node did not switch within a minute:\n{}",
            runner.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    deals_table(&tables[0], &["append", "--start", "120", "--rows", "40"]);
    wait_records(&topics[..1], 160, &survivors);
    let records = consume_all(&topics[0]);
    assert_eq!(
        records.len(),
        160,
        "every change row once across the switch"
    );
    let tagged =
        |r: &sluice_tests::Consumed| r.headers.iter().any(|(k, v)| k == "tag" && v == "green");
    assert!(
        records[..120].iter().all(|r| !tagged(r)),
        "the old module made the first 120"
    );
    assert!(
        records[120..].iter().all(tagged),
        "the new module made the last 40"
    );

    // The node running the pipeline freezes past the session timeout: the other node
    // takes its pipelines over, fencing it. Woken, it finds its slots lost and drops its
    // copies; nothing is produced twice.
    runner.signal("STOP");
    for table in &tables {
        deals_table(table, &["append", "--start", "160", "--rows", "40"]);
    }
    wait_records(&topics[1..], 160, &[other]);
    wait_records(&topics[..1], 200, &[other]);
    runner.signal("CONT");
    for table in &tables {
        deals_table(table, &["append", "--start", "200", "--rows", "40"]);
    }
    wait_records(&topics[1..], 200, &survivors);
    wait_records(&topics[..1], 240, &survivors);
    // Time for a woken zombie to produce what it would.
    std::thread::sleep(Duration::from_secs(5));
    for (i, topic) in topics.iter().enumerate() {
        let expected = if i == 0 { 240 } else { 200 };
        let records = consume_all(topic);
        let values: BTreeSet<Option<String>> = records.iter().map(|r| r.value.clone()).collect();
        assert_eq!(
            (records.len(), values.len()),
            (expected, expected),
            "pipeline {i}: every change row once after a frozen node woke"
        );
    }
    // The woken node's fenced copy was not taken for a failure of the pipeline.
    assert_eq!(other.status(tenant, name)["state"], "running");
    for node in nodes.iter_mut() {
        if node.is_running() {
            assert!(node.stop(), "a node stops cleanly:\n{}", node.log());
        }
    }
}

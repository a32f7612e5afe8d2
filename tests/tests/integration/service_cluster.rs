//! Three `sluice serve` nodes as one cluster on a real broker: pipelines of two tenants
//! created through different nodes spread over the nodes; when a node that runs some is
//! killed (SIGKILL) while the tables receive commits, its pipelines resume on the others,
//! and every change row reaches Kafka exactly once.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_tests::hostile;
use sluice_tests::service::{Serve, TenantSpec, pipeline_config};
use sluice_tests::{
    Extra, consume_all, deals_table, kafka_bootstrap, transform_component, unique_topic,
};

const PIPELINES: usize = 6;
const TENANTS: [&str; 2] = ["acme", "globex"];

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

/// The `count` header of each record, in order.
fn counts(records: &[sluice_tests::Consumed]) -> Vec<u64> {
    records
        .iter()
        .map(|r| {
            let (_, count) = r
                .headers
                .iter()
                .find(|(k, _)| k == "count")
                .expect("a count");
            count.parse().unwrap()
        })
        .collect()
}

/// How many module switches `node` logged that name `digest` (switched from or to).
fn switches(node: &Serve, digest: &str) -> usize {
    node.log()
        .lines()
        .filter(|l| l.contains("Switched the pipeline to a new module") && l.contains(digest))
        .count()
}

/// Waits until `node` logged a switch naming `digest` beyond the `before` it had.
fn wait_switched(node: &Serve, digest: &str, before: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while switches(node, digest) == before {
        assert!(
            Instant::now() < deadline,
            "the running node did not switch within a minute:\n{}",
            node.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn pipelines_spread_over_nodes_and_move_when_a_node_is_killed() {
    // Stateful: each record says how many rows its pipeline counted in its keyed state,
    // so a pipeline that moves shows whether its state came along exactly once.
    let blue = transform_component("tagged/blue");
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
    let digest = nodes[0].upload("acme", &blue, "blue");
    assert_eq!(nodes[1].upload("globex", &blue, "blue"), digest);
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
                params: r#"count = "true""#,
                ..Extra::default()
            },
        ) + "\n[state]\n";
        // Through a different node each time.
        nodes[i % 3].create(tenant, name, &config, &digest);
    }
    let everyone: Vec<&Serve> = nodes.iter().collect();
    wait_records(&topics, 40, &everyone);

    // A compile bomb uploaded through one node: refused there, recorded once in the
    // shared state, so every node shows it refused and none compiles it again.
    let bomb = hostile::nested_loops(250_000);
    let (status, body) = nodes[2].upload_bytes("acme", "bomb", bomb.clone());
    assert_eq!(status, 422, "{body}");
    for node in &nodes {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (status, refused) = node.call(
                "GET",
                "/v1/tenants/acme/modules/refused",
                Some(node.token("acme")),
                None,
            );
            assert_eq!(status, 200, "{refused}");
            if refused
                .as_array()
                .is_some_and(|r| r.iter().any(|m| m["name"] == "bomb"))
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "a node does not show the refusal: {refused}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let (status, body) = nodes[0].upload_bytes("acme", "bomb", bomb);
    assert_eq!(status, 422, "{body}");
    assert!(body.to_string().contains("refused before"), "{body}");
    assert!(nodes.iter_mut().all(Serve::is_running), "every node is up");

    // Each pipeline runs on exactly one node.
    let all: BTreeSet<String> = pipelines.iter().map(|(t, n)| format!("{t}/{n}")).collect();
    let placed: Vec<BTreeSet<String>> = nodes.iter().map(Serve::running).collect();
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
    let now_placed: BTreeSet<String> = survivors.iter().flat_map(|n| n.running()).collect();
    assert_eq!(now_placed, all, "the survivors run every pipeline");

    for (i, topic) in topics.iter().enumerate() {
        let records = consume_all(topic);
        assert_eq!(records.len(), 120, "pipeline {i}: every change row once");
        let values: BTreeSet<Option<String>> = records.iter().map(|r| r.value.clone()).collect();
        assert_eq!(values.len(), 120, "pipeline {i}: no row repeated");
        assert_eq!(
            counts(&records),
            (1..=120).collect::<Vec<_>>(),
            "pipeline {i}: its state counted every row once, across the move"
        );
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
        .partition(|node| node.running().contains(&pipeline));
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
    wait_switched(runner, &green, 0);
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
    assert_eq!(
        counts(&records),
        (1..=160).collect::<Vec<_>>(),
        "the new module counted on from the old one's state"
    );
    // Its logs, asked of the node that does not run it, are relayed from the one that does.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, logs) = other.call(
            "GET",
            &format!("/v1/tenants/{tenant}/pipelines/{name}/logs"),
            Some(other.token(tenant)),
            None,
        );
        assert_eq!(code, 200, "{logs}");
        if logs.to_string().contains("green got") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the logs were not relayed: {logs}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // So is its state, which only the node that runs it holds open.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, value) = other.call(
            "GET",
            &format!("/v1/tenants/{tenant}/pipelines/{name}/state/value?key=rows"),
            Some(other.token(tenant)),
            None,
        );
        assert_eq!(code, 200, "the state read is relayed: {value}");
        if value == serde_json::json!({"key": "rows", "value": "160"}) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the relayed state does not reach the 160 rows counted: {value}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }

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

    // A rollback through the node that does not run the pipeline: the node that does
    // switches back at a boundary, and the next commit's records are the old module's.
    let (runner, other): (Vec<&Serve>, Vec<&Serve>) = survivors
        .iter()
        .partition(|node| node.running().contains(&pipeline));
    let (runner, other) = (runner[0], other[0]);
    let before = switches(runner, &digest);
    let (code, report) = other.call(
        "POST",
        &format!("/v1/tenants/{tenant}/pipelines/{name}/rollback"),
        Some(other.token(tenant)),
        None,
    );
    assert_eq!(code, 200, "the rollback is accepted: {report}");
    wait_switched(runner, &digest, before);
    deals_table(&tables[0], &["append", "--start", "240", "--rows", "40"]);
    wait_records(&topics[..1], 280, &survivors);
    let records = consume_all(&topics[0]);
    assert_eq!(
        records.len(),
        280,
        "every change row once across the rollback"
    );
    assert!(
        records[240..].iter().all(|r| !tagged(r)),
        "the old module made the last 40"
    );
    assert_eq!(other.status(tenant, name)["module"]["digest"], digest);
    for node in nodes.iter_mut() {
        if node.is_running() {
            assert!(node.stop(), "a node stops cleanly:\n{}", node.log());
        }
    }
}

const SCALE_TENANTS: [&str; 5] = ["ant", "bee", "cod", "doe", "elk"];
const SCALE_TABLES: usize = 6;

/// Puts `tenant` through `node` with the operator's token; returns the tenant's token.
fn put_tenant(node: &Serve, tenant: &str, kafka: &str) -> String {
    use sha2::Digest as _;
    let token = format!("{tenant}-{}-api-token", std::process::id());
    let digest: String = sha2::Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let (status, body) = node.call(
        "PUT",
        &format!("/v1/tenants/{tenant}"),
        Some(&node.operator),
        Some(serde_json::json!({
            "token_sha256": digest,
            "max_pipelines": 10,
            "kafka": { "bootstrap.servers": kafka },
        })),
    );
    assert_eq!(status, 200, "putting tenant {tenant}: {body}");
    token
}

/// The deal id in a record's JSON value.
fn deal_id(value: Option<&str>) -> u64 {
    let value = value.expect("a value");
    let at = value.find("\"hubspot_deal_id\":\"").expect("a deal id") + 19;
    value[at..]
        .split('"')
        .next()
        .and_then(|id| id.parse().ok())
        .expect("a numeric deal id")
}

/// How many times `node` started pipeline `tenant/name`.
fn starts(node: &Serve, tenant: &str, name: &str) -> usize {
    let id = format!("{tenant}.{name}");
    node.log()
        .lines()
        .filter(|l| l.contains("Pipeline started.") && l.contains(&id))
        .count()
}

/// Every node answers a status call for `pipeline` with the node that runs it.
fn wait_reported(nodes: &[&Serve], tenant: &str, name: &str, runner: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for node in nodes {
        loop {
            let status = node.status(tenant, name);
            if status["node"] == runner {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{tenant}/{name} is not reported as run by {runner}: {status:#}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

#[test]
fn thirty_pipelines_of_api_tenants_survive_a_joining_node_and_a_rolling_restart() {
    let passthrough = transform_component("passthrough");
    let dir = tempfile::tempdir().unwrap();
    let tables: Vec<PathBuf> = (0..SCALE_TABLES)
        .map(|i| dir.path().join(format!("deals{i}")))
        .collect();
    for table in &tables {
        deals_table(table, &["create", "--rows", "20"]);
    }
    let bootstrap = kafka_bootstrap();
    let cluster = unique_topic("scale");
    let server = format!(
        "[cluster]\nname = \"{cluster}\"\nslots = 24\n[cluster.kafka]\n\"bootstrap.servers\" = \"{bootstrap}\"\n"
    );
    let mut nodes: Vec<Serve> = (0..3).map(|_| Serve::start(&[], &server, "")).collect();

    // Five tenants put through the API, each through another node; every node knows
    // every tenant's token.
    let mut tokens = Vec::new();
    for (i, tenant) in SCALE_TENANTS.iter().enumerate() {
        tokens.push(put_tenant(&nodes[i % 3], tenant, &bootstrap));
    }
    for node in nodes.iter_mut() {
        for (tenant, token) in SCALE_TENANTS.iter().zip(&tokens) {
            node.tokens.insert(tenant.to_string(), token.clone());
        }
    }
    let mut pipelines: Vec<(&str, String, usize)> = Vec::new();
    for (t, tenant) in SCALE_TENANTS.iter().enumerate() {
        let digest = nodes[(t + 1) % 3].upload(tenant, &passthrough, "passthrough");
        for (table, path) in tables.iter().enumerate() {
            let name = format!("p{table}-{}", cluster.rsplit('-').next().unwrap());
            pipelines.push((tenant, name, table));
            let i = pipelines.len() - 1;
            let config = pipeline_config(
                path,
                &format!("{cluster}-{tenant}-{table}"),
                None,
                Extra {
                    transform: "memory_limit_mib = 32",
                    ..Extra::default()
                },
            );
            nodes[i % 3].create(tenant, &pipelines[i].1, &config, &digest);
        }
    }
    let topics: Vec<String> = pipelines
        .iter()
        .map(|(tenant, _, table)| format!("{cluster}-{tenant}-{table}"))
        .collect();
    let everyone: Vec<&Serve> = nodes.iter().collect();
    wait_records(&topics, 20, &everyone);

    // Every node runs some; each pipeline runs on exactly one; any node says which.
    let placed: Vec<BTreeSet<String>> = nodes.iter().map(Serve::running).collect();
    assert!(
        placed.iter().all(|p| !p.is_empty()),
        "every node runs some: {placed:?}"
    );
    let node_names: Vec<String> = nodes
        .iter()
        .map(|n| {
            n.call("GET", "/v1/cluster", Some(&n.operator), None).1["node"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    for (tenant, name, _) in &pipelines {
        let id = format!("{tenant}/{name}");
        let owners: Vec<usize> = (0..3).filter(|&i| placed[i].contains(&id)).collect();
        assert_eq!(owners.len(), 1, "{id} runs on one node: {placed:?}");
        wait_reported(&everyone, tenant, name, &node_names[owners[0]]);
    }

    // A fourth node joins while the tables receive commits: only the pipelines whose
    // slots move to it stop and start again.
    let starts_before: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| pipelines.iter().map(|(t, p, _)| starts(n, t, p)).collect())
        .collect();
    for table in &tables {
        deals_table(table, &["append", "--start", "20", "--rows", "20"]);
    }
    let mut fourth = Serve::start(&[], &server, "");
    fourth.tokens = nodes[0].tokens.clone();
    for table in &tables {
        deals_table(table, &["append", "--start", "40", "--rows", "20"]);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while fourth.running().is_empty() {
        assert!(Instant::now() < deadline, "the fourth node got no slots");
        std::thread::sleep(Duration::from_millis(500));
    }
    let all_four: Vec<&Serve> = nodes.iter().chain([&fourth]).collect();
    wait_records(&topics, 60, &all_four);
    let moved = fourth.running();
    for (n, node) in nodes.iter().enumerate() {
        let now = node.running();
        assert!(
            now.is_subset(&placed[n]),
            "node {n} took no pipeline from another old node: {now:?} vs {:?}",
            placed[n]
        );
        for (i, (tenant, name, _)) in pipelines.iter().enumerate() {
            if now.contains(&format!("{tenant}/{name}")) {
                assert_eq!(
                    starts(node, tenant, name),
                    starts_before[n][i],
                    "{tenant}/{name} did not move and was not restarted"
                );
            }
        }
    }
    eprintln!("the fourth node took {} pipelines: {moved:?}", moved.len());

    // Rolling restart of every node, one by one, while the tables receive commits; the
    // other nodes answer the API throughout.
    let mut start = 60;
    let mut all: Vec<Serve> = nodes.into_iter().chain([fourth]).collect();
    for restarting in 0..all.len() {
        for table in &tables {
            deals_table(
                table,
                &["append", "--start", &start.to_string(), "--rows", "20"],
            );
        }
        start += 20;
        assert!(all[restarting].stop(), "node {restarting} stops cleanly");
        let asked = &all[(restarting + 1) % all.len()];
        let (tenant, name, _) = &pipelines[restarting];
        let (status, body) = asked.call(
            "GET",
            &format!("/v1/tenants/{tenant}/pipelines"),
            Some(asked.token(tenant)),
            None,
        );
        assert_eq!(
            status, 200,
            "the API answers while node {restarting} is down: {body}"
        );
        assert!(body.as_array().unwrap().iter().any(|p| p["name"] == *name));
        all[restarting].restart();
    }
    let everyone: Vec<&Serve> = all.iter().collect();
    wait_records(&topics, start, &everyone);
    // Time for anything produced twice to show.
    std::thread::sleep(Duration::from_secs(3));
    for (i, topic) in topics.iter().enumerate() {
        let records = consume_all(topic);
        let values: Vec<Option<String>> = records.iter().map(|r| r.value.clone()).collect();
        let distinct: BTreeSet<&Option<String>> = values.iter().collect();
        assert_eq!(
            (values.len(), distinct.len()),
            (start, start),
            "pipeline {i}: every change row exactly once"
        );
        // Same order as the table: the deals come in the order of their ids.
        let ids: Vec<u64> = values.iter().map(|v| deal_id(v.as_deref())).collect();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "pipeline {i}: in table order: {ids:?}"
        );
    }
    for node in all.iter_mut() {
        assert!(node.stop(), "a node stops cleanly:\n{}", node.log());
    }
}

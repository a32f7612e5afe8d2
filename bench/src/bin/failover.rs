//! Failover and rebalance pauses of a `sluice serve` cluster, under load.
//!
//! Each run starts three nodes of a new cluster on the local broker, creates the
//! pipelines (each on one of four small tables, a topic of its own) through the nodes in
//! turn, and keeps committing to the tables from a thread of its own. Then:
//! - **failover**: the node running the most pipelines is killed (SIGKILL);
//! - **join**: a fourth node joins, and the group moves some slots to it.
//!
//! For each event and pipeline: the longest delay from a Delta commit made during the
//! event to its record's production (the record's Kafka timestamp minus its
//! `sluice.commit_timestamp` header), for the pipelines that moved and, as the
//! baseline, those that did not.
//!
//! Every run checks that every table row reached its topic exactly once. Prints a
//! Markdown report (also written to `--out FILE` when given). Needs the local broker
//! (`scripts/kafka.sh start`) and a built `sluice` (`cargo build --release -p sluice`).
//!
//! Usage: `cargo run --release -p sluice-bench --bin failover -- [PIPELINES] [RUNS] [--out FILE]`
//! (default 12 pipelines, 3 runs).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use sluice_tests::service::{Serve, TenantSpec, cluster_lines, pipeline_config};
use sluice_tests::{Extra, consume_timed, deals_table, transform_component, unique_topic};

const TABLES: usize = 4;
/// Rows each commit of the load thread appends.
const ROWS_PER_COMMIT: usize = 5;

/// What one run measured, in seconds.
#[derive(Default)]
struct Measured {
    kill_moved: Vec<f64>,
    kill_stayed: Vec<f64>,
    join_moved: Vec<f64>,
    join_stayed: Vec<f64>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Appends to the tables in turn until stopped; returns the rows each table got.
fn load(tables: Vec<PathBuf>, start: usize, stop: Arc<AtomicBool>) -> Vec<usize> {
    let mut rows = vec![start; tables.len()];
    while !stop.load(Ordering::Relaxed) {
        for (table, rows) in tables.iter().zip(rows.iter_mut()) {
            let (from, count) = (rows.to_string(), ROWS_PER_COMMIT.to_string());
            deals_table(table, &["append", "--start", &from, "--rows", &count]);
            *rows += ROWS_PER_COMMIT;
        }
    }
    rows
}

/// Waits until each topic holds its count of records.
fn wait_records(bootstrap: &str, topics: &[(String, usize)]) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(180);
    for (topic, expected) in topics {
        while consume_timed(bootstrap, topic).len() < *expected {
            if Instant::now() > deadline {
                bail!("{topic} did not get its {expected} records within 3 minutes");
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    Ok(())
}

fn one_run(pipelines: usize, bootstrap: &str) -> anyhow::Result<Measured> {
    let module = transform_component("passthrough");
    let work = tempfile::tempdir()?;
    let tables: Vec<PathBuf> = (0..TABLES)
        .map(|i| work.path().join(format!("deals{i}")))
        .collect();
    for table in &tables {
        deals_table(table, &["create", "--rows", "20"]);
    }
    let cluster = unique_topic("failover");
    let server = cluster_lines(&cluster, 24, bootstrap);
    let kafka = format!("\"bootstrap.servers\" = \"{bootstrap}\"");
    let tenant = [TenantSpec {
        name: "bench",
        limits: &format!("max_pipelines = {pipelines}"),
        kafka: &kafka,
    }];
    let mut nodes: Vec<Serve> = (0..3).map(|_| Serve::start(&tenant, &server, "")).collect();
    let digest = nodes[0].upload("bench", &module, "passthrough");
    let mut names = Vec::new();
    for i in 0..pipelines {
        // Positions outlive a run in the broker: names are unique per run.
        let name = format!("p{i}-{}", cluster.rsplit('-').next().unwrap_or_default());
        let topic = format!("{cluster}-{i}");
        let config = pipeline_config(
            &tables[i % TABLES],
            &topic,
            None,
            Extra {
                transform: "memory_limit_mib = 32",
                sink: "change_headers = true",
                ..Extra::default()
            },
        );
        nodes[i % 3].create("bench", &name, &config, &digest);
        names.push((name, topic, i % TABLES));
    }
    let counts = |rows: &[usize]| -> Vec<(String, usize)> {
        names
            .iter()
            .map(|(_, topic, table)| (topic.clone(), rows[*table]))
            .collect()
    };
    wait_records(bootstrap, &counts(&[20; TABLES])).with_context(|| {
        format!(
            "the first pipeline's status: {}",
            nodes[0].status("bench", &names[0].0)
        )
    })?;
    let placed: Vec<BTreeSet<String>> = nodes.iter().map(Serve::running).collect();
    let victim = (0..3)
        .max_by_key(|&i| placed[i].len())
        .context("three nodes")?;

    let stop = Arc::new(AtomicBool::new(false));
    let loader = {
        let (tables, stop) = (tables.clone(), stop.clone());
        std::thread::spawn(move || load(tables, 20, stop))
    };
    std::thread::sleep(Duration::from_secs(3));
    let killed = now_ms();
    nodes[victim].kill();
    // Commits keep coming while the survivors take the victim's pipelines over.
    std::thread::sleep(Duration::from_secs(20));
    let recovered = now_ms();

    let joined = now_ms();
    let fourth = Serve::start(&tenant, &server, "");
    let deadline = Instant::now() + Duration::from_secs(60);
    while fourth.running().is_empty() {
        if Instant::now() > deadline {
            bail!("the fourth node got no pipelines within a minute");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    std::thread::sleep(Duration::from_secs(10));
    let moved = fourth.running();
    let settled = now_ms();
    stop.store(true, Ordering::Relaxed);
    let rows = loader
        .join()
        .map_err(|_| anyhow::anyhow!("the load thread panicked"))?;
    wait_records(bootstrap, &counts(&rows))?;
    let mut measured = Measured::default();
    for (name, topic, table) in &names {
        let records = consume_timed(bootstrap, topic);
        let distinct: BTreeSet<&Option<String>> = records.iter().map(|(_, r)| &r.value).collect();
        if records.len() != rows[*table] || distinct.len() != rows[*table] {
            bail!(
                "pipeline {name} delivered {} records ({} distinct) of {} rows",
                records.len(),
                distinct.len(),
                rows[*table]
            );
        }
        // (when the table committed the row, how long until its record was produced)
        let delays: Vec<(i64, i64)> = records
            .iter()
            .map(|(produced, record)| {
                let committed = record
                    .headers
                    .iter()
                    .find(|(key, _)| key == "sluice.commit_timestamp")
                    .and_then(|(_, micros)| micros.parse::<i64>().ok())
                    .map_or(0, |micros| micros / 1000);
                (committed, produced - committed)
            })
            .collect();
        let longest = |from: i64, to: i64| {
            delays
                .iter()
                .filter(|(committed, _)| (from..=to).contains(committed))
                .map(|(_, delay)| *delay as f64 / 1000.0)
                .fold(0.0, f64::max)
        };
        let id = format!("bench/{name}");
        let kill = longest(killed - 2_000, recovered);
        match placed[victim].contains(&id) {
            true => measured.kill_moved.push(kill),
            false => measured.kill_stayed.push(kill),
        }
        let join = longest(joined, settled);
        match moved.contains(&id) {
            true => measured.join_moved.push(join),
            false => measured.join_stayed.push(join),
        }
    }
    for node in nodes.iter_mut() {
        if node.is_running() {
            node.stop();
        }
    }
    Ok(measured)
}

/// `p50 / max` of `values`, in seconds.
fn summary(values: &mut [f64]) -> String {
    if values.is_empty() {
        return "-".into();
    }
    values.sort_by(f64::total_cmp);
    format!(
        "{:.1} / {:.1} ({} pipelines)",
        values[values.len() / 2],
        values[values.len() - 1],
        values.len()
    )
}

fn main() -> anyhow::Result<()> {
    let mut positional = Vec::new();
    let mut out = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--out" => out = Some(args.next().context("--out needs a file")?),
            _ => positional.push(arg),
        }
    }
    let pipelines: usize = positional.first().map_or(Ok(12), |a| a.parse())?;
    let runs: usize = positional.get(1).map_or(Ok(3), |a| a.parse())?;
    let bootstrap = std::env::var("SLUICE_TEST_KAFKA").unwrap_or_else(|_| "127.0.0.1:19092".into());
    // SAFETY: set before any other thread starts.
    unsafe { std::env::set_var("SLUICE_TEST_KAFKA", &bootstrap) };
    let mut all = Measured::default();
    for run in 0..runs {
        let started = Instant::now();
        let measured = one_run(pipelines, &bootstrap)?;
        eprintln!(
            "run {}: {:.0} s; kill: moved {:?}, join: moved {:?}",
            run + 1,
            started.elapsed().as_secs_f64(),
            measured.kill_moved,
            measured.join_moved
        );
        all.kill_moved.extend(measured.kill_moved);
        all.kill_stayed.extend(measured.kill_stayed);
        all.join_moved.extend(measured.join_moved);
        all.join_stayed.extend(measured.join_stayed);
    }
    let report = format!(
        "# Cluster failover and rebalance pauses\n\n\
         Three `sluice serve` nodes (`session_timeout = \"6s\"`, 24 slots) on one local broker, \
         {pipelines} exactly-once pipelines (passthrough, `poll_interval = \"100ms\"`) over {TABLES} \
         tables receiving a commit of {ROWS_PER_COMMIT} rows every few hundred milliseconds; {runs} runs. \
         Every run checks that every row reached its topic exactly once. Seconds as p50 / max over \
         the pipelines of all runs. Command: `cargo run --release -p sluice-bench --bin failover -- {pipelines} {runs}`.\n\n\
         | event | pipelines that moved | pipelines that stayed |\n\
         | --- | --- | --- |\n\
         | a node killed (SIGKILL): longest delay from a Delta commit to its record, for commits from 2 s before the kill to 20 s after | {} | {} |\n\
         | a fourth node joins: longest delay from a Delta commit to its record, for commits while it joined | {} | {} |\n",
        summary(&mut all.kill_moved),
        summary(&mut all.kill_stayed),
        summary(&mut all.join_moved),
        summary(&mut all.join_stayed),
    );
    print!("{report}");
    if let Some(out) = out {
        std::fs::write(&out, &report).with_context(|| format!("cannot write {out}"))?;
    }
    Ok(())
}

//! Density: the resident memory of `sluice serve` hosting many idle pipelines.
//!
//! Starts `sluice serve` (the binary next to this one's target directory, built with
//! `cargo build -p sluice`) on a temporary state directory, uploads `passthrough`,
//! creates pipelines in steps on one small table until `PIPELINES` run, waits at each
//! step until every pipeline has caught up and has been idle long enough to release its
//! Kafka producer (`release_producer_after`, 30 s by default), and prints the service's
//! resident memory and thread count. Needs the local broker (`scripts/kafka.sh start`).
//!
//! Usage: `cargo run -p sluice-bench --bin density -- [PIPELINES] [BOOTSTRAP]`
//! (default `1000 127.0.0.1:19092`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::Value;

struct Service {
    child: Child,
    url: String,
    token: String,
    agent: ureq::Agent,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Service {
    fn get(&self, path: &str) -> anyhow::Result<Value> {
        let text = self
            .agent
            .get(format!("{}{path}", self.url))
            .header("Authorization", &self.token)
            .call()?
            .into_body()
            .read_to_string()?;
        Ok(serde_json::from_str(&text)?)
    }

    /// (resident MiB, threads) of the service process.
    fn footprint(&self) -> anyhow::Result<(f64, u64)> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let field = |name: &str| -> anyhow::Result<u64> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .with_context(|| format!("no {name} in /proc status"))
        };
        Ok((field("VmRSS:")? as f64 / 1024.0, field("Threads:")?))
    }
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let pipelines: usize = args.next().map_or(Ok(1000), |a| a.parse())?;
    let bootstrap = args.next().unwrap_or_else(|| "127.0.0.1:19092".into());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("bench/ has a parent")?;
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let sluice = target.join("debug/sluice");
    if !sluice.exists() {
        bail!(
            "{} is missing: run `cargo build -p sluice` first",
            sluice.display()
        );
    }
    let module = sluice_build::build_transform(
        &root.join("transforms/passthrough"),
        &sluice_build::BuildOptions::new(target.join("guests"), target.join("guests/components")),
    )?
    .component;
    let work = tempfile::tempdir()?;
    let table = work.path().join("deals");
    let made = Command::new("python3")
        .arg(root.join("scripts/deals_table.py"))
        .arg(&table)
        .args(["create", "--rows", "10"])
        .status()?;
    if !made.success() {
        bail!("writing the table failed");
    }
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    std::fs::write(work.path().join("operator.token"), "density-operator-token")?;
    std::fs::write(work.path().join("bench.token"), "density-tenant-token")?;
    std::fs::write(
        work.path().join("serve.toml"),
        format!(
            "[server]\nlisten = \"127.0.0.1:{port}\"\nstate_dir = \"state\"\noperator_token_file = \"operator.token\"\n\n[limits]\nmax_pipelines = {pipelines}\nmax_memory_mib = {}\n\n[tenants.bench]\ntoken_file = \"bench.token\"\nmax_pipelines = {pipelines}\n[tenants.bench.kafka]\n\"bootstrap.servers\" = \"{bootstrap}\"\n",
            pipelines * 64
        ),
    )?;
    let log = std::fs::File::create(work.path().join("serve.log"))?;
    let child = Command::new(&sluice)
        .args(["serve", "--config"])
        .arg(work.path().join("serve.toml"))
        .env("SLUICE_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()?;
    let service = Service {
        child,
        url: format!("http://127.0.0.1:{port}/v1/tenants/bench"),
        token: "Bearer density-tenant-token".into(),
        agent: ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into(),
    };
    let ready = Instant::now();
    while service
        .agent
        .get(format!("http://127.0.0.1:{port}/readyz"))
        .call()
        .is_err()
    {
        if ready.elapsed() > Duration::from_secs(60) {
            bail!("sluice serve did not start");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let bytes = std::fs::read(&module)?;
    let uploaded: Value = serde_json::from_str(
        &service
            .agent
            .post(format!("{}/modules", service.url))
            .query("name", "passthrough")
            .header("Authorization", &service.token)
            .send(&bytes[..])?
            .into_body()
            .read_to_string()?,
    )?;
    let digest = uploaded["digest"]
        .as_str()
        .context("no digest")?
        .to_string();
    let config = format!(
        "[source]\ntable = \"{}\"\npoll_interval = \"1s\"\nmax_poll_interval = \"30s\"\n[transform]\nmemory_limit_mib = 64\n[sink]\ntopic = \"density-{run}\"\ndelivery = \"at-least-once\"\n",
        table.display()
    );

    println!("sluice serve with idle pipelines (passthrough, one 10-row table, at-least-once)");
    println!(
        "{:>10} {:>12} {:>14} {:>9} {:>12}",
        "pipelines", "RSS MiB", "KiB/pipeline", "threads", "create s"
    );
    let (base, threads) = service.footprint()?;
    println!(
        "{:>10} {base:>12.1} {:>14} {threads:>9} {:>12}",
        0, "-", "-"
    );
    let mut created = 0;
    for step in [10, 100, 250, 500, 750, 1000, 2000, 5000]
        .into_iter()
        .filter(|&s| s <= pipelines)
        .chain([pipelines])
    {
        if step <= created {
            continue;
        }
        let started = Instant::now();
        for i in created..step {
            let response = service
                .agent
                .put(format!("{}/pipelines/p{i}-{run}", service.url))
                .header("Authorization", &service.token)
                .header("Content-Type", "application/json")
                .send(serde_json::json!({ "config": config, "module": digest }).to_string())?;
            if response.status() != 201 {
                bail!(
                    "creating pipeline {i} failed: {}",
                    response.into_body().read_to_string()?
                );
            }
        }
        created = step;
        // Idle: every pipeline delivered the table and waits for commits.
        loop {
            let statuses = service.get("/pipelines")?;
            let list = statuses.as_array().context("a list")?;
            if let Some(failed) = list.iter().find(|s| s["state"] == "failed") {
                bail!("a pipeline failed: {failed}");
            }
            if list
                .iter()
                .filter(|s| s["position"]["version"] == 1)
                .count()
                == created
            {
                break;
            }
            if started.elapsed() > Duration::from_secs(1800) {
                bail!("the pipelines did not catch up");
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        let seconds = started.elapsed().as_secs_f64();
        // Idle for longer than `release_producer_after` (30 s by default): the
        // pipelines have released their Kafka producers.
        std::thread::sleep(Duration::from_secs(35));
        let (rss, threads) = service.footprint()?;
        println!(
            "{created:>10} {rss:>12.1} {:>14.0} {threads:>9} {seconds:>12.1}",
            (rss - base) * 1024.0 / created as f64
        );
    }
    Ok(())
}

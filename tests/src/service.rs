//! A `sluice serve` process for tests: its config, tokens and state in a temporary
//! directory, and a small client for its admin API.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::sluice_binary;

/// A tenant of a test service.
pub struct TenantSpec<'a> {
    /// Its name.
    pub name: &'a str,
    /// Extra TOML lines for `[tenants.<name>]` (limits), before its Kafka table.
    pub limits: &'a str,
    /// TOML lines for `[tenants.<name>.kafka]`.
    pub kafka: &'a str,
}

/// A running (or stopped) `sluice serve`.
pub struct Serve {
    /// Holds the config, tokens, state directory and log.
    pub dir: tempfile::TempDir,
    /// The API's base URL.
    pub url: String,
    /// The operator's token.
    pub operator: String,
    /// Each tenant's token.
    pub tokens: BTreeMap<String, String>,
    child: Option<Child>,
    log_index: usize,
    agent: ureq::Agent,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl Serve {
    /// Runs the `sluice` admin command line against this service as `tenant`: whether
    /// it succeeded, its stdout and its stderr.
    pub fn cli(&self, tenant: &str, args: &[&str]) -> (bool, String, String) {
        let out = Command::new(sluice_binary())
            .args(args)
            .env("SLUICE_SERVER", &self.url)
            .env("SLUICE_TENANT", tenant)
            .env("SLUICE_TOKEN", self.token(tenant))
            .output()
            .expect("sluice runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Writes the config for `tenants` (plus `server` lines for `[server]` and `limits`
    /// for `[limits]`) and starts the service.
    pub fn start(tenants: &[TenantSpec<'_>], server: &str, limits: &str) -> Serve {
        let mut serve = Serve::configure(tenants, server, limits);
        serve.restart();
        serve
    }

    /// Writes the config as [`Serve::start`] does without starting the service, so that
    /// several can be started at the same moment ([`Serve::launch`]).
    pub fn configure(tenants: &[TenantSpec<'_>], server: &str, limits: &str) -> Serve {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let port = free_port();
        let operator = format!("operator-{}-token", std::process::id());
        std::fs::write(dir.path().join("operator.token"), &operator).unwrap();
        let mut config = format!(
            "[server]\nlisten = \"127.0.0.1:{port}\"\nstate_dir = \"state\"\noperator_token_file = \"operator.token\"\n{server}\n\n[limits]\n{limits}\n"
        );
        let mut tokens = BTreeMap::new();
        for tenant in tenants {
            let token = format!("{}-{}-secret-token", tenant.name, std::process::id());
            let file = format!("{}.token", tenant.name);
            std::fs::write(dir.path().join(&file), &token).unwrap();
            tokens.insert(tenant.name.to_string(), token);
            config.push_str(&format!(
                "\n[tenants.{name}]\ntoken_file = \"{file}\"\n{limits}\n[tenants.{name}.kafka]\n{kafka}\n",
                name = tenant.name,
                limits = tenant.limits,
                kafka = tenant.kafka,
            ));
        }
        std::fs::write(dir.path().join("serve.toml"), config).unwrap();
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(180)))
            .build()
            .into();
        Serve {
            dir,
            url: format!("http://127.0.0.1:{port}"),
            operator,
            tokens,
            child: None,
            log_index: 0,
            agent,
        }
    }

    /// Starts a service with one tenant, `name`, with these `[tenants.<name>.kafka]` lines
    /// and nothing else set.
    pub fn tenant(name: &str, kafka: &str) -> Serve {
        Serve::start(
            &[TenantSpec {
                name,
                limits: "",
                kafka,
            }],
            "",
            "",
        )
    }

    /// The service's config file.
    pub fn config(&self) -> PathBuf {
        self.dir.path().join("serve.toml")
    }

    /// Every log the service wrote, across restarts.
    pub fn log(&self) -> String {
        (0..=self.log_index)
            .filter_map(|i| std::fs::read_to_string(self.log_path(i)).ok())
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn log_path(&self, index: usize) -> PathBuf {
        self.dir.path().join(format!("serve-{index}.log"))
    }

    /// Starts the service (again) and waits until it is ready.
    pub fn restart(&mut self) {
        self.launch();
        self.wait_ready();
    }

    /// Starts the service (again) without waiting for it.
    pub fn launch(&mut self) {
        assert!(self.child.is_none(), "the service is already running");
        if self.log_path(self.log_index).exists() {
            self.log_index += 1;
        }
        let log = std::fs::File::create(self.log_path(self.log_index)).unwrap();
        let child = Command::new(sluice_binary())
            .args(["serve", "--config"])
            .arg(self.config())
            .env("SLUICE_LOG", "info,delta_kernel=warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("sluice serve starts");
        self.child = Some(child);
    }

    /// Waits until the service started by [`Serve::launch`] is ready.
    pub fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(response) = self.agent.get(format!("{}/readyz", self.url)).call()
                && response.status() == 200
            {
                return;
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
                panic!("sluice serve exited with {status}:\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "sluice serve was not ready in time:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops the service with SIGTERM and waits for it; returns whether it exited 0.
    pub fn stop(&mut self) -> bool {
        let mut child = self.child.take().expect("the service is running");
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success());
        child.wait().expect("sluice serve exits").success()
    }

    /// Kills the service with SIGKILL, as a lost machine would stop it.
    pub fn kill(&mut self) {
        let mut child = self.child.take().expect("the service is running");
        child.kill().expect("the service can be killed");
        let _ = child.wait();
    }

    /// Sends the service a signal (`STOP` freezes it, `CONT` wakes it).
    pub fn signal(&self, signal: &str) {
        let child = self.child.as_ref().expect("the service is running");
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(child.id().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// The service's peak resident set size so far, in bytes (`VmHWM`).
    pub fn peak_rss(&self) -> Option<u64> {
        crate::vm_hwm(self.child.as_ref()?.id())
    }

    /// Whether the process is still alive.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }

    /// Calls the API: `(status, JSON body or the text as a string)`.
    pub fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let url = format!("{}{path}", self.url);
        let auth = token.map(|t| format!("Bearer {t}"));
        macro_rules! with_auth {
            ($request:expr) => {{
                let request = $request;
                match &auth {
                    Some(auth) => request.header("Authorization", auth),
                    None => request,
                }
            }};
        }
        let response = match (method, body) {
            ("GET", _) => with_auth!(self.agent.get(&url)).call(),
            ("DELETE", _) => with_auth!(self.agent.delete(&url)).call(),
            ("PUT", Some(body)) => with_auth!(self.agent.put(&url))
                .header("Content-Type", "application/json")
                .send(body.to_string()),
            ("POST", Some(body)) => with_auth!(self.agent.post(&url))
                .header("Content-Type", "application/json")
                .send(body.to_string()),
            ("POST", None) => with_auth!(self.agent.post(&url)).send_empty(),
            other => panic!("unsupported call {other:?}"),
        }
        .unwrap_or_else(|e| panic!("{method} {path} failed: {e}"));
        let status = response.status().as_u16();
        let text = response.into_body().read_to_string().unwrap_or_default();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    /// `GET /v1/cluster`: the node's name, slots and the pipelines it runs.
    pub fn cluster_view(&self) -> Value {
        let (status, view) = self.call("GET", "/v1/cluster", Some(&self.operator), None);
        assert_eq!(status, 200, "the node describes its part: {view}");
        view
    }

    /// The pipelines (as `tenant/name`) the node says it runs.
    pub fn running(&self) -> std::collections::BTreeSet<String> {
        self.cluster_view()["running"]
            .as_array()
            .expect("a list of pipelines")
            .iter()
            .filter_map(|p| p.as_str().map(str::to_string))
            .collect()
    }

    /// The token of `tenant`.
    pub fn token(&self, tenant: &str) -> &str {
        &self.tokens[tenant]
    }

    /// Uploads a module for `tenant`; returns its digest.
    pub fn upload(&self, tenant: &str, module: &Path, name: &str) -> String {
        let bytes = std::fs::read(module).expect("the module exists");
        let (status, entry) = self.upload_bytes(tenant, name, bytes);
        assert_eq!(status, 201, "uploading {name} failed: {entry}");
        entry["digest"].as_str().unwrap().to_string()
    }

    /// Uploads `bytes` as module `name` of `tenant`: `(status, JSON body or the text)`.
    pub fn upload_bytes(&self, tenant: &str, name: &str, bytes: Vec<u8>) -> (u16, Value) {
        let response = self
            .agent
            .post(format!("{}/v1/tenants/{tenant}/modules", self.url))
            .query("name", name)
            .header("Authorization", &format!("Bearer {}", self.token(tenant)))
            .send(&bytes[..])
            .expect("the upload is answered");
        let status = response.status().as_u16();
        let text = response.into_body().read_to_string().unwrap();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    /// Creates a pipeline for `tenant`; panics unless it is created.
    pub fn create(&self, tenant: &str, name: &str, config: &str, module: &str) -> Value {
        let (status, body) = self.call(
            "PUT",
            &format!("/v1/tenants/{tenant}/pipelines/{name}"),
            Some(self.token(tenant)),
            Some(serde_json::json!({ "config": config, "module": module })),
        );
        assert_eq!(status, 201, "creating {name} failed: {body}");
        body
    }

    /// A pipeline's status, as the operator sees it.
    pub fn status(&self, tenant: &str, name: &str) -> Value {
        let (status, body) = self.call(
            "GET",
            &format!("/v1/tenants/{tenant}/pipelines/{name}"),
            Some(&self.operator),
            None,
        );
        assert_eq!(status, 200, "status of {name}: {body}");
        body
    }

    /// Waits until `done` holds for the pipeline's status; returns that status.
    pub fn wait_for(
        &self,
        tenant: &str,
        name: &str,
        timeout: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.status(tenant, name);
            if done(&status) {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "pipeline {tenant}/{name} did not get there in time; its status: {status:#}\nservice log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits until the pipeline delivered every version up to `latest`.
    pub fn wait_caught_up(
        &self,
        tenant: &str,
        name: &str,
        latest: u64,
        timeout: Duration,
    ) -> Value {
        self.wait_for(tenant, name, timeout, |s| {
            s["position"]["version"].as_u64() == Some(latest + 1)
                && s["position"]["row_offset"].as_u64() == Some(0)
        })
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `[cluster]` lines for [`Serve::start`]'s `server`: a node of cluster `name` with
/// `slots` slots, its state on the brokers at `bootstrap`.
pub fn cluster_lines(name: &str, slots: u32, bootstrap: &str) -> String {
    format!(
        "[cluster]\nname = \"{name}\"\nslots = {slots}\n[cluster.kafka]\n\"bootstrap.servers\" = \"{bootstrap}\"\n"
    )
}

/// A pipeline config for the service: `[source]` on `table`, `[sink]` to `topic`, with
/// extra TOML lines per section.
pub fn pipeline_config(
    table: &Path,
    topic: &str,
    bootstrap: Option<&str>,
    extra: crate::Extra<'_>,
) -> String {
    let kafka = bootstrap.map_or_else(String::new, |b| {
        format!("\"bootstrap.servers\" = \"{b}\"\n")
    });
    format!(
        r#"[source]
table = "{table}"
poll_interval = "100ms"
{source}

[transform]
{transform}

[transform.params]
{params}

[sink]
topic = "{topic}"
connect_timeout = "10s"
{sink}

[sink.kafka]
{kafka}{extra_kafka}
"#,
        table = table.display(),
        source = extra.source,
        transform = extra.transform,
        params = extra.params,
        sink = extra.sink,
        extra_kafka = extra.kafka,
    )
}

/// A service with tenant `acme`, the tagged `blue` and `green` fixtures uploaded, and a
/// pipeline of blue counting rows in keyed state (`count = "true"`, `[state]`) over a
/// new table of 100 deals, caught up with version 0. The pipeline is named as its topic.
pub struct CountingPipeline {
    /// The service.
    pub serve: Serve,
    /// The table.
    pub table: PathBuf,
    /// Digest of blue, which the pipeline runs.
    pub blue: String,
    /// Digest of green.
    pub green: String,
    /// The pipeline's name and topic.
    pub name: String,
    _tables: tempfile::TempDir,
}

impl CountingPipeline {
    /// Starts it, with a topic named after `prefix`.
    pub fn start(prefix: &str) -> CountingPipeline {
        let tables = tempfile::tempdir().unwrap();
        let table = tables.path().join("deals");
        crate::deals_table(&table, &["create", "--rows", "100"]);
        let kafka = format!("\"bootstrap.servers\" = \"{}\"", crate::kafka_bootstrap());
        let serve = Serve::tenant("acme", &kafka);
        let blue = serve.upload("acme", &crate::transform_component("tagged/blue"), "blue");
        let green = serve.upload("acme", &crate::transform_component("tagged/green"), "green");
        let name = crate::unique_topic(prefix);
        let config = pipeline_config(
            &table,
            &name,
            None,
            crate::Extra {
                params: r#"count = "true""#,
                ..crate::Extra::default()
            },
        ) + "\n[state]\n";
        serve.create("acme", &name, &config, &blue);
        serve.wait_caught_up("acme", &name, 0, Duration::from_secs(120));
        CountingPipeline {
            serve,
            table,
            blue,
            green,
            name,
            _tables: tables,
        }
    }

    /// Appends `rows` deals from `start` to the table, in a version of their own.
    pub fn append(&self, start: u64, rows: u64) {
        let (start, rows) = (start.to_string(), rows.to_string());
        crate::deals_table(&self.table, &["append", "--start", &start, "--rows", &rows]);
    }
}

/// The `count` header of each record on `topic`, in order: the counts the tagged
/// fixtures kept in state.
pub fn counted(topic: &str) -> Vec<u64> {
    crate::consume_all(topic)
        .iter()
        .map(|r| {
            let (_, count) = r.headers.iter().find(|(k, _)| k == "count").unwrap();
            count.parse().unwrap()
        })
        .collect()
}

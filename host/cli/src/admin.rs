//! `sluice module`, `sluice pipeline` and `sluice tenant`: the admin API of a running
//! `sluice serve`, from the command line.

use std::io::{BufRead as _, Write as _};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use serde_json::Value;
use sha2::Digest as _;

/// Which service to talk to, and with which token.
#[derive(Args)]
pub struct ConnectArgs {
    /// The service's address (any node of a cluster).
    #[arg(long, env = "SLUICE_SERVER", default_value = "http://127.0.0.1:8470")]
    server: String,
    /// File holding your token (or set SLUICE_TOKEN).
    #[arg(long, env = "SLUICE_TOKEN_FILE")]
    token_file: Option<PathBuf>,
}

/// Which service to talk to, and for which tenant.
#[derive(Args)]
pub struct ServerArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    /// The tenant to act for.
    #[arg(long, env = "SLUICE_TENANT")]
    tenant: String,
}

/// What to do with tenants (operator token).
#[derive(Subcommand)]
pub enum TenantAction {
    /// List the tenants.
    List,
    /// Show a tenant's limits and settings as JSON (secrets redacted).
    Show {
        /// The tenant's name.
        name: String,
    },
    /// Add a tenant, or change one added before; its pipelines take changed settings
    /// when they next start.
    Put {
        /// The tenant's name.
        name: String,
        /// Its limits and settings: the keys of `[tenants.<name>]` in the service's
        /// config, without a token.
        #[arg(long, short)]
        config: PathBuf,
        /// File holding the tenant's token: only its SHA-256 is sent.
        #[arg(long)]
        tenant_token_file: PathBuf,
    },
    /// Remove a tenant that has no pipelines.
    Delete {
        /// The tenant's name.
        name: String,
    },
}

/// What to do with modules.
#[derive(Subcommand)]
pub enum ModuleAction {
    /// Upload a module; prints its digest.
    Push {
        /// The component file.
        file: PathBuf,
        /// The name to list it under (default: the file's stem).
        #[arg(long)]
        name: Option<String>,
    },
    /// List the tenant's modules.
    List,
}

/// What to do with pipelines.
#[derive(Subcommand)]
pub enum PipelineAction {
    /// Create a pipeline and start it.
    Create {
        /// The pipeline's name.
        name: String,
        /// Its config: the TOML of `sluice run` without `[pipeline] name` and
        /// `[transform] module`.
        #[arg(long, short)]
        config: PathBuf,
        /// A component file (uploaded first) or the digest of an uploaded module.
        #[arg(long)]
        module: String,
    },
    /// List the tenant's pipelines.
    List,
    /// Show a pipeline's status as JSON.
    Status {
        /// The pipeline's name.
        name: String,
    },
    /// Swap a pipeline's module at its next batch boundary.
    Deploy {
        /// The pipeline's name.
        name: String,
        /// A component file (uploaded first) or the digest of an uploaded module.
        #[arg(long)]
        module: String,
        /// First run the module on up to this many change rows from the pipeline's
        /// position; a failing module is refused and the old one keeps running.
        #[arg(long)]
        sample_rows: Option<usize>,
        /// Start the new module with empty keyed state (a pipeline with `[state]`): the
        /// pipeline restarts on a new changelog topic and the old state is deleted.
        #[arg(long, conflicts_with = "shadow")]
        reset_state: bool,
        /// Run the module in the pipeline's shadow instead: beside the live module on
        /// the same batches, its records compared and never produced. See the result
        /// with `sluice pipeline shadow show`, then promote or discard it.
        #[arg(long, conflicts_with = "sample_rows")]
        shadow: bool,
        /// With --shadow: stop after comparing this many batches.
        #[arg(long, requires = "shadow")]
        batches: Option<u64>,
        /// With --shadow: stop after comparing this many change rows.
        #[arg(long, requires = "shadow")]
        rows: Option<u64>,
        /// With --shadow: stop after this long (`30m`, `2h`; default 1h, at most 7 days).
        #[arg(long = "for", value_name = "DURATION", requires = "shadow")]
        duration: Option<String>,
        /// With --shadow: differences to keep as a sample (default 20, at most 1000).
        #[arg(long, requires = "shadow")]
        differences: Option<usize>,
    },
    /// Send versions of a pipeline's table again, through its module or another, into a
    /// topic of their own: a new pipeline that finishes after the last version, exactly
    /// once and resumed after a crash, while the pipeline itself carries on.
    Replay {
        /// The pipeline's name.
        name: String,
        /// The first version to send.
        #[arg(
            long,
            required_unless_present = "from_timestamp",
            conflicts_with = "from_timestamp"
        )]
        from_version: Option<u64>,
        /// Or: from the first version committed at or after this time (RFC 3339, as
        /// `2024-01-15T10:30:00Z`).
        #[arg(long, value_name = "TIME")]
        from_timestamp: Option<String>,
        /// The last version to send.
        #[arg(
            long,
            required_unless_present = "to_timestamp",
            conflicts_with = "to_timestamp"
        )]
        to_version: Option<u64>,
        /// Or: through the last version committed at or before this time, which has
        /// passed (RFC 3339).
        #[arg(long, value_name = "TIME")]
        to_timestamp: Option<String>,
        /// The topic to send to.
        #[arg(long)]
        topic: String,
        /// A component file (uploaded first) or the digest of an uploaded module
        /// (default: the pipeline's module).
        #[arg(long)]
        module: Option<String>,
        /// Send the table as of --from-version first, every row an insert.
        #[arg(long)]
        snapshot: bool,
        /// Where the replay's failed rows go (required when the pipeline keeps dead
        /// letters).
        #[arg(long)]
        dead_letter_topic: Option<String>,
        /// The replay pipeline's name (default `<name>-replay-<from>-<to>`).
        #[arg(long = "name")]
        replay_name: Option<String>,
        /// Wait until the replay finishes, showing its progress.
        #[arg(long)]
        wait: bool,
    },
    /// Show, promote or discard a pipeline's shadow deploy.
    Shadow {
        #[command(subcommand)]
        action: ShadowAction,
    },
    /// Swap back to the module before the last swap.
    Rollback {
        /// The pipeline's name.
        name: String,
    },
    /// Stop a pipeline after it commits its work.
    Pause {
        /// The pipeline's name.
        name: String,
    },
    /// Start a paused or failed pipeline from its stored position.
    Resume {
        /// The pipeline's name.
        name: String,
    },
    /// Stop a pipeline and forget it (its position stays in Kafka).
    Delete {
        /// The pipeline's name.
        name: String,
    },
    /// Print a pipeline's latest dead letters, newest first, one JSON object per line
    /// (partition, offset, key and the letter: version, row, error and the row's data).
    DeadLetters {
        /// The pipeline's name.
        name: String,
        /// Most letters to print (1 to 500).
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Show, read, export or reset a stateful pipeline's keyed state (read from the
    /// node that runs it).
    State {
        #[command(subcommand)]
        action: ServedStateAction,
    },
    /// Print a pipeline's guest log as JSON lines.
    Logs {
        /// The pipeline's name.
        name: String,
        /// Keep printing new lines.
        #[arg(long, short)]
        follow: bool,
    },
}

/// What to do with a pipeline's shadow deploy.
#[derive(Subcommand)]
pub enum ShadowAction {
    /// Print the comparison so far: records equal, changed, added and missing by
    /// topic, the candidate's errors and cost, and the sample of differences as a diff.
    Show {
        /// The pipeline's name.
        name: String,
        /// Print the report as JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// Make the shadow's module the live one: a swap at the next batch boundary.
    Promote {
        /// The pipeline's name.
        name: String,
    },
    /// Stop the shadow and forget it; the live module is untouched.
    Discard {
        /// The pipeline's name.
        name: String,
    },
}

/// What to do with a served pipeline's keyed state.
#[derive(Subcommand)]
pub enum ServedStateAction {
    /// Print the state's size, changelog topic and last restore as JSON.
    Show {
        /// The pipeline's name.
        name: String,
    },
    /// Print the value under a key (as text, or as hex when it is not UTF-8).
    Get {
        /// The pipeline's name.
        name: String,
        /// The key, as text.
        key: String,
    },
    /// Print every entry as JSON lines in key order, as `sluice state export` does.
    Export {
        /// The pipeline's name.
        name: String,
    },
    /// Delete the state: the pipeline restarts with the same module on a new, empty
    /// changelog topic.
    Reset {
        /// The pipeline's name.
        name: String,
    },
}

struct Client {
    agent: ureq::Agent,
    base: String,
    token: String,
}

impl Client {
    fn new(args: &ServerArgs) -> anyhow::Result<Client> {
        Client::at(&args.connect, &format!("/v1/tenants/{}", args.tenant))
    }

    /// A client for the API paths under `base`.
    fn at(args: &ConnectArgs, base: &str) -> anyhow::Result<Client> {
        let token = match (&args.token_file, std::env::var("SLUICE_TOKEN")) {
            (Some(file), _) => std::fs::read_to_string(file)
                .with_context(|| format!("cannot read the token file {}", file.display()))?,
            (None, Ok(token)) => token,
            (None, Err(_)) => bail!("No token: pass --token-file or set SLUICE_TOKEN."),
        };
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        Ok(Client {
            agent,
            base: format!("{}{base}", args.server.trim_end_matches('/')),
            token: format!("Bearer {}", token.trim()),
        })
    }

    /// Reads a response: its JSON on success, its error message otherwise.
    fn answer(&self, response: ureq::http::Response<ureq::Body>) -> anyhow::Result<Value> {
        let status = response.status();
        let text = response
            .into_body()
            .read_to_string()
            .context("reading the service's answer failed")?;
        let json: Value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        if !status.is_success() {
            let message = json
                .get("error")
                .and_then(Value::as_str)
                .map_or_else(|| json.to_string(), str::to_string);
            bail!("The service answered {status}: {message}");
        }
        Ok(json)
    }

    fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.get_with(path, &[])
    }

    /// GETs `path` with `query` parameters; the answer's JSON.
    fn get_with(&self, path: &str, query: &[(&str, &str)]) -> anyhow::Result<Value> {
        let response = self.call_get(path, query)?;
        self.answer(response)
    }

    /// GETs `path` with `query` parameters; the answer's lines as they arrive.
    fn get_lines(
        &self,
        path: &str,
        query: &[(&str, &str)],
    ) -> anyhow::Result<std::io::Lines<impl std::io::BufRead + use<>>> {
        let response = self.call_get(path, query)?;
        if !response.status().is_success() {
            return Err(self
                .answer(response)
                .expect_err("an unsuccessful answer is an error"));
        }
        Ok(std::io::BufReader::new(response.into_body().into_reader()).lines())
    }

    fn call_get(
        &self,
        path: &str,
        query: &[(&str, &str)],
    ) -> anyhow::Result<ureq::http::Response<ureq::Body>> {
        self.agent
            .get(format!("{}{path}", self.base))
            .query_pairs(query.iter().copied())
            .header("Authorization", &self.token)
            .call()
            .context("the service could not be reached")
    }

    fn send(&self, method: &str, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.base);
        let response = match (method, body) {
            ("DELETE", _) => self
                .agent
                .delete(url)
                .header("Authorization", &self.token)
                .call(),
            ("PUT", Some(body)) => self
                .agent
                .put(url)
                .header("Authorization", &self.token)
                .header("Content-Type", "application/json")
                .send(body.to_string()),
            (_, Some(body)) => self
                .agent
                .post(url)
                .header("Authorization", &self.token)
                .header("Content-Type", "application/json")
                .send(body.to_string()),
            (_, None) => self
                .agent
                .post(url)
                .header("Authorization", &self.token)
                .send_empty(),
        }
        .context("the service could not be reached")?;
        self.answer(response)
    }

    fn push(&self, file: &Path, name: Option<&str>) -> anyhow::Result<Value> {
        let bytes =
            std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
        let name = match name {
            Some(name) => name.to_string(),
            None => file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .context("the module file has no name")?,
        };
        let response = self
            .agent
            .post(format!("{}/modules", self.base))
            .query("name", &name)
            .header("Authorization", &self.token)
            .header("Content-Type", "application/wasm")
            .send(&bytes[..])
            .context("the service could not be reached")?;
        self.answer(response)
    }

    /// A module digest from a file (uploaded first) or a digest.
    fn module(&self, module: &str) -> anyhow::Result<String> {
        let path = Path::new(module);
        if path.is_file() {
            let entry = self.push(path, None)?;
            return entry
                .get("digest")
                .and_then(Value::as_str)
                .map(str::to_string)
                .context("the service did not return the module's digest");
        }
        Ok(module.to_string())
    }
}

/// Follows the replay whose status is at `path` until it finishes (or fails), polling
/// once a second: a bar on a terminal, else a line at each change.
fn wait_for_replay(client: &Client, path: &str) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{prefix} [{bar:30}] version {pos}/{len}, {msg}",
            )
            .expect("the template is valid")
            .progress_chars("=> "),
        );
        bar
    });
    let mut last = String::new();
    loop {
        let status = client.get(path)?;
        let state = status["state"].as_str().unwrap_or_default();
        let name = status["name"].as_str().unwrap_or_default();
        let version = status["position"]["version"].as_u64().unwrap_or_default();
        let rows = status["counters"]["rows_in"].as_u64().unwrap_or_default();
        let ending = status["ending_version"].as_u64();
        match &bar {
            Some(bar) => {
                bar.set_prefix(name.to_string());
                bar.set_length(ending.unwrap_or(version));
                bar.set_position(ending.map_or(version, |end| version.min(end)));
                bar.set_message(format!("{rows} change rows delivered"));
            }
            None => {
                let at = match ending {
                    Some(end) => format!("version {} of {end}", version.min(end)),
                    None => format!("version {version}"),
                };
                let line = format!("{name}: {at}, {rows} change rows delivered");
                if line != last {
                    eprintln!("{line}");
                    last = line;
                }
            }
        }
        match state {
            "finished" => {
                if let Some(bar) = &bar {
                    bar.finish_and_clear();
                }
                eprintln!("The replay finished.");
                return print(&status);
            }
            "failed" => bail!(
                "the replay failed: {}; fix the cause and resume it with `sluice pipeline resume {name}`",
                status["error"].as_str().unwrap_or("no error recorded"),
            ),
            _ => std::thread::sleep(std::time::Duration::from_secs(1)),
        }
    }
}

fn print(value: &Value) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Runs a `sluice module` command.
pub fn module(server: &ServerArgs, action: ModuleAction) -> anyhow::Result<()> {
    let client = Client::new(server)?;
    match action {
        ModuleAction::Push { file, name } => print(&client.push(&file, name.as_deref())?),
        ModuleAction::List => print(&client.get("/modules")?),
    }
}

/// Runs a `sluice tenant` command.
pub fn tenant(connect: &ConnectArgs, action: TenantAction) -> anyhow::Result<()> {
    let client = Client::at(connect, "/v1/tenants")?;
    match action {
        TenantAction::List => {
            let list = client.get("")?;
            println!(
                "{:<24} {:<12} {:>9} {:>13}",
                "TENANT", "SOURCE", "PIPELINES", "MAX PIPELINES"
            );
            for t in list.as_array().into_iter().flatten() {
                println!(
                    "{:<24} {:<12} {:>9} {:>13}",
                    t["name"].as_str().unwrap_or_default(),
                    t["source"].as_str().unwrap_or_default(),
                    t["pipelines"],
                    t["settings"]["max_pipelines"]
                );
            }
            Ok(())
        }
        TenantAction::Show { name } => print(&client.get(&format!("/{name}"))?),
        TenantAction::Put {
            name,
            config,
            tenant_token_file,
        } => {
            let text = std::fs::read_to_string(&config)
                .with_context(|| format!("cannot read {}", config.display()))?;
            let mut settings: sluice_service::TenantConfig = toml::from_str(&text)
                .with_context(|| format!("{} is not a tenant's settings", config.display()))?;
            let token = std::fs::read_to_string(&tenant_token_file).with_context(|| {
                format!("cannot read the token file {}", tenant_token_file.display())
            })?;
            if token.trim().len() < 16 {
                bail!("The tenant's token must be at least 16 characters.");
            }
            let digest = sha2::Sha256::digest(token.trim().as_bytes());
            settings.token_sha256 = Some(digest.iter().map(|b| format!("{b:02x}")).collect());
            let body = serde_json::to_value(&settings)?;
            print(&client.send("PUT", &format!("/{name}"), Some(body))?)
        }
        TenantAction::Delete { name } => {
            client.send("DELETE", &format!("/{name}"), None)?;
            println!("Tenant {name} was removed.");
            Ok(())
        }
    }
}

/// Runs a `sluice pipeline` command.
pub fn pipeline(server: &ServerArgs, action: PipelineAction) -> anyhow::Result<()> {
    let client = Client::new(server)?;
    let at = |name: &str, verb: &str| format!("/pipelines/{name}{verb}");
    match action {
        PipelineAction::Create {
            name,
            config,
            module,
        } => {
            let text = std::fs::read_to_string(&config)
                .with_context(|| format!("cannot read {}", config.display()))?;
            let module = client.module(&module)?;
            let body = serde_json::json!({ "config": text, "module": module });
            print(&client.send("PUT", &at(&name, ""), Some(body))?)
        }
        PipelineAction::List => {
            let list = client.get("/pipelines")?;
            println!(
                "{:<32} {:<8} {:<32} {:>10} {:>6} {:>10}",
                "PIPELINE", "STATE", "MODULE", "VERSION", "LAG", "ROWS/S"
            );
            for p in list.as_array().into_iter().flatten() {
                let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
                let digest = text(&p["module"]["digest"]);
                println!(
                    "{:<24} {:<8} {:<14} {:>10} {:>6} {:>10.0}",
                    text(&p["name"]),
                    text(&p["state"]),
                    format!(
                        "{}@{}",
                        text(&p["module"]["name"]),
                        &digest[..digest.len().min(8)]
                    ),
                    p["position"]["version"],
                    p["lag_versions"],
                    p["rows_per_second"].as_f64().unwrap_or_default()
                );
            }
            Ok(())
        }
        PipelineAction::Status { name } => print(&client.get(&at(&name, ""))?),
        PipelineAction::Deploy {
            name,
            module,
            shadow: true,
            batches,
            rows,
            duration,
            differences,
            ..
        } => {
            let module = client.module(&module)?;
            let body = serde_json::json!({
                "module": module,
                "batches": batches,
                "rows": rows,
                "duration": duration,
                "differences": differences,
            });
            let report = client.send("POST", &at(&name, "/shadow"), Some(body))?;
            print!("{}", crate::shadow_view::render(&report));
            Ok(())
        }
        PipelineAction::Replay {
            name,
            from_version,
            from_timestamp,
            to_version,
            to_timestamp,
            topic,
            module,
            snapshot,
            dead_letter_topic,
            replay_name,
            wait,
        } => {
            let module = module.map(|m| client.module(&m)).transpose()?;
            let body = serde_json::json!({
                "from_version": from_version,
                "from_timestamp": from_timestamp,
                "to_version": to_version,
                "to_timestamp": to_timestamp,
                "topic": topic,
                "module": module,
                "snapshot": snapshot,
                "dead_letter_topic": dead_letter_topic,
                "name": replay_name,
            });
            let status = client.send("POST", &at(&name, "/replays"), Some(body))?;
            if !wait {
                return print(&status);
            }
            let replay = status["name"].as_str().unwrap_or_default().to_string();
            wait_for_replay(&client, &at(&replay, ""))
        }
        PipelineAction::Shadow { action } => match action {
            ShadowAction::Show { name, json } => {
                let report = client.get(&at(&name, "/shadow"))?;
                if json {
                    print(&report)
                } else {
                    print!("{}", crate::shadow_view::render(&report));
                    Ok(())
                }
            }
            ShadowAction::Promote { name } => {
                print(&client.send("POST", &at(&name, "/shadow/promote"), None)?)
            }
            ShadowAction::Discard { name } => {
                let report = client.send("POST", &at(&name, "/shadow/discard"), None)?;
                print!("{}", crate::shadow_view::render(&report));
                Ok(())
            }
        },
        PipelineAction::Deploy {
            name,
            module,
            sample_rows,
            reset_state,
            ..
        } => {
            let module = client.module(&module)?;
            let body = serde_json::json!({
                "module": module,
                "sample_rows": sample_rows,
                "reset_state": reset_state,
            });
            print(&client.send("POST", &at(&name, "/deploy"), Some(body))?)
        }
        PipelineAction::Rollback { name } => {
            print(&client.send("POST", &at(&name, "/rollback"), None)?)
        }
        PipelineAction::Pause { name } => {
            print(&client.send("POST", &at(&name, "/pause"), None)?)
        }
        PipelineAction::Resume { name } => {
            print(&client.send("POST", &at(&name, "/resume"), None)?)
        }
        PipelineAction::Delete { name } => {
            client.send("DELETE", &at(&name, ""), None)?;
            println!("Pipeline {name} was deleted; its position stays in Kafka.");
            Ok(())
        }
        PipelineAction::DeadLetters { name, limit } => {
            let read = client.get(&at(&name, &format!("/dead-letters?limit={limit}")))?;
            if read["topic"].is_null() {
                bail!(
                    "Pipeline {name} keeps no dead letters: set on_error = \"dead-letter\" and dead_letter_topic in its [transform] config."
                );
            }
            let mut out = std::io::stdout().lock();
            for letter in read["letters"].as_array().into_iter().flatten() {
                writeln!(out, "{letter}")?;
            }
            Ok(())
        }
        PipelineAction::State { action } => state(&client, action),
        PipelineAction::Logs { name, follow } => {
            let follow = if follow { "true" } else { "false" };
            let lines = client.get_lines(&at(&name, "/logs"), &[("follow", follow)])?;
            let mut out = std::io::stdout().lock();
            for line in lines {
                writeln!(out, "{}", line.context("the log stream broke")?)?;
                out.flush()?;
            }
            Ok(())
        }
    }
}

/// Runs a `sluice pipeline state` command.
fn state(client: &Client, action: ServedStateAction) -> anyhow::Result<()> {
    let at = |name: &str, verb: &str| format!("/pipelines/{name}/state{verb}");
    match action {
        ServedStateAction::Show { name } => print(&client.get(&at(&name, ""))?),
        ServedStateAction::Get { name, key } => {
            let entry = client.get_with(&at(&name, "/value"), &[("key", &key)])?;
            let value = entry["value"]
                .as_str()
                .or_else(|| entry["value_hex"].as_str())
                .context("the service's answer has no value")?;
            println!("{value}");
            Ok(())
        }
        ServedStateAction::Export { name } => {
            let lines = client.get_lines(&at(&name, "/export"), &[])?;
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            for line in lines {
                let line = line.context("the export broke off")?;
                if let Ok(Value::Object(cut)) = serde_json::from_str::<Value>(&line)
                    && let Some(error) = cut.get("error")
                {
                    out.flush()?;
                    bail!("The export broke off: {error}");
                }
                writeln!(out, "{line}")?;
            }
            out.flush()?;
            Ok(())
        }
        ServedStateAction::Reset { name } => {
            print(&client.send("POST", &at(&name, "/reset"), None)?)
        }
    }
}

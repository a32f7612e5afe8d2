//! The `sluice` command.

mod admin;
mod progress;
mod report;
mod shadow_view;
mod state;

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{CommandFactory, Parser, Subcommand};
use std::sync::Arc;

use sluice_pipeline::{
    KafkaSink, PipelineConfig, PipelineMetrics, Position, RunControls, RunMode, SourcePosition,
    StartFrom,
};
use tokio::sync::watch;

/// Stream a Delta table's change data feed through a Wasm transform into Kafka.
#[derive(Parser)]
#[command(name = "sluice", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a pipeline: read the table's changes from the stored position (or the
    /// configured start), transform them and produce them to Kafka, then follow new
    /// commits until stopped with Ctrl-C or SIGTERM.
    Run {
        /// The pipeline's TOML config.
        #[arg(long, short)]
        config: PathBuf,
        /// Stop once every version that exists at start-up is delivered, instead of
        /// following new commits.
        #[arg(long)]
        stop_at_latest: bool,
        /// Ignore the stored position and start where the config says
        /// (`starting_version`, `starting_timestamp` or `snapshot`).
        #[arg(long)]
        restart: bool,
    },
    /// Print the records a module makes of a table's changes, as JSON lines, without
    /// Kafka: one line per record (`version`, `row`, `topic`, `partition`, `key`,
    /// `value`, `headers`) and per rejected row (`rejected`).
    Preview {
        /// A pipeline's TOML config: its table, module, parameters, storage options and
        /// batch size (flags given as well override them), and its `[sink.encoding]`:
        /// framed keys and values are shown decoded, with the schema id the registry
        /// has for them (nothing is registered).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// The table's path or URI.
        #[arg(long, required_unless_present = "config")]
        table: Option<String>,
        /// The transform component.
        #[arg(long, required_unless_present = "config")]
        module: Option<PathBuf>,
        /// First version to read.
        #[arg(long, default_value_t = 0)]
        from: u64,
        /// Last version to read (default: the latest).
        #[arg(long)]
        to: Option<u64>,
        /// Stop after this many records.
        #[arg(long)]
        limit: Option<usize>,
        /// A module parameter, `name=value`; repeat for more.
        #[arg(long = "param", value_parser = name_value)]
        params: Vec<(String, String)>,
        /// An object store option, `name=value` (for example `aws_endpoint=...`).
        #[arg(long = "storage-option", value_parser = name_value)]
        storage_options: Vec<(String, String)>,
        /// Most change rows per batch handed to the module (default 10000, or the
        /// config's).
        #[arg(long)]
        batch_rows: Option<usize>,
        /// Keyed state the module starts with, as JSON lines in the form `sluice state
        /// export` writes (default: empty).
        #[arg(long)]
        state: Option<PathBuf>,
        /// Write the keyed state after the preview to this file, in the same form.
        #[arg(long)]
        state_out: Option<PathBuf>,
    },
    /// Check a pipeline without running it: the config, the table and its change
    /// feed, the module and its parameters, and Kafka and its topics. Lists every
    /// problem found; exits non-zero if there is one.
    Check {
        /// The pipeline's TOML config.
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Run the multi-tenant service: many tenants' pipelines in one process, an admin
    /// API, live module swaps, Prometheus metrics. Stops on Ctrl-C or SIGTERM after
    /// every pipeline commits its work.
    Serve {
        /// The service's TOML config.
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Upload and list modules on a running service.
    Module {
        #[command(flatten)]
        server: admin::ServerArgs,
        #[command(subcommand)]
        action: admin::ModuleAction,
    },
    /// Create, swap, pause, resume, delete and watch pipelines on a running service.
    Pipeline {
        #[command(flatten)]
        server: admin::ServerArgs,
        #[command(subcommand)]
        action: admin::PipelineAction,
    },
    /// Add, change, list and remove tenants on a running service (operator token).
    Tenant {
        #[command(flatten)]
        server: admin::ConnectArgs,
        #[command(subcommand)]
        action: admin::TenantAction,
    },
    /// Show or reset a pipeline's stored position.
    Position {
        #[command(subcommand)]
        action: PositionAction,
    },
    /// Show, read, export or reset a stateful pipeline's keyed state (`[state]`).
    State {
        #[command(subcommand)]
        action: state::StateAction,
    },
    /// Build a transform project (Rust, JavaScript, TypeScript, Python, C or Go, told by
    /// its files) into a component the host runs. Installs the language's pinned
    /// toolchain on first use.
    Build {
        /// The transform project's directory.
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Where to write `<name>.wasm` (default: `sluice` in the target directory).
        #[arg(long)]
        out_dir: Option<PathBuf>,
        /// Where intermediate files go (default: `CARGO_TARGET_DIR` for a Rust project
        /// when it is set, else `<dir>/target`).
        #[arg(long)]
        target_dir: Option<PathBuf>,
        /// The guest SDKs (default: `SLUICE_SDK_DIR`, else `../share/sluice/guest-sdk`
        /// beside this binary as the release archive installs them, else this
        /// checkout's `guest-sdk`).
        #[arg(long)]
        sdk_dir: Option<PathBuf>,
    },
    /// Start a new transform project in a language: a working transform to edit, which
    /// `sluice build` builds. Languages: rust, js, ts, python, c, go.
    Init {
        /// The language.
        #[arg(long, value_parser = language)]
        lang: sluice_build::Language,
        /// The new project's directory; its name names the module.
        dir: PathBuf,
        /// The guest SDKs the project uses (default: as for `sluice build`).
        #[arg(long)]
        sdk_dir: Option<PathBuf>,
    },
    /// Print the completion script of a shell: `source <(sluice completions bash)`, or
    /// save it where the shell loads completions from (for bash,
    /// `~/.local/share/bash-completion/completions/sluice`).
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Write the man pages, `sluice.1` and one per subcommand (`sluice-run.1`, ...), into
    /// a directory; `man -M` or `MANPATH` then finds them under its parent's `man1`.
    Manpages {
        /// The directory to write into; created when missing.
        #[arg(long)]
        out_dir: PathBuf,
    },
    /// Compiles one module for a parent `sluice` within a memory limit; the parent
    /// kills it past its deadline. Not for people.
    #[command(hide = true, name = "compile-worker")]
    CompileWorker {
        #[arg(long)]
        input: PathBuf,
        #[arg(long)]
        output: PathBuf,
        #[arg(long)]
        digest: String,
        #[arg(long)]
        memory_bytes: usize,
        #[arg(long)]
        fuel_metering: bool,
    },
}

#[derive(Subcommand)]
enum PositionAction {
    /// Print the stored position (read_committed; a running pipeline is not disturbed).
    Show {
        /// The pipeline's TOML config.
        #[arg(long, short)]
        config: PathBuf,
        /// Print JSON instead of a sentence.
        #[arg(long)]
        json: bool,
    },
    /// Store a new position. In exactly-once mode this fences a running instance of
    /// the pipeline, which stops; restart it to continue from the new position.
    Reset {
        /// The pipeline's TOML config.
        #[arg(long, short)]
        config: PathBuf,
        /// The Delta version to continue from.
        #[arg(long)]
        to_version: u64,
        /// Change rows of that version to skip.
        #[arg(long, default_value_t = 0)]
        row_offset: u64,
    },
}

fn main() -> std::process::ExitCode {
    match start() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{}", report::explained(&error));
            std::process::ExitCode::FAILURE
        }
    }
}

fn start() -> anyhow::Result<()> {
    let command = Cli::parse().command;
    // A compile worker is a bare process: no runtime, no logging, no other work.
    if let Command::CompileWorker {
        input,
        output,
        digest,
        memory_bytes,
        fuel_metering,
    } = command
    {
        let (status, error) = sluice_engine::run_compile_worker(&sluice_engine::WorkerRequest {
            input,
            output,
            digest,
            memory_bytes,
            fuel_metering,
        });
        if let Some(error) = error {
            eprintln!("{error}");
        }
        std::process::exit(status);
    }
    match &command {
        Command::Completions { shell } => {
            clap_complete::generate(
                *shell,
                &mut public_command(),
                "sluice",
                &mut std::io::stdout(),
            );
            return Ok(());
        }
        Command::Manpages { out_dir } => {
            std::fs::create_dir_all(out_dir)
                .with_context(|| format!("cannot create {}", out_dir.display()))?;
            clap_mangen::generate_to(public_command(), out_dir).with_context(|| {
                format!("cannot write the man pages into {}", out_dir.display())
            })?;
            return Ok(());
        }
        _ => {}
    }
    // Every module this process compiles is compiled by a worker: itself, started again.
    sluice_engine::isolate_compiles(sluice_engine::CompileWorker {
        program: std::env::current_exe().context("cannot find the sluice executable")?,
        args: vec!["compile-worker".to_string()],
    });
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?
        .block_on(run(command))
}

async fn run(command: Command) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,delta_kernel=warn")),
        )
        .with_writer(|| progress::Stderr)
        // Colours only for people: log files and collectors get plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match command {
        Command::Run {
            config,
            stop_at_latest,
            restart,
        } => {
            let config = PipelineConfig::load(&config)?;
            let mode = if stop_at_latest {
                RunMode::StopAtLatest
            } else {
                RunMode::Follow
            };
            let (stop, shutdown) = watch::channel(false);
            tokio::spawn(async move {
                wait_for_signal().await;
                tracing::info!("Shutting down after the batch in progress.");
                let _ = stop.send(true);
            });
            let start = if restart {
                StartFrom::Configured
            } else {
                StartFrom::StoredPosition
            };
            // A person at a terminal gets a progress bar; logs get a sentence now and then.
            let metrics = Arc::new(PipelineMetrics::default());
            let bar = progress::wanted();
            if bar {
                progress::draw(metrics.clone());
            }
            let controls = RunControls {
                metrics,
                quiet_progress: bar,
                ..RunControls::default()
            };
            let summary =
                sluice_pipeline::run_controlled(&config, mode, start, shutdown, controls).await;
            progress::clear();
            let summary = summary?;
            println!(
                "Delivered {} records from {} change rows; next position: {}.",
                summary.records_out, summary.rows_in, summary.position
            );
            Ok(())
        }
        Command::Position {
            action: PositionAction::Show { config, json },
        } => {
            let config = PipelineConfig::load(&config)?;
            let stored =
                sluice_pipeline::load_position(&sluice_pipeline::sink_config(&config)).await?;
            match (stored, json) {
                (None, true) => println!("null"),
                (None, false) => println!(
                    "Pipeline {} has no stored position; it starts where [source] says (starting_version, starting_timestamp or snapshot).",
                    config.pipeline.name
                ),
                (Some(p), true) => println!("{}", serde_json::to_string(&p)?),
                (Some(p), false) => println!(
                    "Pipeline {} continues at table {} {} {} after {} rows (records so far made by module sha256:{}).",
                    config.pipeline.name,
                    p.table,
                    if p.position.snapshot {
                        "in the snapshot of version"
                    } else {
                        "version"
                    },
                    p.position.version,
                    p.position.row_offset,
                    p.module_digest
                ),
            }
            Ok(())
        }
        Command::Position {
            action:
                PositionAction::Reset {
                    config,
                    to_version,
                    row_offset,
                },
        } => {
            let config = PipelineConfig::load(&config)?;
            let mut sink = KafkaSink::connect(sluice_pipeline::sink_config(&config)).await?;
            let position = SourcePosition {
                table: config.source.table.clone(),
                position: Position {
                    version: to_version,
                    row_offset,
                    snapshot: false,
                },
                module_digest: String::new(),
                // The records before it are the user's to reconcile: a schema change at
                // this version is taken as the new start, not checked.
                starts_fresh: true,
            };
            sink.commit(&position).await?;
            println!(
                "Pipeline {} will continue at version {to_version} after {row_offset} change rows.",
                config.pipeline.name
            );
            Ok(())
        }
        Command::State { action } => state::run(action).await,
        Command::Preview {
            config,
            table,
            module,
            from,
            to,
            limit,
            params,
            storage_options,
            batch_rows,
            state: seed,
            state_out,
        } => {
            let mut options = match config {
                Some(path) => {
                    let config = PipelineConfig::load(&path)?;
                    let mut options = sluice_pipeline::PreviewOptions::from_config(&config);
                    options.table = table.unwrap_or(options.table);
                    options.module = module.unwrap_or(options.module);
                    overriding(&mut options.params, params);
                    overriding(&mut options.source.storage_options, storage_options);
                    options.source.batch_rows = batch_rows.unwrap_or(options.source.batch_rows);
                    options.from = from;
                    options.to = to;
                    options.limit = limit;
                    options
                }
                None => sluice_pipeline::PreviewOptions {
                    table: table.context("--table names the table to preview")?,
                    module: module.context("--module names the transform to preview")?,
                    from,
                    to,
                    limit,
                    params,
                    source: {
                        let defaults = sluice_pipeline::SourceOptions::default();
                        sluice_pipeline::SourceOptions {
                            batch_rows: batch_rows.unwrap_or(defaults.batch_rows),
                            storage_options,
                            ..defaults
                        }
                    },
                    encoding: None,
                    state: Vec::new(),
                },
            };
            if let Some(seed) = seed {
                options.state = state::read_entries(&seed)?;
            }
            let summary = tokio::task::spawn_blocking(move || {
                sluice_pipeline::preview(&options, &mut std::io::stdout().lock())
                    .map_err(anyhow::Error::from)
            })
            .await
            .context("the preview task failed")??;
            tracing::info!(
                rows = summary.rows,
                records = summary.records,
                rejected = summary.rejected,
                state_keys = summary.state.len(),
                "Preview finished."
            );
            if let Some(path) = state_out {
                state::write_entries(&path, &summary.state)?;
            }
            Ok(())
        }
        Command::Check { config } => {
            let findings = sluice_pipeline::check(&config).await;
            for finding in &findings {
                let mark = if finding.problem { "PROBLEM" } else { "ok" };
                println!("{mark:>7}  {:<6}  {}", finding.part, finding.message);
            }
            let problems = findings.iter().filter(|f| f.problem).count();
            if problems > 0 {
                anyhow::bail!("{problems} problem(s) found in {}.", config.display());
            }
            Ok(())
        }
        Command::Serve { config } => {
            let config = sluice_service::ServeConfig::load(&config)?;
            sluice_service::serve(config, async {
                wait_for_signal().await;
                tracing::info!("Shutting down: every pipeline commits its work and stops.");
            })
            .await?;
            Ok(())
        }
        Command::Module { server, action } => {
            tokio::task::spawn_blocking(move || admin::module(&server, action)).await?
        }
        Command::Pipeline { server, action } => {
            tokio::task::spawn_blocking(move || admin::pipeline(&server, action)).await?
        }
        Command::Tenant { server, action } => {
            tokio::task::spawn_blocking(move || admin::tenant(&server, action)).await?
        }
        Command::Build {
            dir,
            out_dir,
            target_dir,
            sdk_dir,
        } => {
            let target_dir = target_dir.unwrap_or_else(|| sluice_build::default_target_dir(&dir));
            let out_dir = out_dir.unwrap_or_else(|| target_dir.join("sluice"));
            let mut options = sluice_build::BuildOptions::new(target_dir, out_dir);
            if let Some(sdk_dir) = sdk_dir {
                options.sdk_dir = sdk_dir;
            }
            let started = std::time::Instant::now();
            let built =
                tokio::task::spawn_blocking(move || sluice_build::build_transform(&dir, &options))
                    .await
                    .context("the build task failed")??;
            let size = std::fs::metadata(&built.component).map_or(0, |m| m.len());
            eprintln!(
                "Built a {} transform: {} ({:.1} MiB) in {:.1} s.",
                built.language,
                built.component.display(),
                size as f64 / (1024.0 * 1024.0),
                started.elapsed().as_secs_f64()
            );
            println!("{}", built.component.display());
            Ok(())
        }
        Command::Init { lang, dir, sdk_dir } => {
            let sdk_dir = sdk_dir.unwrap_or_else(sluice_build::default_sdk_dir);
            let files = sluice_build::scaffold(lang, &dir, &sdk_dir)?;
            for file in files {
                println!("{}", file.display());
            }
            eprintln!(
                "Created a {lang} transform in {}. Build it with `sluice build {}`.",
                dir.display(),
                dir.display()
            );
            Ok(())
        }
        Command::CompileWorker { .. } | Command::Completions { .. } | Command::Manpages { .. } => {
            anyhow::bail!("this command runs before the runtime starts")
        }
    }
}

/// The command as people see it: without the hidden compile worker, which shells'
/// completions would otherwise offer.
fn public_command() -> clap::Command {
    let full = Cli::command();
    let visible: Vec<clap::Command> = full
        .get_subcommands()
        .filter(|command| !command.is_hide_set())
        .cloned()
        .collect();
    clap::Command::new("sluice")
        .version(env!("CARGO_PKG_VERSION"))
        .about(full.get_about().cloned().unwrap_or_default())
        .subcommands(visible)
}

/// Parses a language name for `sluice init --lang`.
fn language(name: &str) -> Result<sluice_build::Language, String> {
    sluice_build::Language::parse(name).ok_or_else(|| {
        let names: Vec<&str> = sluice_build::Language::ALL
            .iter()
            .map(|l| l.name())
            .collect();
        format!("unknown language `{name}`; use one of {}", names.join(", "))
    })
}

/// Parses `name=value`.
/// `base` with each of `given` in place of an entry of the same name.
fn overriding(base: &mut Vec<(String, String)>, given: Vec<(String, String)>) {
    for (name, value) in given {
        base.retain(|(existing, _)| *existing != name);
        base.push((name, value));
    }
}

fn name_value(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(name, value)| (name.trim().to_string(), value.to_string()))
        .ok_or_else(|| format!("`{text}` is not name=value"))
}

async fn wait_for_signal() {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler can be installed");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}

//! The `sluice` command.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use sluice_pipeline::{PipelineConfig, RunMode};
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
    },
    /// Build a Rust transform crate into a component the host runs.
    Build {
        /// The transform crate's directory.
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Where to write `<crate>.wasm`.
        #[arg(long, default_value = "target/sluice")]
        out_dir: PathBuf,
        /// cargo's target directory for the guest build.
        #[arg(long, default_value = "target")]
        target_dir: PathBuf,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,delta_kernel=warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Run {
            config,
            stop_at_latest,
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
            let summary = sluice_pipeline::run(&config, mode, shutdown).await?;
            println!(
                "Delivered {} records from {} change rows; next position: {}.",
                summary.records_out, summary.rows_in, summary.position
            );
            Ok(())
        }
        Command::Build {
            dir,
            out_dir,
            target_dir,
        } => {
            let options = sluice_build::BuildOptions {
                target_dir,
                out_dir,
            };
            let built = tokio::task::spawn_blocking(move || {
                sluice_build::build_rust_transform(&dir, &options)
            })
            .await
            .context("the build task failed")??;
            println!("{}", built.display());
            Ok(())
        }
    }
}

async fn wait_for_signal() {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler can be installed");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}

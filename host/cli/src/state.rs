//! `sluice state`: show, read, export and reset a stateful pipeline's keyed state from
//! its config. Reading brings this node's store up to the changelog with a
//! read_committed reader, so an instance running elsewhere is not disturbed.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Subcommand;
use sluice_pipeline::{PipelineConfig, StateView};

/// Entries read from the store at a time while exporting.
const EXPORT_PAGE: usize = 1000;

#[derive(Subcommand)]
pub enum StateAction {
    /// Print the state's size and where it is kept, after bringing this node's copy up
    /// to the changelog.
    Show {
        /// The pipeline's TOML config.
        #[arg(long, short)]
        config: PathBuf,
        /// Print JSON instead of a sentence.
        #[arg(long)]
        json: bool,
    },
    /// Print the value under a key (as text; exits with an error when there is none).
    Get {
        /// The pipeline's TOML config.
        #[arg(long, short)]
        config: PathBuf,
        /// The key, as text.
        key: String,
    },
    /// Print every entry as JSON lines in key order: `key` and `value` as text, or
    /// `key_hex` and `value_hex` for bytes that are not UTF-8.
    Export {
        /// The pipeline's TOML config.
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Delete the state: its changelog topic and this node's copy. A running instance
    /// of the pipeline is fenced and stops; started again, it continues from its
    /// position with empty state.
    Reset {
        /// The pipeline's TOML config.
        #[arg(long, short)]
        config: PathBuf,
    },
}

/// Carries out `action`.
pub async fn run(action: StateAction) -> anyhow::Result<()> {
    match action {
        StateAction::Show { config, json } => {
            let (config, view) = open(config).await?;
            let usage = view.usage();
            let restored = view.restored();
            if json {
                let shown = serde_json::json!({
                    "pipeline": config.pipeline.name,
                    "changelog_topic": view.topic(),
                    "dir": view.dir(),
                    "keys": usage.keys,
                    "bytes": usage.bytes,
                    "changelog_offset": restored.to,
                    "restored_changes": restored.changes,
                    "restore_seconds": restored.took.as_secs_f64(),
                    "rebuilt": restored.rebuilt,
                });
                println!("{shown}");
            } else {
                println!(
                    "Pipeline {} keeps {} keys ({} bytes of keys and values), committed to changelog topic {}; this node's copy at {} reflects it up to offset {}.",
                    config.pipeline.name,
                    usage.keys,
                    usage.bytes,
                    view.topic(),
                    view.dir().display(),
                    restored.to
                );
            }
            Ok(())
        }
        StateAction::Get { config, key } => {
            let (config, view) = open(config).await?;
            let value = view.get(key.as_bytes())?.with_context(|| {
                format!(
                    "pipeline {} has no value under key `{key}`",
                    config.pipeline.name
                )
            })?;
            let mut out = std::io::stdout().lock();
            out.write_all(&value)?;
            out.write_all(b"\n")?;
            Ok(())
        }
        StateAction::Export { config } => {
            let (_, view) = open(config).await?;
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            let mut after: Option<Vec<u8>> = None;
            loop {
                let page = view.page(after.as_deref(), EXPORT_PAGE)?;
                let Some((last, _)) = page.last() else {
                    break;
                };
                after = Some(last.clone());
                for (key, value) in &page {
                    let mut line = serde_json::Map::new();
                    put_bytes(&mut line, "key", key);
                    put_bytes(&mut line, "value", value);
                    writeln!(out, "{}", serde_json::Value::Object(line))?;
                }
            }
            out.flush()?;
            Ok(())
        }
        StateAction::Reset { config } => {
            let config = PipelineConfig::load(&config)?;
            let (topic, dir) = sluice_pipeline::reset_state(&config).await?;
            println!(
                "Deleted the state of pipeline {}: changelog topic {topic} and this node's copy at {}. A running instance was fenced and stops; started again, it continues from its position with empty state.",
                config.pipeline.name,
                dir.display()
            );
            Ok(())
        }
    }
}

/// Loads the config and brings this node's store up to the changelog.
async fn open(config: PathBuf) -> anyhow::Result<(PipelineConfig, StateView)> {
    let config = PipelineConfig::load(&config)?;
    let opening = config.clone();
    let view = tokio::task::spawn_blocking(move || {
        StateView::open(&opening, &mut |read, total| {
            tracing::debug!(read, total, "Reading the state's changelog.");
        })
        .map_err(anyhow::Error::from)
    })
    .await
    .context("reading the state failed")??;
    let restored = view.restored();
    tracing::info!(
        changelog = view.topic(),
        from_offset = restored.from,
        to_offset = restored.to,
        changes = restored.changes,
        seconds = restored.took.as_secs_f64(),
        "Brought this node's copy of the state up to its changelog."
    );
    Ok((config, view))
}

/// Puts `bytes` under `name` as text, or under `<name>_hex` when they are not UTF-8.
fn put_bytes(line: &mut serde_json::Map<String, serde_json::Value>, name: &str, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(text) => line.insert(name.to_string(), text.into()),
        Err(_) => {
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            line.insert(format!("{name}_hex"), hex.into())
        }
    };
}

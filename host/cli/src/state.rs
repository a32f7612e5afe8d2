//! `sluice state`: show, read, export and reset a stateful pipeline's keyed state from
//! its config. Reading brings this node's store up to the changelog with a
//! read_committed reader, so an instance running elsewhere is not disturbed.

use std::io::Write as _;
use std::path::{Path, PathBuf};

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
                    writeln!(out, "{}", sluice_pipeline::entry_to_json(key, value))?;
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

/// Writes `entries` to `path` as `sluice state export` prints them.
pub fn write_entries(path: &Path, entries: &[(Vec<u8>, Vec<u8>)]) -> anyhow::Result<()> {
    let file = std::fs::File::create(path)
        .with_context(|| format!("cannot write the state to {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    for (key, value) in entries {
        writeln!(out, "{}", sluice_pipeline::entry_to_json(key, value))?;
    }
    out.flush()
        .with_context(|| format!("cannot write the state to {}", path.display()))
}

/// Reads entries in the form `sluice state export` prints them.
pub fn read_entries(path: &Path) -> anyhow::Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the state file {}", path.display()))?;
    let mut entries = Vec::new();
    for (number, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let entry = serde_json::from_str::<serde_json::Value>(line)
            .map_err(|e| e.to_string())
            .and_then(|line| sluice_pipeline::entry_from_json(&line))
            .map_err(|why| {
                anyhow::anyhow!(
                    "line {} of the state file {} is not an entry ({why}); each line is {{\"key\": ..., \"value\": ...}} (or key_hex, value_hex), as `sluice state export` writes",
                    number + 1,
                    path.display()
                )
            })?;
        entries.push(entry);
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_written_read_back_as_they_were() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.jsonl");
        let entries = vec![
            (b"open/acme".to_vec(), b"3".to_vec()),
            (vec![0xff, 0x00], "Zoë".as_bytes().to_vec()),
        ];
        write_entries(&path, &entries).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains(r#"{"key":"open/acme","value":"3"}"#),
            "{text}"
        );
        assert!(text.contains(r#""key_hex":"ff00""#), "{text}");
        assert_eq!(read_entries(&path).unwrap(), entries);

        std::fs::write(&path, "{\"key\":\"a\",\"value\":\"1\"}\n{\"key\":\"b\"}\n").unwrap();
        let error = read_entries(&path).unwrap_err().to_string();
        assert!(
            error.contains("line 2") && error.contains("no value or value_hex"),
            "{error}"
        );
    }
}

//! `sluice preview`: what a module makes of a table's changes, as JSON lines, without
//! Kafka. The dev loop for transform authors.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value as Json, json};
use sluice_engine::{EngineConfig, Format, OutputRecord, TransformEngine};
use sluice_model::{Value, write_json_value};
use sluice_source::{ChangeFeed, Position, SourceOptions};

use crate::error::PipelineError;
use crate::records::transform_error;

/// What to preview.
#[derive(Clone, Debug)]
pub struct PreviewOptions {
    /// The table's path or URI.
    pub table: String,
    /// The transform component.
    pub module: PathBuf,
    /// First version to read.
    pub from: u64,
    /// Last version to read; the latest when `None`.
    pub to: Option<u64>,
    /// Stop after this many records.
    pub limit: Option<usize>,
    /// The module's parameters.
    pub params: Vec<(String, String)>,
    /// Object store options.
    pub storage_options: Vec<(String, String)>,
    /// Most change rows per batch.
    pub batch_rows: usize,
}

/// What a preview read and printed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PreviewSummary {
    /// Change rows read.
    pub rows: u64,
    /// Records printed.
    pub records: u64,
    /// Rows the module rejected (printed too).
    pub rejected: u64,
}

/// Runs `options.module` over the table's changes and writes one JSON line per record
/// (and per rejected row) to `out`. Stops quietly when `out` is closed.
pub fn preview(
    options: &PreviewOptions,
    out: &mut dyn Write,
) -> Result<PreviewSummary, PipelineError> {
    let feed = ChangeFeed::open(
        &options.table,
        SourceOptions {
            batch_rows: options.batch_rows,
            storage_options: options.storage_options.clone(),
        },
    )?;
    let to = match options.to {
        Some(to) => to,
        None => feed.latest_version()?,
    };
    let engine = TransformEngine::new(EngineConfig {
        pooled_instances: 0,
        ..EngineConfig::default()
    })?;
    let module = engine.load(&options.module)?;
    let mut instance = module.instantiate(&options.params, Arc::new(Format::default()))?;
    let mut summary = PreviewSummary::default();
    for batch in feed.read(Position::at_version(options.from), to)? {
        let batch = batch?;
        let output = instance.transform(&batch.batch).map_err(|e| {
            let row = match &e {
                sluice_engine::TransformError::Row { row, .. } => *row,
                _ => 0,
            };
            transform_error("preview", feed.table(), &batch, row, e)
        })?;
        summary.rows += batch.batch.num_rows() as u64;
        let first_row = batch.end.row_offset - batch.batch.num_rows() as u64;
        let mut lines = Vec::new();
        for record in &output.records {
            if options
                .limit
                .is_some_and(|limit| summary.records as usize >= limit)
            {
                break;
            }
            lines.push(record_line(batch.end.version, first_row, record));
            summary.records += 1;
        }
        for rejected in &output.rejected {
            summary.rejected += 1;
            lines.push(json!({
                "version": batch.end.version,
                "row": first_row + u64::from(rejected.row),
                "rejected": rejected.message,
            }));
        }
        for line in lines {
            if writeln!(out, "{line}").is_err() {
                return Ok(summary);
            }
        }
        if options
            .limit
            .is_some_and(|limit| summary.records as usize >= limit)
        {
            break;
        }
    }
    Ok(summary)
}

/// Bytes as JSON: text when they are UTF-8, `{"base64": …}` otherwise.
fn bytes_json(bytes: &[u8]) -> Json {
    match std::str::from_utf8(bytes) {
        Ok(text) => Json::String(text.to_string()),
        Err(_) => {
            let mut encoded = String::new();
            write_json_value(&mut encoded, &Value::Bytes(bytes));
            json!({ "base64": encoded.trim_matches('"') })
        }
    }
}

fn record_line(version: u64, first_row: u64, record: &OutputRecord) -> Json {
    let headers: serde_json::Map<String, Json> = record
        .headers
        .iter()
        .map(|(name, value)| (name.clone(), bytes_json(value)))
        .collect();
    json!({
        "version": version,
        "row": first_row + u64::from(record.source_row),
        "topic": record.topic,
        "partition": record.partition,
        "key": record.key.as_deref().map(bytes_json),
        "value": record.value.as_deref().map(bytes_json),
        "headers": headers,
    })
}

//! `sluice preview`: what a module makes of a table's changes, as JSON lines, without
//! Kafka. The dev loop for transform authors.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value as Json, json};
use sluice_encoding::{ProtobufSchema, SchemaKind, SubjectStrategy, WriterSchema};
use sluice_engine::{EngineConfig, Format, OutputRecord, StateEntry, TransformEngine};
use sluice_model::{Value, write_json_value};
use sluice_registry::{HttpRegistry, Registration, RegistrySettings, SchemaRegistry};
use sluice_source::{ChangeFeed, Position, Preceded, SourceOptions};

use crate::config::PipelineConfig;
use crate::error::PipelineError;
use crate::keyed::ScratchState;
use crate::records::transform_error;
use crate::topics::TopicRule;

/// A pipeline's encoding, for a preview that shows records as the pipeline writes them.
#[derive(Clone, Debug)]
pub struct PreviewEncoding {
    /// How the helpers write records.
    pub format: Arc<Format>,
    /// The registry asked which id each schema has (nothing is registered).
    pub registry: Option<RegistrySettings>,
    /// The pipeline's topic, for subject names.
    pub topic: String,
    /// How subjects are named.
    pub strategy: SubjectStrategy,
    /// The topics its records may name: a row with a record on another topic is shown
    /// rejected, as the pipeline would fail it.
    pub topics: TopicRule,
}

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
    /// How to read the table: batch size, object store options, catalog.
    pub source: SourceOptions,
    /// The pipeline's encoding; plain JSON when `None`.
    pub encoding: Option<PreviewEncoding>,
    /// The keyed state the module starts with (a preview keeps state in memory, as
    /// if each batch were committed).
    pub state: Vec<StateEntry>,
}

impl PreviewOptions {
    /// What `config`'s pipeline would make: its table, module, parameters, storage
    /// options, batch size and encoding, from version 0 to the latest.
    pub fn from_config(config: &PipelineConfig) -> PreviewOptions {
        PreviewOptions {
            table: config.source.table.clone(),
            module: config.transform.module.clone(),
            from: 0,
            to: None,
            limit: None,
            params: config.transform_params(),
            source: config.source_options(),
            encoding: Some(PreviewEncoding {
                format: Arc::new(config.format()),
                registry: config.registry_settings(),
                topic: config.sink.topic.clone(),
                strategy: config.sink.encoding.subject_name_strategy,
                topics: TopicRule::of(&config.sink),
            }),
            state: Vec::new(),
        }
    }
}

/// What a preview read and printed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PreviewSummary {
    /// Change rows read.
    pub rows: u64,
    /// Records printed.
    pub records: u64,
    /// Rows the module rejected, or whose records named a topic the pipeline may not
    /// write to (printed too).
    pub rejected: u64,
    /// The keyed state after the preview, in key order.
    pub state: Vec<StateEntry>,
}

/// Runs `options.module` over the table's changes and writes one JSON line per record
/// (and per rejected row) to `out`. Stops quietly when `out` is closed.
pub fn preview(
    options: &PreviewOptions,
    out: &mut dyn Write,
) -> Result<PreviewSummary, PipelineError> {
    let state = ScratchState::seeded(&options.state);
    let mut summary = preview_with(options, &state, out)?;
    summary.state = state.entries();
    Ok(summary)
}

fn preview_with(
    options: &PreviewOptions,
    state: &ScratchState,
    out: &mut dyn Write,
) -> Result<PreviewSummary, PipelineError> {
    let feed = ChangeFeed::open(&options.table, options.source.clone())?;
    let to = match options.to {
        Some(to) => to,
        None => feed.latest_version()?,
    };
    let engine = TransformEngine::new(EngineConfig {
        pooled_instances: 0,
        // One module: its compile may use every core.
        max_concurrent_compiles: 1,
        ..EngineConfig::default()
    })?;
    let module = engine.load(&options.module)?;
    let format = match &options.encoding {
        Some(encoding) => encoding.format.clone(),
        None => Arc::new(Format::default()),
    };
    let mut instance = module.instantiate(&options.params, format)?;
    let mut schemas = SchemaLookup::new(options.encoding.as_ref())?;
    let mut summary = PreviewSummary::default();
    for batch in feed.read(Position::at_version(options.from), to, Preceded::Nothing)? {
        let batch = batch?;
        let mut output = state.transform(&mut instance, &batch.batch).map_err(|e| {
            let row = match &e {
                sluice_engine::TransformError::Row { row, .. } => *row,
                _ => 0,
            };
            transform_error("preview", feed.table(), &batch, row, e)
        })?;
        let refused = match &options.encoding {
            Some(encoding) => encoding
                .topics
                .refuse(&mut output.records, &mut output.framed),
            None => Vec::new(),
        };
        summary.rows += batch.batch.num_rows() as u64;
        let first_row = batch.end.row_offset - batch.batch.num_rows() as u64;
        let mut lines = Vec::new();
        for (index, record) in output.records.iter().enumerate() {
            if options
                .limit
                .is_some_and(|limit| summary.records as usize >= limit)
            {
                break;
            }
            let mut line = record_line(batch.end.version, first_row, record);
            if let Some(framed) = output.framed.iter().find(|f| f.records.contains(&index)) {
                let topic = record.topic.as_deref();
                if let (Some(schema), Some(key)) = (&framed.key, &record.key) {
                    schemas.show(&mut line, "key", schema, key, topic);
                }
                if let (Some(schema), Some(value)) = (&framed.value, &record.value) {
                    schemas.show(&mut line, "value", schema, value, topic);
                }
            }
            lines.push(line);
            summary.records += 1;
        }
        let rejected = output.rejected.into_iter().map(|r| (r.row, r.message));
        for (row, message) in refused.into_iter().chain(rejected) {
            summary.rejected += 1;
            lines.push(json!({
                "version": batch.end.version,
                "row": first_row + u64::from(row),
                "rejected": message,
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

/// Decodes framed keys and values and says which schema id each would be produced
/// with, asking the registry once per subject and schema.
struct SchemaLookup<'a> {
    encoding: Option<&'a PreviewEncoding>,
    registry: Option<HttpRegistry>,
    answers: HashMap<(String, String), Json>,
    /// A module's own `.proto` schemas, compiled once per text and message.
    protobufs: HashMap<(String, String), Result<Arc<ProtobufSchema>, String>>,
}

impl<'a> SchemaLookup<'a> {
    fn new(encoding: Option<&'a PreviewEncoding>) -> Result<SchemaLookup<'a>, PipelineError> {
        let registry = match encoding.and_then(|e| e.registry.as_ref()) {
            Some(settings) => Some(
                HttpRegistry::new(settings)
                    .map_err(|e| PipelineError::RegistryClient(Box::new(e)))?,
            ),
            None => None,
        };
        Ok(SchemaLookup {
            encoding,
            registry,
            answers: HashMap::new(),
            protobufs: HashMap::new(),
        })
    }

    /// Replaces `line[field]` (the framed bytes) with the decoded value and adds
    /// `<field>_schema`: the subject and the id, or what registering would do.
    fn show(
        &mut self,
        line: &mut Json,
        field: &str,
        schema: &WriterSchema,
        bytes: &[u8],
        topic: Option<&str>,
    ) {
        let configured = self.encoding.and_then(|e| e.format.protobuf.clone());
        let protobuf = match (schema.kind, configured) {
            (SchemaKind::Protobuf, Some(own))
                if own.text == schema.text && own.message.full_name() == schema.name =>
            {
                Ok(Some(own))
            }
            // A module's own .proto: compiled from the text it registers.
            (SchemaKind::Protobuf, _) => self
                .protobufs
                .entry((schema.text.clone(), schema.name.clone()))
                .or_insert_with(|| {
                    ProtobufSchema::from_text(&schema.text, Some(&schema.name)).map(Arc::new)
                })
                .clone()
                .map(Some),
            _ => Ok(None),
        };
        let decoded = protobuf.and_then(|p| sluice_encoding::decode(schema, bytes, p.as_deref()));
        line[field] = match decoded {
            Ok(decoded) => decoded,
            Err(e) => json!({ "undecodable": e }),
        };
        // Without a config only a module's own schema frames anything.
        let Some(encoding) = self.encoding else {
            line[format!("{field}_schema")] = json!({
                "type": schema.kind.registry_name(),
                "name": schema.name,
                "registry": "none configured",
            });
            return;
        };
        let topic = topic.unwrap_or(&encoding.topic);
        let subject = encoding.strategy.subject(topic, field == "key", schema);
        let registry = self.registry.as_ref();
        let key = (subject.clone(), schema.text.clone());
        let first = !self.answers.contains_key(&key);
        let answer = self.answers.entry(key).or_insert_with(|| {
            let mut answer = json!({ "subject": subject, "type": schema.kind.registry_name() });
            let outcome = match registry.map(|r| r.preview(&subject, schema)) {
                None => json!({ "id": null, "registry": "none configured" }),
                Some(Ok(Registration::Known(id))) => json!({ "id": id }),
                Some(Ok(Registration::Accepted)) => {
                    json!({ "id": null, "registers": "a new version" })
                }
                Some(Ok(Registration::Refused(reasons))) => {
                    json!({ "id": null, "refused": reasons })
                }
                Some(Err(e)) => json!({ "id": null, "registry_error": e.to_string() }),
            };
            if let (Some(answer), Json::Object(outcome)) = (answer.as_object_mut(), outcome) {
                answer.extend(outcome);
            }
            answer
        });
        let mut shown = answer.clone();
        // The schema's text once, where it first appears.
        if first {
            shown["schema"] = Json::String(schema.text.clone());
        }
        line[format!("{field}_schema")] = shown;
    }
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

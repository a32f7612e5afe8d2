//! `sluice check`: validates a pipeline's config, table, module and broker without
//! running it, and lists every problem found rather than the first.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use sluice_encoding::{SchemaKind, SubjectStrategy, WriterSchema, first_unframed};
use sluice_engine::{BatchOutput, TransformInstance};
use sluice_registry::{
    HttpRegistry, Registration, RegistryError, RegistrySettings, SchemaRegistry,
};
use sluice_source::{ChangeFeed, Position, Preceded};

use crate::config::PipelineConfig;
use crate::destination::sink_config;
use crate::keyed::ScratchState;
use crate::stage::load_module;
use crate::start::configured_start;
use crate::topics::TopicRule;

/// What one part of a pipeline was found to be.
#[derive(Debug)]
pub struct Finding {
    /// `config`, `table`, `storage`, `module`, `registry` or `kafka`.
    pub part: &'static str,
    /// What was checked and found, or the problem and what to do, in a sentence.
    pub message: String,
    /// Whether it is a problem.
    pub problem: bool,
}

impl Finding {
    fn ok(part: &'static str, message: String) -> Finding {
        Finding {
            part,
            message,
            problem: false,
        }
    }

    fn problem(part: &'static str, error: impl std::fmt::Display) -> Finding {
        Finding {
            part,
            message: error.to_string(),
            problem: true,
        }
    }
}

/// Checks the pipeline in `config_path`: the config parses and is consistent, the
/// table opens and its change feed covers the configured start, the module loads and
/// accepts its parameters, the schema registry answers and would take the schemas of
/// the first batch's records, and Kafka answers and has the topics. Nothing is written
/// (no transaction is started, so a running pipeline is not fenced).
pub async fn check(config_path: &Path) -> Vec<Finding> {
    let config = match PipelineConfig::load(config_path) {
        Ok(config) => config,
        Err(e) => return vec![Finding::problem("config", e)],
    };
    let mut findings = vec![Finding::ok(
        "config",
        format!("Pipeline {} is configured.", config.pipeline.name),
    )];
    let (table, readable) = check_table(&config).await;
    findings.push(table);
    if let Some((feed, _, _)) = &readable {
        findings.push(check_storage(feed.clone()).await);
    }
    let stage_config = config.clone();
    let mut instance = None;
    findings.push(
        match tokio::task::spawn_blocking(move || {
            let module = load_module(&stage_config)?;
            let instance = module.instantiate(
                &stage_config.transform_params(),
                Arc::new(stage_config.format()),
            )?;
            Ok::<_, sluice_engine::EngineError>((module, instance))
        })
        .await
        {
            Ok(Ok((module, started))) => {
                instance = Some(started);
                Finding::ok(
                    "module",
                    format!(
                        "Module {} (sha256:{}) loaded and accepted its parameters.",
                        module.name(),
                        module.digest()
                    ),
                )
            }
            Ok(Err(e)) => Finding::problem("module", e),
            Err(e) => Finding::problem("module", format!("The module check crashed: {e}")),
        },
    );
    let registry = config.registry_settings();
    let rule = TopicRule::of(&config.sink);
    // The module runs on the first batch only when what it makes is checked: its
    // schemas, or its records' topics.
    let mut first = None;
    if let (Some((feed, start, latest)), Some(mut instance)) = (readable, instance)
        && (registry.is_some() || rule.restricts())
    {
        let ran = tokio::task::spawn_blocking(move || {
            first_output(&feed, (start, latest), &mut instance)
        })
        .await;
        match ran {
            Ok(Ok(output)) => first = Some(output),
            Ok(Err(finding)) => findings.push(finding),
            Err(e) => findings.push(Finding::problem(
                "module",
                format!("The first batch's check crashed: {e}"),
            )),
        }
    }
    if let Some(Some(output)) = &first {
        if rule.restricts() {
            findings.push(check_record_topics(&rule, output));
        }
        findings.extend(check_own_bytes(&config, output));
    }
    if let Some(settings) = registry {
        let config = config.clone();
        let checked = tokio::task::spawn_blocking(move || {
            let answers = check_registry(&config, &settings);
            // A registry that does not answer would fail every schema's check the same way.
            let reachable = !answers.problem;
            let mut findings = vec![answers];
            match first {
                Some(Some(output)) if reachable => {
                    findings.extend(check_schemas(&config, &settings, &output));
                }
                Some(None) => findings.push(Finding::ok(
                    "registry",
                    format!(
                        "The table has no change rows from the start yet; nothing is registered before the first records ({}).",
                        schema_source(&config)
                    ),
                )),
                _ => {}
            }
            findings
        })
        .await;
        findings.extend(checked.unwrap_or_else(|e| {
            vec![Finding::problem(
                "registry",
                format!("The schema registry check crashed: {e}"),
            )]
        }));
    }
    let mut topics = vec![config.sink.topic.clone()];
    topics.extend(config.transform.dead_letter_topic.clone());
    let sink = sink_config(&config);
    findings.extend(
        sluice_sink::translation_notes(&sink.properties)
            .into_iter()
            .map(|note| Finding::ok("kafka", note)),
    );
    let problems = sluice_sink::check_topics(&sink, &topics).await;
    if problems.is_empty() {
        let connection = sluice_sink::client_properties(&sink.properties)
            .map(|properties| sluice_sink::connection_summary(&properties))
            .unwrap_or_default();
        findings.push(Finding::ok(
            "kafka",
            format!(
                "Kafka at {connection} answers and has topic(s) {}.",
                topics.join(", ")
            ),
        ));
    }
    findings.extend(problems.into_iter().map(|e| Finding::problem("kafka", e)));
    findings
}

/// The registry answers and says which compatibility level the value subject has.
fn check_registry(config: &PipelineConfig, settings: &RegistrySettings) -> Finding {
    let registry = match HttpRegistry::new(settings) {
        Ok(registry) => registry,
        Err(e) => return Finding::problem("registry", e),
    };
    let format = config.format();
    let value = WriterSchema {
        kind: SchemaKind::Avro,
        text: String::new(),
        name: format.value_name(),
        references: Vec::new(),
    };
    let subject =
        config
            .sink
            .encoding
            .subject_name_strategy
            .subject(&config.sink.topic, false, &value);
    match registry.compatibility(&subject) {
        Ok(level) => Finding::ok(
            "registry",
            format!(
                "The schema registry at {} answers; subject `{subject}` has compatibility {level}. Registered when the first records are made: {}.",
                settings.url,
                schema_source(config),
            ),
        ),
        Err(e) => Finding::problem("registry", e),
    }
}

/// The value schemas a pipeline registers, in words: the file the config names, or
/// those derived from the table.
fn schema_source(config: &PipelineConfig) -> String {
    let encoding = &config.sink.encoding;
    let supplied = encoding
        .avro_schema
        .as_ref()
        .or(encoding.json_schema.as_ref())
        .or(encoding.protobuf_schema.as_ref());
    match supplied {
        Some(file) => format!("the value schema in {}", file.display()),
        None => "schemas derived from the table".to_string(),
    }
}

/// What the module makes of the first batch from the configured start; `None` when the
/// table has no change rows from there yet.
fn first_output(
    feed: &ChangeFeed,
    (start, latest): (Position, u64),
    instance: &mut TransformInstance,
) -> Result<Option<BatchOutput>, Finding> {
    let first = if start.snapshot {
        feed.read_snapshot(start).map(|mut batches| batches.next())
    } else if start.version > latest {
        Ok(None)
    } else {
        feed.read(start, latest, Preceded::Nothing)
            .map(|mut batches| batches.next())
    };
    let batch = match first {
        Ok(Some(Ok(batch))) => batch,
        Ok(None) => return Ok(None),
        Ok(Some(Err(e))) | Err(e) => return Err(Finding::problem("table", e)),
    };
    ScratchState::new().transform(&mut *instance, &batch.batch).map(Some).map_err(|e| {
        Finding::problem(
            "module",
            format!(
                "The module failed on the first batch, so neither the schemas nor the topics of its records could be checked: {e}"
            ),
        )
    })
}

/// The topics the first batch's records name, against `[sink] allowed_topics` (and a
/// tenant's prefix): a record on another topic fails its row when the pipeline runs.
fn check_record_topics(rule: &TopicRule, output: &BatchOutput) -> Finding {
    let mut seen = BTreeSet::new();
    let refused: Vec<String> = output
        .records
        .iter()
        .filter_map(|record| record.topic.as_deref())
        .filter(|topic| seen.insert(*topic))
        .filter_map(|topic| rule.refusal(topic))
        .collect();
    match refused.as_slice() {
        [] => Finding::ok(
            "module",
            "The first batch's records name only topics the pipeline may write to.".to_string(),
        ),
        [first, rest @ ..] => Finding::problem(
            "module",
            format!(
                "The first batch's records name {} topic(s) the pipeline may not write to ({first}{}): their rows fail under [transform] on_error and are never sent. Make the module name allowed topics, or list them in [sink] allowed_topics.",
                refused.len(),
                if rest.is_empty() { "" } else { "; and others" }
            ),
        ),
    }
}

/// A problem when the module writes keys or values itself that the pipeline's encoding
/// writes through the schema registry: `sluice run` would refuse that batch.
fn check_own_bytes(config: &PipelineConfig, output: &BatchOutput) -> Option<Finding> {
    let format = config.format();
    let parts = output
        .records
        .iter()
        .map(|r| (r.key.is_some(), r.value.is_some()));
    let (_, part) = first_unframed(&format, parts, &output.framed)?;
    let (asked, part) = (part.asked(&format), part.name());
    Some(Finding::problem(
        "module",
        format!(
            "The module writes record {part}s of the first batch as bytes of its own (emit, emit-bytes or emit-packed), but [sink.encoding] {part} = \"{asked}\" writes {part}s in the schema registry's wire format: `sluice run` would stop at that batch rather than produce them without a schema id. Build the {part} with the host helpers (`out.encode` in every SDK, as transforms/gold-deals-helpers does), frame the module's own encoding with emit-framed, or remove `{part} = \"{asked}\"` if its own bytes are what consumers expect."
        ),
    ))
}

/// What registering the schemas of the first batch's records would do: the registry is
/// asked about each schema they carry, without registering anything.
fn check_schemas(
    config: &PipelineConfig,
    settings: &RegistrySettings,
    output: &BatchOutput,
) -> Vec<Finding> {
    let registry = match HttpRegistry::new(settings) {
        Ok(registry) => registry,
        Err(e) => return vec![Finding::problem("registry", e)],
    };
    let strategy = config.sink.encoding.subject_name_strategy;
    let mut seen = Vec::new();
    let mut findings = Vec::new();
    // A range without records (every row filtered out) registers nothing.
    for framed in output.framed.iter().filter(|f| !f.records.is_empty()) {
        // A module's own records may name topics of their own.
        let mut topics: Vec<String> = Vec::new();
        for record in output
            .records
            .get(framed.records.clone())
            .unwrap_or_default()
        {
            let topic = record.topic.as_ref().unwrap_or(&config.sink.topic);
            if !topics.contains(topic) {
                topics.push(topic.clone());
            }
        }
        let pairs = topics.iter().flat_map(|topic| {
            [(true, &framed.key), (false, &framed.value)].map(|(k, s)| (topic, k, s))
        });
        for (topic, is_key, schema) in pairs {
            let Some(schema) = schema else { continue };
            if schema.name.is_empty() && strategy != SubjectStrategy::Topic {
                let unnamed = RegistryError::Unnamed {
                    kind: schema.kind.registry_name(),
                };
                findings.push(Finding::problem("registry", unnamed));
                continue;
            }
            let subject = strategy.subject(topic, is_key, schema);
            if seen.contains(&(subject.clone(), schema.text.clone())) {
                continue;
            }
            seen.push((subject.clone(), schema.text.clone()));
            let kind = schema.kind.registry_name();
            findings.push(match registry.preview(&subject, schema) {
                Ok(Registration::Known(id)) => Finding::ok(
                    "registry",
                    format!("Subject `{subject}` has the {kind} schema the first records are written with ({}), as id {id}.", schema.name),
                ),
                Ok(Registration::Accepted) => Finding::ok(
                    "registry",
                    format!("Subject `{subject}` would take the {kind} schema the first records are written with as its next version: {}", schema.text),
                ),
                Ok(Registration::Refused(reasons)) => Finding::problem(
                    "registry",
                    format!(
                        "Subject `{subject}` would refuse the {kind} schema the first records are written with ({reasons}): the pipeline would stop at its first batch. Make the subject's compatibility allow it, or write to a new topic. The schema: {}",
                        schema.text
                    ),
                ),
                Err(e) => Finding::problem("registry", e),
            });
        }
    }
    if findings.is_empty() {
        findings.push(Finding::ok(
            "registry",
            "The module's records from the first batch carry no schema: it makes its own bytes, or none from that batch.".to_string(),
        ));
    }
    findings
}

/// Reads the table's storage directly: the log listed and its newest commit read, with
/// the kind of store and where its credentials came from.
async fn check_storage(feed: Arc<ChangeFeed>) -> Finding {
    match tokio::task::spawn_blocking(move || feed.check_storage()).await {
        Ok(Ok(access)) => Finding::ok(
            "storage",
            format!(
                "The table is in {} (credentials: {}); its log lists {} files and {} ({} bytes) was read.",
                access.kind, access.credentials, access.log_files, access.read, access.bytes
            ),
        ),
        Ok(Err(e)) => Finding::problem("storage", e),
        Err(e) => Finding::problem("storage", format!("The storage check crashed: {e}")),
    }
}

async fn check_table(
    config: &PipelineConfig,
) -> (Finding, Option<(Arc<ChangeFeed>, Position, u64)>) {
    let options = config.source_options();
    let table = config.source.table.clone();
    let feed = match tokio::task::spawn_blocking(move || ChangeFeed::open(&table, options)).await {
        Ok(Ok(feed)) => Arc::new(feed),
        Ok(Err(e)) => return (Finding::problem("table", e), None),
        Err(e) => {
            return (
                Finding::problem("table", format!("The table check crashed: {e}")),
                None,
            );
        }
    };
    let start = match configured_start(config, &feed).await {
        Ok(start) => start,
        Err(e) => return (Finding::problem("table", e), None),
    };
    let reader = feed.clone();
    let opened = tokio::task::spawn_blocking(move || {
        let latest = reader.latest_version()?;
        if start.snapshot || start.version > latest {
            return Ok(latest);
        }
        reader
            .read(start, latest, Preceded::Nothing)
            .map(|_| latest)
    })
    .await;
    match opened {
        Ok(Ok(latest)) => (
            Finding::ok(
                "table",
                format!(
                    "Table {} is at version {latest}; its change feed can be read from {start}.",
                    feed.table()
                ),
            ),
            Some((feed, start, latest)),
        ),
        Ok(Err(e)) => (Finding::problem("table", e), None),
        Err(e) => (
            Finding::problem("table", format!("The table check crashed: {e}")),
            None,
        ),
    }
}

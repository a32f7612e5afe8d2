//! `sluice check`: validates a pipeline's config, table, module and broker without
//! running it, and lists every problem found rather than the first.

use std::path::Path;
use std::sync::Arc;

use sluice_encoding::{SchemaKind, WriterSchema};
use sluice_registry::{HttpRegistry, RegistrySettings, SchemaRegistry};
use sluice_source::{ChangeFeed, SourceOptions};

use crate::config::PipelineConfig;
use crate::run::sink_config;
use crate::stage::load_module;
use crate::start::configured_start;

/// What one part of a pipeline was found to be.
#[derive(Debug)]
pub struct Finding {
    /// `config`, `table`, `module`, `registry` or `kafka`.
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
/// accepts its parameters, and Kafka answers and has the topics. Nothing is written
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
    findings.push(check_table(&config).await);
    let stage_config = config.clone();
    findings.push(
        match tokio::task::spawn_blocking(move || {
            let module = load_module(&stage_config)?;
            module.instantiate(
                &stage_config.transform_params(),
                Arc::new(stage_config.format()),
            )?;
            Ok::<_, sluice_engine::EngineError>(module)
        })
        .await
        {
            Ok(Ok(module)) => Finding::ok(
                "module",
                format!(
                    "Module {} (sha256:{}) loaded and accepted its parameters.",
                    module.name(),
                    module.digest()
                ),
            ),
            Ok(Err(e)) => Finding::problem("module", e),
            Err(e) => Finding::problem("module", format!("The module check crashed: {e}")),
        },
    );
    if let Some(settings) = config.registry_settings() {
        let config = config.clone();
        findings.push(
            match tokio::task::spawn_blocking(move || check_registry(&config, &settings)).await {
                Ok(finding) => finding,
                Err(e) => Finding::problem(
                    "registry",
                    format!("The schema registry check crashed: {e}"),
                ),
            },
        );
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
                "The schema registry at {} answers; subject `{subject}` has compatibility {level}. Schemas are derived from the table when the first records are made.",
                settings.url
            ),
        ),
        Err(e) => Finding::problem("registry", e),
    }
}

async fn check_table(config: &PipelineConfig) -> Finding {
    let options = SourceOptions {
        batch_rows: config.source.batch_rows,
        storage_options: config.source.storage_options.clone().into_iter().collect(),
    };
    let table = config.source.table.clone();
    let feed = match tokio::task::spawn_blocking(move || ChangeFeed::open(&table, options)).await {
        Ok(Ok(feed)) => Arc::new(feed),
        Ok(Err(e)) => return Finding::problem("table", e),
        Err(e) => return Finding::problem("table", format!("The table check crashed: {e}")),
    };
    let start = match configured_start(config, &feed).await {
        Ok(start) => start,
        Err(e) => return Finding::problem("table", e),
    };
    let reader = feed.clone();
    let opened = tokio::task::spawn_blocking(move || {
        let latest = reader.latest_version()?;
        if start.snapshot || start.version > latest {
            return Ok(latest);
        }
        reader.read(start, latest).map(|_| latest)
    })
    .await;
    match opened {
        Ok(Ok(latest)) => Finding::ok(
            "table",
            format!(
                "Table {} is at version {latest}; its change feed can be read from {start}.",
                feed.table()
            ),
        ),
        Ok(Err(e)) => Finding::problem("table", e),
        Err(e) => Finding::problem("table", format!("The table check crashed: {e}")),
    }
}

//! What the API shows of pipelines: statuses with position, lag, rates and the config
//! with its secrets redacted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use sluice_pipeline::{MetricsSnapshot, Position, Waiting};

use super::Service;
use super::last_swap::LastSwap;
use super::registry::Entry;
use super::tenancy::changelog_topic;
use crate::auth::{Operator, TenantScope};
use crate::error::ServiceError;
use crate::store::{ModuleEntry, PipelineDefinition, PipelineState};

/// Rate samples kept per pipeline (one per `SAMPLE_EVERY`).
const RATE_SAMPLES: usize = 10;

/// How often rates are sampled.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// A pipeline's status, as the API shows it.
#[derive(Clone, Debug, Serialize)]
pub struct PipelineStatus {
    /// The owning tenant.
    pub tenant: String,
    /// Its name.
    pub name: String,
    /// `running`, `paused` or `failed`.
    pub state: PipelineState,
    /// In a cluster, the node that runs it (as last reported); unset when it runs
    /// nowhere or the service runs alone.
    pub node: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// What it waits for while it waits out an outage (the schema registry), with a
    /// sentence saying since when and why.
    pub waiting: Option<WaitingStatus>,
    /// The module it runs.
    pub module: ModuleView,
    /// The module `rollback` returns to.
    pub previous_module: Option<String>,
    /// The table.
    pub table: String,
    /// The topic for records that name none.
    pub topic: String,
    /// The topic of its dead letters (`[transform] dead_letter_topic`), if it has one.
    pub dead_letter_topic: Option<String>,
    /// The topic its keyed state is committed to, when it keeps state (`[state]`):
    /// named after the pipeline and its state's generation, which a reset moves on.
    pub changelog_topic: Option<String>,
    /// The last module swap made through this node since it started.
    pub last_swap: Option<LastSwap>,
    /// The last version it delivers (`[source] ending_version`), after which it is
    /// finished: a replay's end.
    pub ending_version: Option<u64>,
    /// Where it is (as of its last commit since the service started).
    pub position: Position,
    /// The table's latest version when last looked at.
    pub latest_version: u64,
    /// Versions committed to the table and not yet delivered.
    pub lag_versions: u64,
    /// Change rows per second over the last seconds.
    pub rows_per_second: f64,
    /// Counters since the service started.
    pub counters: MetricsSnapshot,
    /// The config as submitted, secrets redacted.
    pub config: String,
}

/// An outage a running pipeline waits out.
#[derive(Clone, Debug, Serialize)]
pub struct WaitingStatus {
    /// What it waits for, since when, why.
    #[serde(flatten)]
    pub waiting: Waiting,
    /// The same in a sentence.
    pub message: String,
}

/// A module by digest and name.
#[derive(Clone, Debug, Serialize)]
pub struct ModuleView {
    /// SHA-256 of its bytes.
    pub digest: String,
    /// Its name.
    pub name: String,
    /// The language it was written in, when its toolchain said.
    pub language: Option<String>,
    /// Its size.
    pub size_bytes: u64,
}

/// A tenant's module and the pipelines that run it.
#[derive(Clone, Debug, Serialize)]
pub struct ModuleListing {
    /// The module.
    #[serde(flatten)]
    pub module: ModuleEntry,
    /// Names of the tenant's pipelines that run it.
    pub used_by: Vec<String>,
}

impl Service {
    /// The tenant's pipelines.
    pub async fn pipelines(
        &self,
        tenant: &TenantScope,
    ) -> Result<Vec<PipelineStatus>, ServiceError> {
        self.found(|| self.tenant(tenant)).await?;
        let entries: Vec<Arc<Entry>> = self
            .pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|((t, _), _)| **t == **tenant)
            .map(|(_, e)| e.clone())
            .collect();
        entries.iter().map(|e| self.status_of(e)).collect()
    }

    /// One pipeline's status.
    pub async fn status(
        &self,
        tenant: &TenantScope,
        name: &str,
    ) -> Result<PipelineStatus, ServiceError> {
        let entry = self.found(|| self.entry(tenant, name)).await?;
        self.status_of(&entry)
    }

    pub(super) fn status_of(&self, entry: &Entry) -> Result<PipelineStatus, ServiceError> {
        let definition = entry.definition();
        let module = self.state.module(&definition.tenant, &definition.module)?;
        let (node, counters, rows_per_second) = self.figures(entry, &definition);
        let position = position_of(&definition, &counters);
        let config = toml::from_str::<toml::Table>(&definition.config).unwrap_or_default();
        let setting = |section: &str, key: &str| {
            config
                .get(section)
                .and_then(|s| s.get(key))
                .and_then(toml::Value::as_str)
                .map(str::to_string)
        };
        let (table, topic) = (
            setting("source", "table").unwrap_or_default(),
            setting("sink", "topic").unwrap_or_default(),
        );
        let waiting = counters
            .waiting
            .clone()
            .filter(|_| definition.state == PipelineState::Running)
            .map(|waiting| WaitingStatus {
                message: waiting.sentence(crate::store::now_millis()),
                waiting,
            });
        let changelog_topic = config.contains_key("state").then(|| {
            changelog_topic(
                &definition.tenant,
                &definition.name,
                definition.state_generation,
            )
        });
        Ok(PipelineStatus {
            tenant: definition.tenant,
            name: definition.name,
            state: definition.state,
            node,
            error: definition.error,
            waiting,
            module: ModuleView {
                digest: definition.module,
                name: module.as_ref().map(|m| m.name.clone()).unwrap_or_default(),
                language: module.as_ref().and_then(|m| m.language.clone()),
                size_bytes: module.as_ref().map_or(0, |m| m.size_bytes),
            },
            previous_module: definition.previous_module,
            table,
            topic,
            // As the dead-letters call: only a pipeline that sends letters has a topic.
            dead_letter_topic: setting("transform", "dead_letter_topic")
                .filter(|_| setting("transform", "on_error").as_deref() == Some("dead-letter")),
            changelog_topic,
            ending_version: config
                .get("source")
                .and_then(|s| s.get("ending_version"))
                .and_then(toml::Value::as_integer)
                .and_then(|v| u64::try_from(v).ok()),
            last_swap: entry
                .last_swap
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            position,
            latest_version: counters.latest_version,
            lag_versions: counters.lag_versions(),
            rows_per_second,
            counters,
            config: redacted(&definition.config),
        })
    }

    /// Where a pipeline's figures come from: in a cluster the running node's (this
    /// node's own when it runs the pipeline, else the last report of the node that
    /// does). Returns the node, the counters and the rows per second.
    pub(super) fn figures(
        &self,
        entry: &Entry,
        definition: &PipelineDefinition,
    ) -> (Option<String>, MetricsSnapshot, f64) {
        self.placement().figures(self, entry, definition)
    }

    /// The tenant's modules, each with the pipelines that run it.
    pub async fn modules(&self, tenant: &TenantScope) -> Result<Vec<ModuleListing>, ServiceError> {
        self.found(|| self.tenant(tenant)).await?;
        let definitions: Vec<PipelineDefinition> = self
            .entries()
            .iter()
            .map(|e| e.definition())
            .filter(|d| d.tenant == **tenant)
            .collect();
        let modules = self.state.modules(tenant)?;
        Ok(modules
            .into_iter()
            .map(|module| ModuleListing {
                used_by: definitions
                    .iter()
                    .filter(|d| d.module == module.digest)
                    .map(|d| d.name.clone())
                    .collect(),
                module,
            })
            .collect())
    }

    /// The statuses this node's metrics show (operator only): every pipeline's when it
    /// runs alone; in a cluster those it runs, so scraping every node counts each
    /// pipeline once.
    pub fn metric_statuses(&self, _: &Operator) -> Result<Vec<PipelineStatus>, ServiceError> {
        let placement = self.placement();
        self.entries()
            .iter()
            .filter(|e| placement.counts(self, &e.definition()))
            .map(|e| self.status_of(e))
            .collect()
    }

    /// Takes a sample of each pipeline's rows counter, for its rate.
    pub fn sample_rates(&self) {
        let now = Instant::now();
        for entry in self.entries() {
            let rows = entry.metrics.snapshot().rows_in;
            let mut rates = entry.rates.lock().unwrap_or_else(|e| e.into_inner());
            if rates.len() == RATE_SAMPLES {
                rates.pop_front();
            }
            rates.push_back((now, rows));
        }
    }
}

/// Where a pipeline is: from its counters while it runs, else where it last stopped.
pub(super) fn position_of(definition: &PipelineDefinition, counters: &MetricsSnapshot) -> Position {
    let counted = counters.position;
    match definition.stopped_at {
        Some(stopped)
            if definition.state != PipelineState::Running || counted == Position::default() =>
        {
            stopped
        }
        _ => counted,
    }
}

/// The config text with secret Kafka properties replaced.
pub(crate) fn redacted(text: &str) -> String {
    let Ok(mut table) = toml::from_str::<toml::Table>(text) else {
        return String::new();
    };
    if let Some(kafka) = table
        .get_mut("sink")
        .and_then(|s| s.get_mut("kafka"))
        .and_then(toml::Value::as_table_mut)
    {
        for (name, value) in kafka.iter_mut() {
            if sluice_pipeline::is_secret_property(name) {
                *value = "<redacted>".into();
            }
        }
    }
    toml::to_string(&table).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_and_the_rest_kept() {
        let text = r#"
            [sink]
            topic = "t"
            [sink.kafka]
            "bootstrap.servers" = "b:9092"
            "sasl.password" = "hunter2"
            "ssl.key.password" = "k"
            "sasl.oauthbearer.client.secret" = "s"
        "#;
        let shown = redacted(text);
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!shown.contains("\"k\""), "{shown}");
        assert!(!shown.contains("\"s\""), "{shown}");
        assert!(shown.contains("b:9092"), "{shown}");
    }
}

//! Tenancy and limits: the tenants (from the config file, or added through the
//! operator API), the config a tenant's pipeline runs with, checked against the
//! tenant's limits, and the host's room for one more pipeline.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use sluice_pipeline::PipelineConfig;

use super::Service;
use super::registry::{Entry, Reserved};
use crate::auth::{Operator, TenantScope, tenant_token};
use crate::config::{HostLimits, TenantConfig};
use crate::error::ServiceError;
use crate::store::PipelineDefinition;

/// A tenant the service knows.
pub(super) struct Tenant {
    /// Its settings with Kafka references resolved, as its pipelines use them.
    pub(super) config: Arc<TenantConfig>,
    /// As the operator put it through the API, references unresolved; `None` for a
    /// tenant of the config file.
    pub(super) stored: Option<TenantConfig>,
}

impl Tenant {
    /// A tenant of the config file (resolved when the file was read).
    pub(super) fn from_file(config: &TenantConfig) -> Tenant {
        Tenant {
            config: Arc::new(config.clone()),
            stored: None,
        }
    }
}

/// Where a tenant comes from.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum TenantSource {
    /// The node's config file: changed there, not through the API.
    ConfigFile,
    /// The operator API.
    Api,
}

/// What the API shows of a tenant: its limits and settings, secrets redacted and
/// its token left out.
#[derive(Clone, Debug, Serialize)]
pub struct TenantView {
    /// Its name.
    pub name: String,
    /// Where it comes from.
    pub source: TenantSource,
    /// Its pipelines on the service.
    pub pipelines: usize,
    /// Its limits and settings.
    pub settings: TenantConfig,
}

/// librdkafka properties that name files or programs on the host: a tenant could read
/// the host's keys or load code with them, so only the operator may set them.
pub(crate) fn reaches_host_files(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.ends_with(".location")
        || name.ends_with(".paths")
        || name.ends_with(".cmd")
        || name.contains("keytab")
        || name.ends_with(".file")
}

/// Refuses a new pipeline of `tenant` that would reserve `asked` when the tenant or
/// the host is at a limit.
pub(super) fn check_room(
    pipelines: &BTreeMap<(String, String), Arc<Entry>>,
    tenant: &str,
    limits: &TenantConfig,
    host: &HostLimits,
    asked: Reserved,
) -> Result<(), ServiceError> {
    let own = pipelines.keys().filter(|(t, _)| t == tenant).count();
    if own >= limits.max_pipelines {
        return Err(ServiceError::LimitExceeded(format!(
            "tenant {tenant} has {own} pipelines, its limit"
        )));
    }
    if pipelines.len() >= host.max_pipelines {
        return Err(ServiceError::LimitExceeded(format!(
            "this host runs {} pipelines, its limit",
            pipelines.len()
        )));
    }
    let memory: usize = pipelines.values().map(|e| e.reserved.memory_mib).sum();
    if memory + asked.memory_mib > host.max_memory_mib {
        return Err(ServiceError::LimitExceeded(format!(
            "this host's pipelines may already use {memory} MiB of guest memory; {} MiB more would pass its limit of {} MiB",
            asked.memory_mib, host.max_memory_mib
        )));
    }
    let state: u64 = pipelines
        .iter()
        .filter(|((t, _), _)| t == tenant)
        .map(|(_, e)| e.reserved.state_mib)
        .sum();
    if asked.state_mib > 0 && state + asked.state_mib > limits.max_state_total_mib {
        return Err(ServiceError::LimitExceeded(format!(
            "tenant {tenant}'s pipelines may already keep {state} MiB of state; {} MiB more ([state] max_mib) would pass its limit of {} MiB (max_state_total_mib); give the pipeline a smaller [state] max_mib, or ask the operator for more",
            asked.state_mib, limits.max_state_total_mib
        )));
    }
    Ok(())
}

impl Service {
    /// A tenant's settings.
    pub(super) fn tenant(&self, tenant: &str) -> Result<Arc<TenantConfig>, ServiceError> {
        self.tenants
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(tenant)
            .map(|t| t.config.clone())
            .ok_or_else(|| super::not_found(format!("Tenant {tenant}")))
    }

    /// Every tenant (operator only).
    pub fn tenant_views(&self, _: &Operator) -> Result<Vec<TenantView>, ServiceError> {
        let names: Vec<String> = self
            .tenants
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        names.iter().map(|name| self.view_of_tenant(name)).collect()
    }

    /// One tenant, for the operator or the tenant itself.
    pub fn tenant_view(&self, tenant: &TenantScope) -> Result<TenantView, ServiceError> {
        self.view_of_tenant(tenant)
    }

    fn view_of_tenant(&self, name: &str) -> Result<TenantView, ServiceError> {
        let (source, mut settings) = {
            let tenants = self.tenants.read().unwrap_or_else(|e| e.into_inner());
            let tenant = tenants
                .get(name)
                .ok_or_else(|| super::not_found(format!("Tenant {name}")))?;
            match &tenant.stored {
                Some(stored) => (TenantSource::Api, stored.clone()),
                None => (TenantSource::ConfigFile, (*tenant.config).clone()),
            }
        };
        settings.token_file = None;
        settings.token_sha256 = None;
        for (property, value) in &mut settings.kafka {
            if sluice_pipeline::is_secret_property(property) {
                *value = "<redacted>".into();
            }
        }
        let pipelines = self
            .pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .filter(|(t, _)| t == name)
            .count();
        Ok(TenantView {
            name: name.to_string(),
            source,
            pipelines,
            settings,
        })
    }

    /// Adds or changes a tenant (operator only). Its pipelines take changed settings
    /// when they next start; in a cluster every node has the tenant once this returns
    /// on the node that took the call and soon after on the others.
    pub async fn put_tenant(
        &self,
        _: &Operator,
        name: &str,
        settings: TenantConfig,
    ) -> Result<TenantView, ServiceError> {
        self.check_tenant(name, &settings)?;
        self.placement()
            .save_tenant(self, name, Some(&settings))
            .await?;
        tracing::info!(tenant = name, "A tenant was put through the API.");
        self.view_of_tenant(name)
    }

    /// Removes a tenant added through the API (operator only); refused while it has
    /// pipelines. Its uploaded modules are kept: they come back with the tenant.
    pub async fn delete_tenant(&self, _: &Operator, name: &str) -> Result<(), ServiceError> {
        let view = self.view_of_tenant(name)?;
        if view.source == TenantSource::ConfigFile {
            return Err(ServiceError::Conflict(format!(
                "tenant {name} is defined in the service's config file; remove it there"
            )));
        }
        if view.pipelines > 0 {
            return Err(ServiceError::Conflict(format!(
                "tenant {name} has {} pipelines; delete them first",
                view.pipelines
            )));
        }
        self.placement().save_tenant(self, name, None).await?;
        tracing::info!(tenant = name, "A tenant was removed through the API.");
        Ok(())
    }

    /// Refuses a tenant the API may not put as given.
    fn check_tenant(&self, name: &str, settings: &TenantConfig) -> Result<(), ServiceError> {
        if self.config.tenants.contains_key(name) {
            return Err(ServiceError::Conflict(format!(
                "tenant {name} is defined in the service's config file; change it there"
            )));
        }
        if settings.token_file.is_some() {
            return Err(ServiceError::BadRequest(format!(
                "tenant {name}: token_file names a file on one machine; give token_sha256, the SHA-256 of the token in hex"
            )));
        }
        settings
            .validate(name, self.config.server.fuel_metering)
            .map_err(ServiceError::BadRequest)?;
        let most = self.config.limits.max_module_mib;
        if settings.max_module_mib > most {
            return Err(ServiceError::LimitExceeded(format!(
                "tenant {name} asks for max_module_mib = {}; this service allows at most {most} ([limits] max_module_mib)",
                settings.max_module_mib
            )));
        }
        settings
            .clone()
            .resolve_kafka(&self.config.server.state_dir)
            .map_err(|e| ServiceError::BadRequest(format!("tenant {name}: [kafka] {e}")))?;
        let token = tenant_token(name, settings)?;
        if self.tokens.is_taken(name, &token) {
            return Err(ServiceError::Conflict(format!(
                "tenant {name}'s token is also another caller's; give every caller its own"
            )));
        }
        Ok(())
    }

    /// Takes a tenant the operator put: its token is accepted from now on.
    pub(super) fn install_tenant(
        &self,
        name: &str,
        stored: TenantConfig,
    ) -> Result<(), ServiceError> {
        let mut config = stored.clone();
        config
            .resolve_kafka(&self.config.server.state_dir)
            .map_err(|e| ServiceError::BadRequest(format!("tenant {name}: [kafka] {e}")))?;
        self.tokens.set_tenant(name, tenant_token(name, &stored)?)?;
        self.tenants
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                name.to_string(),
                Tenant {
                    config: Arc::new(config),
                    stored: Some(stored),
                },
            );
        Ok(())
    }

    /// Forgets a tenant the operator put: its token is refused from now on.
    pub(super) fn uninstall_tenant(&self, name: &str) -> Result<(), ServiceError> {
        if self.config.tenants.contains_key(name) {
            return Ok(());
        }
        self.tokens.remove_tenant(name);
        self.refusals.forget_tenant(name);
        self.tenants
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
        self.state.remove_tenant(name)
    }

    /// A tenant pipeline's `[state]`: where the service keeps it (on its disk, and a
    /// changelog topic named after the pipeline and its state `generation`, which a
    /// reset moves on), with the tenant's caps as defaults.
    fn state_section(
        &self,
        mut state: toml::Table,
        tenant: &str,
        name: &str,
        generation: u64,
        limits: &TenantConfig,
    ) -> Result<toml::Table, String> {
        for key in ["dir", "changelog_topic"] {
            if state.contains_key(key) {
                return Err(format!("leave out [state] {key}: the service sets it"));
            }
        }
        let defaults = [
            (
                "max_mib",
                PipelineConfig::DEFAULT_STATE_MAX_MIB.min(limits.max_state_mib),
            ),
            (
                "max_keys",
                PipelineConfig::DEFAULT_STATE_MAX_KEYS.min(limits.max_state_keys),
            ),
        ];
        for (key, default) in defaults {
            if !state.contains_key(key) {
                let default = i64::try_from(default).unwrap_or(i64::MAX);
                state.insert(key.into(), default.into());
            }
        }
        let dir = self.state.pipeline_state_dir(tenant, name, generation);
        state.insert("dir".into(), dir.display().to_string().into());
        state.insert(
            "changelog_topic".into(),
            changelog_topic(tenant, name, generation).into(),
        );
        Ok(state)
    }

    /// The config a defined pipeline runs with.
    pub(crate) fn config_of(
        &self,
        definition: &PipelineDefinition,
    ) -> Result<PipelineConfig, ServiceError> {
        self.pipeline_config(
            &definition.tenant,
            &definition.name,
            &definition.config,
            &definition.module,
            definition.state_generation,
        )
    }

    /// The config a pipeline runs with: the submitted text, with the service's name,
    /// module path and the tenant's Kafka settings, checked against the tenant's limits.
    /// `generation` is its state's (see [`changelog_topic`]).
    pub(crate) fn pipeline_config(
        &self,
        tenant: &str,
        name: &str,
        text: &str,
        digest: &str,
        generation: u64,
    ) -> Result<PipelineConfig, ServiceError> {
        let limits = self.tenant(tenant)?;
        let limits = limits.as_ref();
        let bad = |m: String| ServiceError::BadRequest(format!("pipeline {name}: {m}"));
        let mut table: toml::Table = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
        let section = |table: &mut toml::Table, key: &str| -> Result<toml::Table, ServiceError> {
            match table.remove(key) {
                None => Ok(toml::Table::new()),
                Some(toml::Value::Table(t)) => Ok(t),
                Some(_) => Err(bad(format!("`{key}` must be a table"))),
            }
        };
        let mut pipeline = section(&mut table, "pipeline")?;
        if pipeline.contains_key("name") {
            return Err(bad(
                "leave out [pipeline] name: the service names pipelines `<tenant>.<name>`".into(),
            ));
        }
        pipeline.insert("name".into(), format!("{tenant}.{name}").into());
        table.insert("pipeline".into(), pipeline.into());
        let mut transform = section(&mut table, "transform")?;
        for key in ["module", "module_cache_dir"] {
            if transform.contains_key(key) {
                return Err(bad(format!(
                    "leave out [transform] {key}: the service sets it"
                )));
            }
        }
        // A pipeline that names no limit gets the default, or the tenant's cap if lower.
        if !transform.contains_key("memory_limit_mib") {
            let default = PipelineConfig::DEFAULT_MEMORY_LIMIT_MIB.min(limits.max_memory_mib);
            transform.insert("memory_limit_mib".into(), (default as i64).into());
        }
        if !transform.contains_key("batch_timeout") {
            let default = PipelineConfig::DEFAULT_BATCH_TIMEOUT.min(limits.max_batch_timeout);
            transform.insert(
                "batch_timeout".into(),
                format!("{}ms", default.as_millis()).into(),
            );
        }
        transform.insert(
            "module".into(),
            self.state.module_path(digest).display().to_string().into(),
        );
        table.insert("transform".into(), transform.into());
        let mut sink = section(&mut table, "sink")?;
        let mut kafka = match sink.remove("kafka") {
            None => toml::Table::new(),
            Some(toml::Value::Table(t)) => t,
            Some(_) => return Err(bad("[sink] kafka must be a table".into())),
        };
        for (property, value) in &kafka {
            if reaches_host_files(property) {
                return Err(bad(format!(
                    "[sink.kafka] `{property}` names files or programs on the host; only the operator may set it (in [tenants.{tenant}.kafka])"
                )));
            }
            if value.as_str().is_some_and(|v| v.starts_with("${")) {
                return Err(bad(format!(
                    "[sink.kafka] `{property}` is a reference; references are resolved only in the operator's config (put credentials in the tenant's [tenants.{tenant}.kafka])"
                )));
            }
        }
        for (property, value) in &limits.kafka {
            kafka.insert(property.clone(), value.clone().into());
        }
        sink.insert("kafka".into(), kafka.into());
        table.insert("sink".into(), sink.into());
        // A section must be a table: serde would also read `source = ["/any/path"]` as
        // one, past the checks below (found by fuzz_tenant_pipeline_config).
        let source = section(&mut table, "source")?;
        if source.contains_key("catalog") {
            // The catalog decides where the table is, past the tenant's table_prefixes.
            return Err(bad(
                "[source.catalog] is not available to tenants: a catalog's locations are not confined to the tenant's tables; name the table by its location".into(),
            ));
        }
        table.insert("source".into(), source.into());
        if table.contains_key("state") {
            let state = self
                .state_section(
                    section(&mut table, "state")?,
                    tenant,
                    name,
                    generation,
                    limits,
                )
                .map_err(bad)?;
            table.insert("state".into(), state.into());
        }
        // Every table the pipeline reads, as submitted (before paths are resolved).
        let source_table = table
            .get("source")
            .and_then(|s| s.get("table"))
            .and_then(toml::Value::as_str)
            .map(|location| ("[source] table".to_string(), "reads", location));
        let lookup_tables = table
            .get("lookup")
            .and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|lookup| {
                let location = lookup.get("table")?.as_str()?;
                let lookup_name = lookup.get("name").and_then(toml::Value::as_str);
                Some((
                    format!("[[lookup]] {} table", lookup_name.unwrap_or("?")),
                    "looks rows up in",
                    location,
                ))
            });
        for (option, verb, location) in source_table.into_iter().chain(lookup_tables) {
            if !location.contains("://") && !Path::new(location).is_absolute() {
                return Err(bad(format!(
                    "{option} `{location}` must be an absolute path or a URL"
                )));
            }
            if !limits.table_prefixes.is_empty()
                && !limits
                    .table_prefixes
                    .iter()
                    .any(|p| location.starts_with(p.as_str()))
            {
                return Err(ServiceError::LimitExceeded(format!(
                    "pipeline {name} {verb} table {location}; tenant {tenant} may read only tables under {}",
                    limits.table_prefixes.join(", ")
                )));
            }
        }
        let text = toml::to_string(&table).map_err(|e| bad(e.to_string()))?;
        let mut config =
            PipelineConfig::parse(&text, self.state.compiled_dir().as_path()).map_err(bad)?;
        let lookup_mib: u64 = config.lookups.iter().map(|l| l.max_mib).sum();
        if lookup_mib > limits.max_lookup_mib {
            return Err(ServiceError::LimitExceeded(format!(
                "pipeline {name}'s lookups ask for {lookup_mib} MiB ([[lookup]] max_mib); tenant {tenant} may use at most {} (max_lookup_mib)",
                limits.max_lookup_mib
            )));
        }
        config.transform.module_cache_dir = Some(self.state.compiled_dir());
        let transform = &mut config.transform;
        // Compiles are the host's work done for the tenant: its caps bound them whatever
        // the pipeline asks.
        transform.compile_timeout = transform
            .compile_timeout
            .min(Duration::from_secs(limits.max_compile_seconds));
        transform.compile_memory_mib = transform.compile_memory_mib.min(limits.max_compile_mib);
        if transform.memory_limit_mib > limits.max_memory_mib {
            return Err(ServiceError::LimitExceeded(format!(
                "pipeline {name} asks for memory_limit_mib = {}; tenant {tenant} may use at most {}",
                transform.memory_limit_mib, limits.max_memory_mib
            )));
        }
        if transform.batch_timeout > limits.max_batch_timeout {
            return Err(ServiceError::LimitExceeded(format!(
                "pipeline {name} asks for batch_timeout = {:?}; tenant {tenant} may use at most {:?}",
                transform.batch_timeout, limits.max_batch_timeout
            )));
        }
        match (limits.max_fuel_per_batch, transform.fuel_per_batch) {
            (Some(max), Some(asked)) if asked > max => {
                return Err(ServiceError::LimitExceeded(format!(
                    "pipeline {name} asks for fuel_per_batch = {asked}; tenant {tenant} may use at most {max}"
                )));
            }
            (Some(max), None) => transform.fuel_per_batch = Some(max),
            (None, Some(_)) if !self.config.server.fuel_metering => {
                return Err(bad("fuel_per_batch needs the service's fuel metering ([server] fuel_metering = true)".into()));
            }
            _ => {}
        }
        for (what, asked, max) in [
            (
                "[transform] max_output_mib",
                config.transform.max_output_mib,
                limits.max_output_mib,
            ),
            (
                "[source] batch_rows",
                config.source.batch_rows,
                limits.max_batch_rows,
            ),
            (
                "[transform] log_messages_per_second",
                config.transform.log_messages_per_second as usize,
                limits.max_log_messages_per_second as usize,
            ),
            (
                "[transform] instances",
                config.transform.instances,
                limits.max_instances,
            ),
            (
                "[state] max_mib",
                config.state.as_ref().map_or(0, |s| s.max_mib as usize),
                limits.max_state_mib as usize,
            ),
            (
                "[state] max_keys",
                config.state.as_ref().map_or(0, |s| s.max_keys as usize),
                limits.max_state_keys as usize,
            ),
        ] {
            if asked > max {
                return Err(ServiceError::LimitExceeded(format!(
                    "pipeline {name} asks for {what} = {asked}; tenant {tenant} may use at most {max}"
                )));
            }
        }
        if let Some(prefix) = &limits.topic_prefix {
            let topics = std::iter::once(&config.sink.topic)
                .chain(&config.transform.dead_letter_topic)
                .chain(&config.sink.position_topic)
                .chain(config.sink.allowed_topics.iter().flatten());
            for topic in topics {
                if !topic.starts_with(prefix.as_str()) {
                    return Err(ServiceError::LimitExceeded(format!(
                        "pipeline {name} writes to topic {topic}; tenant {tenant}'s topics must start with `{prefix}`"
                    )));
                }
            }
        }
        // The topics the module names in its records are held to the prefix too, one
        // record at a time, as the pipeline runs.
        config.sink.topic_prefix = limits.topic_prefix.clone();
        Ok(config)
    }
}

/// The changelog topic of a tenant pipeline's state: a reset moves the pipeline to
/// the next generation's topic, which starts empty.
pub(crate) fn changelog_topic(tenant: &str, name: &str, generation: u64) -> String {
    match generation {
        0 => format!("sluice-state-{tenant}.{name}"),
        n => format!("sluice-state-{tenant}.{name}.g{n}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServeConfig;

    /// Every topic a tenant's pipeline names in its config, and every topic its module
    /// names in a record, is held to the tenant's prefix (issue 35: a module's records
    /// reached 3,000 topics in another tenant's prefix).
    #[test]
    fn a_tenant_s_topics_stay_within_its_prefix() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("operator.token"),
            "operator-token-0123456789",
        )
        .unwrap();
        std::fs::write(dir.path().join("evil.token"), "evil-token-0123456789").unwrap();
        let serve = dir.path().join("serve.toml");
        std::fs::write(
            &serve,
            "[server]\nstate_dir = \"state\"\noperator_token_file = \"operator.token\"\n\n[tenants.evil]\ntoken_file = \"evil.token\"\ntopic_prefix = \"evil.\"\n",
        )
        .unwrap();
        let service = Service::new(ServeConfig::load(&serve).unwrap()).unwrap();
        let config = |sink: &str| {
            let text = format!(
                "[source]\ntable = \"/data/deals\"\n[transform]\n[sink]\ntopic = \"evil.deals\"\n{sink}\n[sink.kafka]\n\"bootstrap.servers\" = \"b:9092\"\n"
            );
            service.pipeline_config("evil", "deals", &text, &"0".repeat(64), 0)
        };

        let allowed = config("allowed_topics = [\"evil.audit\", \"evil.by-country.*\"]").unwrap();
        assert_eq!(allowed.sink.topic_prefix.as_deref(), Some("evil."));
        for sink in [
            "position_topic = \"acme.position\"",
            "allowed_topics = [\"acme.*\"]",
        ] {
            let Err(ServiceError::LimitExceeded(message)) = config(sink) else {
                panic!("{sink} passed");
            };
            assert!(
                message.contains("acme.") && message.contains("`evil.`"),
                "{message}"
            );
        }
    }

    /// A tenant's lookup tables are held to its table prefixes like its source, and
    /// their stores to its `max_lookup_mib`.
    #[test]
    fn a_tenant_s_lookups_stay_within_its_tables_and_lookup_budget() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("operator.token"),
            "operator-token-0123456789",
        )
        .unwrap();
        std::fs::write(dir.path().join("acme.token"), "acme-token-0123456789").unwrap();
        let serve = dir.path().join("serve.toml");
        std::fs::write(
            &serve,
            "[server]\nstate_dir = \"state\"\noperator_token_file = \"operator.token\"\n\n[tenants.acme]\ntoken_file = \"acme.token\"\ntable_prefixes = [\"/data/acme/\"]\nmax_lookup_mib = 100\n",
        )
        .unwrap();
        let service = Service::new(ServeConfig::load(&serve).unwrap()).unwrap();
        let config = |table: &str, max_mib: u64| {
            let text = format!(
                "[source]\ntable = \"/data/acme/deals\"\n[sink]\ntopic = \"deals\"\n[sink.kafka]\n\"bootstrap.servers\" = \"b:9092\"\n[[lookup]]\nname = \"owners\"\ntable = \"{table}\"\nkey = [\"id\"]\ncolumns = [\"name\"]\nmax_mib = {max_mib}\n"
            );
            service.pipeline_config("acme", "deals", &text, &"0".repeat(64), 0)
        };

        let allowed = config("/data/acme/owners", 100).unwrap();
        assert_eq!(allowed.lookups[0].table, "/data/acme/owners");
        let Err(ServiceError::LimitExceeded(message)) = config("/data/globex/owners", 100) else {
            panic!("another tenant's table passed");
        };
        assert!(
            message.contains("looks rows up in table /data/globex/owners"),
            "{message}"
        );
        let Err(ServiceError::BadRequest(message)) = config("owners", 100) else {
            panic!("a relative path passed");
        };
        assert!(
            message.contains("[[lookup]] owners table `owners` must be an absolute path"),
            "{message}"
        );
        let Err(ServiceError::LimitExceeded(message)) = config("/data/acme/owners", 101) else {
            panic!("a lookup past the budget passed");
        };
        assert!(message.contains("(max_lookup_mib)"), "{message}");
    }

    /// A tenant's `[state]` is kept where the service says, under the tenant's caps: a
    /// tenant naming a directory would write anywhere on the host.
    #[test]
    fn a_tenant_s_state_is_kept_by_the_service_under_its_caps() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("operator.token"),
            "operator-token-0123456789",
        )
        .unwrap();
        std::fs::write(dir.path().join("acme.token"), "acme-token-0123456789").unwrap();
        let serve = dir.path().join("serve.toml");
        std::fs::write(
            &serve,
            "[server]\nstate_dir = \"state\"\noperator_token_file = \"operator.token\"\n\n[tenants.acme]\ntoken_file = \"acme.token\"\nmax_state_mib = 64\nmax_state_keys = 1000\n",
        )
        .unwrap();
        let service = Service::new(ServeConfig::load(&serve).unwrap()).unwrap();
        let config = |state: &str, generation: u64| {
            let text = format!(
                "[source]\ntable = \"/data/deals\"\n[sink]\ntopic = \"deals\"\n[sink.kafka]\n\"bootstrap.servers\" = \"b:9092\"\n[state]\n{state}\n"
            );
            service.pipeline_config("acme", "deals", &text, &"0".repeat(64), generation)
        };

        let first = config("", 0).unwrap();
        let state = first.state.as_ref().unwrap();
        assert_eq!(
            (state.max_mib, state.max_keys),
            (64, 1000),
            "the caps are the defaults"
        );
        assert!(
            state
                .dir
                .as_ref()
                .unwrap()
                .ends_with("state/state/acme/deals/g0")
        );
        assert_eq!(first.changelog_topic().unwrap(), "sluice-state-acme.deals");
        let reset = config("", 2).unwrap();
        assert_eq!(
            reset.changelog_topic().unwrap(),
            "sluice-state-acme.deals.g2"
        );
        assert!(reset.state.unwrap().dir.unwrap().ends_with("acme/deals/g2"));

        for (state, refusal) in [
            ("dir = \"/etc\"", "leave out [state] dir"),
            (
                "changelog_topic = \"globex.state\"",
                "leave out [state] changelog_topic",
            ),
            (
                "max_mib = 65",
                "[state] max_mib = 65; tenant acme may use at most 64",
            ),
            ("max_keys = 1001", "[state] max_keys = 1001"),
        ] {
            let message = config(state, 0).unwrap_err().to_string();
            assert!(message.contains(refusal), "{state}: {message}");
        }
    }

    /// Keyed state is reserved per tenant: the `[state] max_mib` of its pipelines may
    /// not together pass `max_state_total_mib`; other tenants' pipelines and
    /// pipelines without state do not count.
    #[test]
    fn a_tenant_s_pipelines_keep_no_more_state_together_than_its_total() {
        let limits: TenantConfig = toml::from_str("max_state_total_mib = 100").unwrap();
        let host = HostLimits::default();
        let entry = |tenant: &str, name: &str, state_mib: u64| {
            let definition = PipelineDefinition {
                tenant: tenant.into(),
                name: name.into(),
                config: String::new(),
                module: String::new(),
                previous_module: None,
                state: crate::store::PipelineState::Running,
                error: None,
                stopped_at: None,
                state_generation: 0,
                revision: 0,
            };
            let reserved = Reserved {
                memory_mib: 64,
                state_mib,
            };
            (
                (tenant.to_string(), name.to_string()),
                Entry::new(definition, reserved),
            )
        };
        let asking = |state_mib| Reserved {
            memory_mib: 64,
            state_mib,
        };
        let mut pipelines = BTreeMap::from([entry("acme", "a", 60), entry("globex", "g", 90)]);
        check_room(&pipelines, "acme", &limits, &host, asking(40)).unwrap();
        let refused = check_room(&pipelines, "acme", &limits, &host, asking(41))
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("already keep 60 MiB")
                && refused.contains("41 MiB more")
                && refused.contains("limit of 100 MiB (max_state_total_mib)"),
            "{refused}"
        );
        pipelines.extend([entry("acme", "b", 40)]);
        check_room(&pipelines, "acme", &limits, &host, asking(0)).unwrap();
        assert!(check_room(&pipelines, "acme", &limits, &host, asking(1)).is_err());
    }

    #[test]
    fn properties_reaching_host_files_are_recognised() {
        for name in [
            "ssl.key.location",
            "plugin.library.paths",
            "sasl.kerberos.kinit.cmd",
            "sasl.kerberos.keytab",
        ] {
            assert!(reaches_host_files(name), "{name}");
        }
        assert!(!reaches_host_files("bootstrap.servers"));
        assert!(!reaches_host_files("sasl.username"));
    }
}

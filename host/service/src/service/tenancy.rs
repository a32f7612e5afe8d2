//! Tenancy and limits: the config a tenant's pipeline runs with, checked against the
//! tenant's limits, and the host's room for one more pipeline.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use sluice_pipeline::PipelineConfig;

use super::Service;
use super::registry::Entry;
use crate::config::{HostLimits, TenantConfig};
use crate::error::ServiceError;

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

/// Refuses a new pipeline of `tenant` that asks for `asked` MiB of guest memory when
/// the tenant or the host is at a limit.
pub(super) fn check_room(
    pipelines: &BTreeMap<(String, String), Arc<Entry>>,
    tenant: &str,
    limits: &TenantConfig,
    host: &HostLimits,
    asked: usize,
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
    let memory: usize = pipelines.values().map(|e| e.memory_mib).sum();
    if memory + asked > host.max_memory_mib {
        return Err(ServiceError::LimitExceeded(format!(
            "this host's pipelines may already use {memory} MiB of guest memory; {asked} MiB more would pass its limit of {} MiB",
            host.max_memory_mib
        )));
    }
    Ok(())
}

impl Service {
    /// The config a pipeline runs with: the submitted text, with the service's name,
    /// module path and the tenant's Kafka settings, checked against the tenant's limits.
    pub(crate) fn pipeline_config(
        &self,
        tenant: &str,
        name: &str,
        text: &str,
        digest: &str,
    ) -> Result<PipelineConfig, ServiceError> {
        let limits = self.tenant(tenant)?;
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
        table.insert("source".into(), source.into());
        if let Some(source) = table.get("source").and_then(toml::Value::as_table)
            && let Some(location) = source.get("table").and_then(toml::Value::as_str)
            && !location.contains("://")
            && !Path::new(location).is_absolute()
        {
            return Err(bad(format!(
                "[source] table `{location}` must be an absolute path or a URL"
            )));
        }
        if let Some(location) = table
            .get("source")
            .and_then(|s| s.get("table"))
            .and_then(toml::Value::as_str)
            && !limits.table_prefixes.is_empty()
            && !limits
                .table_prefixes
                .iter()
                .any(|p| location.starts_with(p.as_str()))
        {
            return Err(ServiceError::LimitExceeded(format!(
                "pipeline {name} reads table {location}; tenant {tenant} may read only tables under {}",
                limits.table_prefixes.join(", ")
            )));
        }
        let text = toml::to_string(&table).map_err(|e| bad(e.to_string()))?;
        let mut config =
            PipelineConfig::parse(&text, self.state.compiled_dir().as_path()).map_err(bad)?;
        config.transform.module_cache_dir = Some(self.state.compiled_dir());
        let transform = &mut config.transform;
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
        ] {
            if asked > max {
                return Err(ServiceError::LimitExceeded(format!(
                    "pipeline {name} asks for {what} = {asked}; tenant {tenant} may use at most {max}"
                )));
            }
        }
        if let Some(prefix) = &limits.topic_prefix {
            let topics =
                std::iter::once(&config.sink.topic).chain(&config.transform.dead_letter_topic);
            for topic in topics {
                if !topic.starts_with(prefix.as_str()) {
                    return Err(ServiceError::LimitExceeded(format!(
                        "pipeline {name} writes to topic {topic}; tenant {tenant}'s topics must start with `{prefix}`"
                    )));
                }
            }
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

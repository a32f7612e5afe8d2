//! The service's TOML configuration: where it listens and keeps its state, who may
//! call it, and the limits each tenant and the whole host run under.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sluice_engine::CompileBudget;

use crate::error::ServiceError;

/// `sluice serve`'s config file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    /// Where it listens and keeps its state.
    pub server: ServerSection,
    /// Host-wide caps.
    #[serde(default)]
    pub limits: HostLimits,
    /// The tenants, by name. More can be added through the operator API
    /// (`PUT /v1/tenants/{tenant}`); those in this file cannot be changed there.
    #[serde(default)]
    pub tenants: BTreeMap<String, TenantConfig>,
    /// Run as one node of a cluster (docs/cluster.md); unset: alone.
    #[serde(default)]
    pub cluster: Option<sluice_cluster::ClusterConfig>,
}

/// `[server]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    /// Address of the admin API, metrics and health endpoints (default
    /// `127.0.0.1:8470`). The API speaks plain HTTP: put TLS in front of it when it
    /// leaves the machine.
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// Where modules, pipeline definitions and statuses are kept (relative to the
    /// config file). Positions stay in Kafka.
    pub state_dir: PathBuf,
    /// File holding the operator's token (relative to the config file): the operator
    /// sees and changes every tenant's pipelines and reads `/metrics`.
    pub operator_token_file: PathBuf,
    /// Meter Wasm instructions so tenants may have a fuel budget per batch
    /// (`max_fuel_per_batch`); every module then runs ~10-15% slower. Default false.
    #[serde(default)]
    pub fuel_metering: bool,
}

/// `[limits]`: caps over all tenants together.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HostLimits {
    /// Most pipelines on this host (default 1000).
    #[serde(default = "default_host_pipelines")]
    pub max_pipelines: usize,
    /// Most guest memory all pipelines together may be allowed, in MiB: the sum of
    /// their `memory_limit_mib` (default 65536).
    #[serde(default = "default_host_memory_mib")]
    pub max_memory_mib: usize,
    /// Largest `max_module_mib` a tenant added through the API may have (default 64):
    /// the API reads an upload whole before it knows whose limit applies.
    #[serde(default = "default_tenant_module_mib")]
    pub max_module_mib: usize,
}

impl Default for HostLimits {
    fn default() -> HostLimits {
        HostLimits {
            max_pipelines: default_host_pipelines(),
            max_memory_mib: default_host_memory_mib(),
            max_module_mib: default_tenant_module_mib(),
        }
    }
}

/// `[tenants.<name>]`, or the body of `PUT /v1/tenants/{tenant}`: one tenant's token,
/// limits and Kafka settings.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// File holding the tenant's token (relative to the config file). Config file
    /// only: a path means nothing to the other nodes of a cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    /// The SHA-256 of the tenant's token, in hex: the token itself is never stored.
    /// Give this or `token_file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_sha256: Option<String>,
    /// Most pipelines the tenant may have (default 10).
    #[serde(default = "default_tenant_pipelines")]
    pub max_pipelines: usize,
    /// Most memory one of its module instances may use, in MiB (default 256). A
    /// pipeline asking for more is refused.
    #[serde(default = "default_tenant_memory_mib")]
    pub max_memory_mib: usize,
    /// Longest one batch may take in its modules (default `10s`).
    #[serde(default = "default_tenant_batch_timeout", with = "humantime_serde")]
    pub max_batch_timeout: Duration,
    /// Most fuel one batch may use; pipelines without a budget get this one. Needs
    /// `[server] fuel_metering`. Unlimited when unset.
    #[serde(default)]
    pub max_fuel_per_batch: Option<u64>,
    /// Largest module the tenant may upload, in MiB (default 64).
    #[serde(default = "default_tenant_module_mib")]
    pub max_module_mib: usize,
    /// Most CPU time compiling one of its modules may take, in seconds (default 120):
    /// an upload, deploy or pipeline whose module takes more is refused, and the
    /// compile is stopped. Pipelines asking for a longer `compile_timeout` get this.
    #[serde(default = "default_tenant_compile_seconds")]
    pub max_compile_seconds: u64,
    /// Most memory compiling one of its modules may use, in MiB (default 1024);
    /// compiles run in their own process, so this is never taken from the service's.
    /// Pipelines asking for a larger `compile_memory_mib` get this.
    #[serde(default = "default_tenant_compile_mib")]
    pub max_compile_mib: usize,
    /// Most output (records and rejections) one batch of its modules may make, in MiB
    /// (default 256): the host holds it until the batch is produced.
    #[serde(default = "default_tenant_output_mib")]
    pub max_output_mib: usize,
    /// Most change rows in one batch (default 100,000): the host holds the batch.
    #[serde(default = "default_tenant_batch_rows")]
    pub max_batch_rows: usize,
    /// Most log messages per second one module instance may write (default 100).
    #[serde(default = "default_tenant_log_rate")]
    pub max_log_messages_per_second: u32,
    /// Most `[transform] instances` one pipeline may run at the same time (default 1):
    /// each is a module instance with its own memory and a share of the host's cores.
    #[serde(default = "default_tenant_instances")]
    pub max_instances: usize,
    /// Most keyed state one of its pipelines may keep, in MiB (default 256): the
    /// service keeps it on its disk and in Kafka. Pipelines that name no `[state]
    /// max_mib` get this, or the default if lower.
    #[serde(default = "default_tenant_state_mib")]
    pub max_state_mib: u64,
    /// Most keys of keyed state one of its pipelines may keep (default 1,000,000).
    #[serde(default = "default_tenant_state_keys")]
    pub max_state_keys: u64,
    /// Most keyed state all of its pipelines together may keep, in MiB (default
    /// 2560): the sum of their `[state] max_mib`, reserved when a pipeline is created,
    /// so one pipeline's growth never takes another's room. A pipeline that would pass
    /// it is refused.
    #[serde(default = "default_tenant_state_total_mib")]
    pub max_state_total_mib: u64,
    /// Most MiB of lookup stores one of its pipelines may name: the sum of its
    /// `[[lookup]] max_mib` (default 1024).
    #[serde(default = "default_tenant_lookup_mib")]
    pub max_lookup_mib: u64,
    /// librdkafka properties added to every pipeline of the tenant, over the
    /// pipeline's own: its bootstrap servers and credentials. Values may be
    /// `${env:NAME}` or `${file:PATH}`. Never shown to the tenant, guests or logs.
    #[serde(default)]
    pub kafka: BTreeMap<String, String>,
    /// Prefix every topic the tenant's pipelines name in their configs (record,
    /// dead-letter, allowed and position topics) must start with; unset: any. The
    /// topic of every record its modules make is held to it too: a record naming
    /// another fails its row under the pipeline's `on_error` and is never sent.
    #[serde(default)]
    pub topic_prefix: Option<String>,
    /// Path or URL prefixes the tenant's tables must start with (for example
    /// `"/data/acme/"`, `"s3://acme-lake/"`); empty: any table the service can reach.
    #[serde(default)]
    pub table_prefixes: Vec<String>,
}

fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8470))
}
fn default_host_pipelines() -> usize {
    1000
}
fn default_host_memory_mib() -> usize {
    65536
}
fn default_tenant_pipelines() -> usize {
    10
}
fn default_tenant_memory_mib() -> usize {
    256
}
fn default_tenant_batch_timeout() -> Duration {
    Duration::from_secs(10)
}
fn default_tenant_module_mib() -> usize {
    64
}
fn default_tenant_compile_seconds() -> u64 {
    CompileBudget::default().deadline.as_secs()
}
fn default_tenant_compile_mib() -> usize {
    CompileBudget::default().memory_bytes / (1024 * 1024)
}
fn default_tenant_output_mib() -> usize {
    256
}
fn default_tenant_instances() -> usize {
    1
}
fn default_tenant_state_mib() -> u64 {
    256
}
fn default_tenant_lookup_mib() -> u64 {
    1024
}
fn default_tenant_state_total_mib() -> u64 {
    2560
}
fn default_tenant_state_keys() -> u64 {
    1_000_000
}
fn default_tenant_batch_rows() -> usize {
    100_000
}
fn default_tenant_log_rate() -> u32 {
    100
}

impl TenantConfig {
    /// What compiling one of the tenant's modules may use.
    pub fn compile_budget(&self) -> CompileBudget {
        CompileBudget {
            memory_bytes: self.max_compile_mib.saturating_mul(1024 * 1024),
            deadline: Duration::from_secs(self.max_compile_seconds),
        }
    }

    /// Checks the settings that do not depend on where the tenant comes from.
    pub fn validate(&self, name: &str, fuel_metering: bool) -> Result<(), String> {
        if !valid_name(name) {
            return Err(format!(
                "tenant name `{name}` must be 1 to 100 letters, digits, '_' or '-'"
            ));
        }
        if self.max_compile_seconds == 0 || self.max_compile_mib == 0 {
            return Err(format!(
                "tenant {name}'s max_compile_seconds and max_compile_mib must be at least 1: no module compiles in no time or memory"
            ));
        }
        if self.max_fuel_per_batch.is_some() && !fuel_metering {
            return Err(format!(
                "tenant {name} has max_fuel_per_batch, which needs `fuel_metering = true` in [server]"
            ));
        }
        match (&self.token_file, &self.token_sha256) {
            (Some(_), Some(_)) => Err(format!(
                "tenant {name} has both token_file and token_sha256; give one"
            )),
            (None, None) => Err(format!(
                "tenant {name} has no token: give token_file or token_sha256"
            )),
            (None, Some(hex)) if !is_sha256_hex(hex) => Err(format!(
                "tenant {name}'s token_sha256 must be 64 hex digits (`sha256sum` of the token)"
            )),
            _ => Ok(()),
        }
    }

    /// Resolves the `${env:..}`/`${file:..}` references of the Kafka settings, files
    /// relative to `base`.
    pub fn resolve_kafka(&mut self, base: &Path) -> Result<(), String> {
        for (property, value) in &mut self.kafka {
            *value = sluice_pipeline::resolve_reference(value, base)
                .map_err(|e| format!("`{property}` {e}"))?;
        }
        Ok(())
    }
}

/// Whether `text` is a SHA-256 digest in hex.
fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.chars().all(|c| c.is_ascii_hexdigit())
}

/// A tenant or pipeline name: letters, digits, `_` and `-` (it is part of Kafka ids and
/// file names; `.` separates tenant from pipeline in Kafka).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
}

impl ServeConfig {
    /// Reads the config; relative paths are taken from the file's directory, and
    /// `${env:..}`/`${file:..}` references in tenants' Kafka settings are resolved.
    pub fn load(path: &Path) -> Result<ServeConfig, ServiceError> {
        let invalid = |message: String| ServiceError::Config {
            path: path.to_path_buf(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| invalid(e.to_string()))?;
        let mut config: ServeConfig = toml::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        config.server.state_dir = base.join(&config.server.state_dir);
        config.server.operator_token_file = base.join(&config.server.operator_token_file);
        for (name, tenant) in &mut config.tenants {
            tenant
                .validate(name, config.server.fuel_metering)
                .map_err(invalid)?;
            tenant.token_file = tenant.token_file.as_ref().map(|file| base.join(file));
            tenant
                .resolve_kafka(base)
                .map_err(|e| invalid(format!("[tenants.{name}.kafka] {e}")))?;
        }
        if let Some(cluster) = &mut config.cluster {
            for (property, value) in &mut cluster.kafka {
                *value = sluice_pipeline::resolve_reference(value, base)
                    .map_err(|e| invalid(format!("[cluster.kafka] `{property}` {e}")))?;
            }
            // The cluster's own clients take the Spark and Java spellings pipelines do.
            cluster.kafka = sluice_pipeline::client_properties(&cluster.kafka)
                .map_err(|e| invalid(format!("[cluster.kafka] {e}")))?;
            cluster.validate().map_err(invalid)?;
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes a config with `[server]` and `tenant` (lines for `[tenants.acme]`).
    fn write_config(dir: &Path, tenant: &str) -> PathBuf {
        let path = dir.join("serve.toml");
        let text = format!(
            "[server]\nstate_dir = \"state\"\noperator_token_file = \"operator.token\"\n[tenants.acme]\ntoken_file = \"acme.token\"\n{tenant}"
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_full_config_reads_with_defaults_and_resolved_secrets() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("secret"), "hunter2\n").unwrap();
        let path = write_config(
            dir.path(),
            "max_pipelines = 3\n[tenants.acme.kafka]\n\"sasl.password\" = \"${file:secret}\"\n",
        );
        let config = ServeConfig::load(&path).unwrap();
        assert_eq!(config.server.state_dir, dir.path().join("state"));
        assert_eq!(config.limits.max_pipelines, 1000);
        let acme = &config.tenants["acme"];
        assert_eq!(acme.max_pipelines, 3);
        assert_eq!(acme.max_memory_mib, 256);
        assert_eq!(acme.kafka["sasl.password"], "hunter2");
    }

    #[test]
    fn the_clusters_kafka_settings_take_spark_and_java_spellings() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("jaas"),
            "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"node\" password=\"hunter2\";\n",
        )
        .unwrap();
        let path = write_config(
            dir.path(),
            "[cluster]\nname = \"prod\"\n[cluster.kafka]\n\"kafka.bootstrap.servers\" = \"b:9092\"\n\"kafka.sasl.mechanism\" = \"SCRAM-SHA-512\"\n\"kafka.sasl.jaas.config\" = \"${file:jaas}\"\n",
        );
        let config = ServeConfig::load(&path).unwrap();
        let kafka = &config.cluster.unwrap().kafka;
        assert_eq!(kafka["bootstrap.servers"], "b:9092");
        assert_eq!(kafka["sasl.username"], "node");
        assert_eq!(kafka["sasl.password"], "hunter2");
        assert!(!kafka.contains_key("sasl.jaas.config"));
    }

    #[test]
    fn a_fuel_limit_without_metering_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_config(dir.path(), "max_fuel_per_batch = 1000\n");
        let error = ServeConfig::load(&path).unwrap_err().to_string();
        assert!(error.contains("fuel_metering"), "{error}");
    }
}

//! Shadow deploys through the service: a tenant's uploaded module started beside a
//! pipeline's live one, its comparison read, then promoted (a normal swap) or
//! discarded.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use sluice_pipeline::{Shadow, ShadowLimits, ShadowReport};

use super::deploy::{Deploy, DeployReport};
use super::registry::Entry;
use super::{Service, not_found};
use crate::auth::TenantScope;
use crate::error::ServiceError;

/// Most differences a shadow keeps as a sample.
const MAX_DIFFERENCES: usize = 1000;

/// Longest a shadow may run (the refusal says 7 days).
const MAX_SHADOW_TIME: Duration = Duration::from_secs(7 * 24 * 3600);

/// A request to run a module in a pipeline's shadow.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShadowDeploy {
    /// Digest of an uploaded module of the tenant.
    pub module: String,
    /// Stop after comparing this many batches.
    #[serde(default)]
    pub batches: Option<u64>,
    /// Stop after comparing this many change rows.
    #[serde(default)]
    pub rows: Option<u64>,
    /// Stop after this long (`30m`, `2h`; default one hour).
    #[serde(default, with = "humantime_serde")]
    pub duration: Option<Duration>,
    /// Differences to keep as a sample (default 20, at most 1000).
    #[serde(default)]
    pub differences: Option<usize>,
}

impl ShadowDeploy {
    fn limits(&self) -> Result<ShadowLimits, ServiceError> {
        let defaults = ShadowLimits::default();
        let duration = self
            .duration
            .unwrap_or(Duration::from_secs(defaults.seconds));
        if duration > MAX_SHADOW_TIME || duration.is_zero() {
            return Err(ServiceError::BadRequest(
                "a shadow's duration must be more than zero and at most 7 days".to_string(),
            ));
        }
        let differences = self.differences.unwrap_or(defaults.differences);
        if differences > MAX_DIFFERENCES {
            return Err(ServiceError::BadRequest(format!(
                "a shadow keeps at most {MAX_DIFFERENCES} differences; ask for fewer"
            )));
        }
        Ok(ShadowLimits {
            batches: self.batches,
            rows: self.rows,
            seconds: duration.as_secs().max(1),
            differences,
        })
    }
}

impl Service {
    /// Starts `request.module` in the shadow of a pipeline this node runs; a shadow
    /// already there is stopped.
    pub async fn shadow(
        self: &Arc<Service>,
        tenant: &TenantScope,
        name: &str,
        request: ShadowDeploy,
    ) -> Result<ShadowReport, ServiceError> {
        let entry = self.found(|| self.entry(tenant, name)).await?;
        let limits = request.limits()?;
        let definition = entry.definition();
        let tenant = definition.tenant.as_str();
        if let Some(api) = self.runs_elsewhere(tenant, name) {
            return Err(ServiceError::Conflict(format!(
                "pipeline {name} runs on another node of the cluster; start its shadow through that node's API at {api}"
            )));
        }
        let config = self.pipeline_config(
            tenant,
            name,
            &definition.config,
            &request.module,
            definition.state_generation,
        )?;
        let copy_mib = config
            .state
            .as_ref()
            .map_or(0, |state| state.max_mib as usize);
        self.check_shadow_room(&entry, copy_mib)?;
        let (module, instance) = self
            .prepare_blocking(&entry, config.clone(), &request.module, tenant)
            .await?;
        let shadow = Shadow::start(
            &config,
            &definition.module,
            Arc::new(module),
            Box::new(instance),
            limits,
        );
        entry.shadow.install(shadow.clone());
        tracing::info!(
            tenant,
            pipeline = name,
            live = definition.module,
            candidate = request.module,
            "A shadow deploy started: the candidate runs beside the live module and its records are compared, not produced."
        );
        Ok(shadow.report())
    }

    /// The comparison of a pipeline's shadow deploy.
    pub async fn shadow_report(
        &self,
        tenant: &TenantScope,
        name: &str,
    ) -> Result<ShadowReport, ServiceError> {
        let entry = self.found(|| self.entry(tenant, name)).await?;
        entry
            .shadow
            .current()
            .map(|shadow| shadow.report())
            .ok_or_else(|| no_shadow(name))
    }

    /// Stops a pipeline's shadow deploy and gives its last comparison.
    pub async fn discard_shadow(
        &self,
        tenant: &TenantScope,
        name: &str,
    ) -> Result<ShadowReport, ServiceError> {
        let entry = self.found(|| self.entry(tenant, name)).await?;
        let shadow = entry
            .shadow
            .take("it was discarded")
            .ok_or_else(|| no_shadow(name))?;
        tracing::info!(
            tenant = &**tenant,
            pipeline = name,
            "A shadow deploy was discarded."
        );
        Ok(shadow.report())
    }

    /// Makes a pipeline's shadow module its live one (a swap at the next batch
    /// boundary, as a deploy does) and stops the shadow.
    pub async fn promote_shadow(
        self: &Arc<Service>,
        tenant: &TenantScope,
        name: &str,
    ) -> Result<DeployReport, ServiceError> {
        let entry = self.found(|| self.entry(tenant, name)).await?;
        let shadow = entry.shadow.current().ok_or_else(|| no_shadow(name))?;
        let candidate = shadow.report().candidate;
        let report = self
            .deploy(
                tenant,
                name,
                Deploy {
                    module: candidate,
                    sample_rows: None,
                    reset_state: false,
                },
            )
            .await?;
        // Kept, stopped, so its comparison can still be read.
        shadow.stop("it was promoted");
        Ok(report)
    }

    /// Refuses a shadow the host's guest memory cap has no room for: a candidate may
    /// use as much as its pipeline's module.
    /// A shadow needs its pipeline's guest memory again, and room for the copy of a
    /// stateful pipeline's state (`copy_mib`, its `[state] max_mib`).
    fn check_shadow_room(&self, entry: &Entry, copy_mib: usize) -> Result<(), ServiceError> {
        let max = self.config().limits.max_memory_mib;
        let used: usize = self
            .entries()
            .iter()
            .map(|e| {
                let shadow = e
                    .shadow
                    .current()
                    .filter(|s| s.is_running() && !std::ptr::eq(e.as_ref(), entry));
                e.reserved.memory_mib
                    + shadow.map_or(0, |s| e.reserved.memory_mib + s.state_copy_mib())
            })
            .sum();
        let asked = entry.reserved.memory_mib + copy_mib;
        if used + asked > max {
            return Err(ServiceError::LimitExceeded(format!(
                "this host's pipelines and shadows may already use {used} MiB of memory; a shadow of this pipeline needs {asked} MiB more (its guest memory, and its state's [state] max_mib for the copy of a stateful pipeline's state), past the host's limit of {max} MiB"
            )));
        }
        Ok(())
    }
}

fn no_shadow(name: &str) -> ServiceError {
    not_found(format!("A shadow deploy of pipeline {name}"))
}

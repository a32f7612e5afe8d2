//! Deploys and rollbacks: a new module compiled and checked (optionally on a sample of
//! the table) before anything changes, then switched at the next batch boundary.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sluice_engine::{TransformInstance, TransformModule};
use sluice_pipeline::{
    PipelineConfig, Position, SwapReport, SwapRequest, instance_limits, try_on_sample,
};
use tokio::sync::{mpsc, oneshot};

use super::last_swap::LastSwap;
use super::registry::{Entry, Running, stop};
use super::views::position_of;
use super::{Service, not_found};
use crate::auth::TenantScope;
use crate::error::ServiceError;
use crate::store::{PipelineDefinition, PipelineState, now_millis};

/// Longest a deploy waits for the pipeline to reach a batch boundary.
const SWAP_WAIT: Duration = Duration::from_secs(120);

/// A request to swap a pipeline's module.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Deploy {
    /// Digest of an uploaded module of the tenant.
    pub module: String,
    /// Before switching, run the new module on up to this many change rows from the
    /// pipeline's position; a batch or trap error refuses the swap.
    #[serde(default)]
    pub sample_rows: Option<usize>,
    /// Start the new module with empty keyed state: the pipeline stops at a batch
    /// boundary and starts again on a new changelog topic; the old state is deleted.
    #[serde(default)]
    pub reset_state: bool,
}

/// A done swap.
#[derive(Clone, Debug, Serialize)]
pub struct DeployReport {
    /// Digest of the module before.
    pub from: String,
    /// Digest of the module now.
    pub to: String,
    /// `switched` (the running pipeline switched at a boundary), `restarted` (it
    /// stopped at a boundary and started again with the new module and empty state),
    /// `started` (it had failed; it was started with the new module) or `stored` (it
    /// was paused or stopped before the boundary; it starts with the new module when
    /// resumed).
    pub outcome: &'static str,
    /// The boundary: the first change row the new module makes records of.
    pub position: Option<Position>,
    /// How long the pipeline was held at the boundary, compile excluded.
    pub pause_ms: Option<f64>,
    /// Change rows of the old module's work committed at the boundary.
    pub committed_rows: Option<u64>,
    /// How long compiling and checking the new module took.
    pub prepare_ms: f64,
}

impl Service {
    /// Compiles a stored module under a pipeline's limits and starts an instance of it
    /// with the pipeline's parameters (which runs its `init`).
    pub(super) fn prepare_module(
        &self,
        entry: &Entry,
        config: &PipelineConfig,
        digest: &str,
        tenant: &str,
    ) -> Result<(TransformModule, TransformInstance), ServiceError> {
        let listed = self
            .state
            .module(tenant, digest)?
            .ok_or_else(|| not_found(format!("Module {digest} of tenant {tenant}")))?;
        let bytes = self.state.read_module(digest)?;
        let module = self
            .engine
            .load_bytes(
                tenant,
                &listed.name,
                &self.state.module_path(digest),
                &bytes,
                instance_limits(&config.transform),
            )
            .map_err(|e| match e {
                sluice_engine::EngineError::CompileCancelled { .. } => {
                    ServiceError::Unavailable(e.to_string())
                }
                e => ServiceError::InvalidModule(e.to_string()),
            })?
            .with_log_tap(entry.log.tap(digest));
        let instance = module
            .instantiate(&config.transform_params(), Arc::new(config.format()))
            .map_err(|e| ServiceError::InvalidModule(e.to_string()))?;
        Ok((module, instance))
    }

    /// [`Service::prepare_module`] on the blocking pool.
    pub(super) async fn prepare_blocking(
        self: &Arc<Service>,
        entry: &Arc<Entry>,
        config: PipelineConfig,
        digest: &str,
        tenant: &str,
    ) -> Result<(TransformModule, TransformInstance), ServiceError> {
        let (service, entry) = (self.clone(), entry.clone());
        let (tenant, digest) = (tenant.to_string(), digest.to_string());
        tokio::task::spawn_blocking(move || {
            service.prepare_module(&entry, &config, &digest, &tenant)
        })
        .await
        .unwrap_or_else(|e| {
            Err(ServiceError::InvalidModule(format!(
                "preparing it failed: {e}"
            )))
        })
    }

    /// Swaps a pipeline's module: compiled and checked first (a refusal changes
    /// nothing), then switched at the next batch boundary.
    pub async fn deploy(
        self: &Arc<Service>,
        tenant: &TenantScope,
        name: &str,
        request: Deploy,
    ) -> Result<DeployReport, ServiceError> {
        let entry = self.found(|| self.entry(tenant, name)).await?;
        self.placement().deploy(self, &entry, request).await
    }

    /// A deploy on a node alone: checked, recorded, then switched at the running
    /// pipeline's next batch boundary.
    pub(super) async fn deploy_here(
        self: &Arc<Service>,
        entry: &Arc<Entry>,
        request: Deploy,
    ) -> Result<DeployReport, ServiceError> {
        let entry = entry.clone();
        let mut control = entry.control.lock().await;
        let definition = entry.definition();
        let (tenant, name) = (definition.tenant.as_str(), definition.name.as_str());
        let (module, instance, prepare_ms) = self.prepare_checked(&entry, &request).await?;
        // The new module is recorded first: if the service stops before the switch, the
        // pipeline starts with it.
        self.update(&entry, |d| {
            d.previous_module = Some(d.module.clone());
            d.module = request.module.clone();
            if request.reset_state {
                d.state_generation += 1;
            }
        })?;
        let mut report = DeployReport {
            from: definition.module.clone(),
            to: request.module.clone(),
            outcome: "stored",
            position: None,
            pause_ms: None,
            committed_rows: None,
            prepare_ms,
        };
        if request.reset_state {
            let runs = Entry::is_running(&control);
            let started = Instant::now();
            stop(control.take()).await;
            self.forget_state(&definition, definition.state_generation)
                .await;
            if runs || definition.state == PipelineState::Failed {
                self.start(&entry, &mut control)?;
                report.outcome = if runs { "restarted" } else { "started" };
                report.pause_ms = Some(started.elapsed().as_secs_f64() * 1000.0);
            }
        } else if let Some(running) = control.as_mut().filter(|r| !r.task.is_finished()) {
            if let Some(done) = switch(running, name, module, instance).await? {
                report.switched(&done);
            }
        } else if definition.state == PipelineState::Failed {
            // A new module is the usual fix for a failed pipeline: start it.
            self.start(&entry, &mut control)?;
            report.outcome = "started";
        }
        swapped(&entry, tenant, name, &report);
        // A shadow compares against the live module it started beside; its promotion
        // ends it once the swap is done.
        if let Some(shadow) = entry.shadow.current()
            && shadow.report().candidate != request.module
        {
            shadow.stop("the live module was swapped for another module");
        }
        Ok(report)
    }

    /// Compiles the requested module under the pipeline's limits, starts an instance
    /// and, when asked, runs it on a sample of the table: a refusal changes nothing.
    pub(super) async fn prepare_checked(
        self: &Arc<Service>,
        entry: &Arc<Entry>,
        request: &Deploy,
    ) -> Result<(TransformModule, TransformInstance, f64), ServiceError> {
        let definition = entry.definition();
        let (tenant, name) = (definition.tenant.as_str(), definition.name.as_str());
        if definition.module == request.module && !request.reset_state {
            return Err(ServiceError::Conflict(format!(
                "pipeline {name} already runs module {}",
                request.module
            )));
        }
        let config = self.pipeline_config(
            tenant,
            name,
            &definition.config,
            &request.module,
            definition.state_generation,
        )?;
        if request.reset_state && config.state.is_none() {
            return Err(ServiceError::BadRequest(format!(
                "pipeline {name} keeps no state to reset: its config has no [state] section"
            )));
        }
        let started = Instant::now();
        let prepared = {
            let (service, entry) = (self.clone(), entry.clone());
            let (tenant, digest) = (tenant.to_string(), request.module.clone());
            let position = position_of(&definition, &entry.metrics.snapshot());
            let sample_rows = request.sample_rows;
            tokio::task::spawn_blocking(move || {
                let prepared = service.prepare_module(&entry, &config, &digest, &tenant)?;
                if let Some(rows) = sample_rows {
                    try_on_sample(&config, &prepared.0, position, rows)
                        .map_err(|e| ServiceError::InvalidModule(e.to_string()))?;
                }
                Ok::<_, ServiceError>(prepared)
            })
            .await
            .unwrap_or_else(|e| {
                Err(ServiceError::InvalidModule(format!(
                    "checking it failed: {e}"
                )))
            })
        };
        let (module, instance) = prepared.inspect_err(|e| {
            tracing::warn!(tenant, pipeline = name, module = request.module, error = %e, "A module swap was refused; the pipeline keeps its module.");
        })?;
        Ok((module, instance, started.elapsed().as_secs_f64() * 1000.0))
    }

    /// Switches the pipeline this node runs to the module its definition names, at
    /// the next batch boundary (a deploy through another node of the cluster).
    pub(super) async fn switch_to(
        self: &Arc<Service>,
        entry: &Arc<Entry>,
        control: &mut Option<Running>,
        definition: &PipelineDefinition,
    ) -> Result<(), ServiceError> {
        let Some(running) = control.as_mut() else {
            return Ok(());
        };
        let (tenant, name) = (definition.tenant.as_str(), definition.name.as_str());
        let config = self.config_of(definition)?;
        let (module, instance) = self
            .prepare_blocking(entry, config, &definition.module, tenant)
            .await?;
        if let Some(done) = switch(running, name, module, instance).await? {
            *entry.last_switch.lock().unwrap_or_else(|e| e.into_inner()) = Some(done);
        }
        Ok(())
    }

    /// Swaps back to the module before the last swap.
    pub async fn rollback(
        self: &Arc<Service>,
        tenant: &TenantScope,
        name: &str,
    ) -> Result<DeployReport, ServiceError> {
        let previous = self
            .entry(tenant, name)?
            .definition()
            .previous_module
            .ok_or_else(|| {
                ServiceError::Conflict(format!("pipeline {name} has no previous module"))
            })?;
        self.deploy(
            tenant,
            name,
            Deploy {
                module: previous,
                sample_rows: None,
                reset_state: false,
            },
        )
        .await
    }
}

impl DeployReport {
    pub(super) fn switched(&mut self, done: &SwapReport) {
        self.outcome = "switched";
        self.position = Some(done.position);
        self.pause_ms = Some(done.pause.as_secs_f64() * 1000.0);
        self.committed_rows = Some(done.committed_rows);
    }
}

/// Logs a swap and keeps it as the pipeline's last.
pub(super) fn swapped(entry: &Entry, tenant: &str, name: &str, report: &DeployReport) {
    *entry.last_swap.lock().unwrap_or_else(|e| e.into_inner()) = Some(LastSwap {
        at_ms: now_millis(),
        from: report.from.clone(),
        to: report.to.clone(),
        outcome: report.outcome,
    });
    tracing::info!(
        tenant,
        pipeline = name,
        from = report.from,
        to = report.to,
        outcome = report.outcome,
        "A pipeline's module was swapped."
    );
}

/// Hands a running pipeline a new module to switch to at its next batch boundary and
/// waits for the switch; `None` when the pipeline stopped before the boundary (it
/// starts with the new module when resumed).
async fn switch(
    running: &mut Running,
    name: &str,
    module: TransformModule,
    instance: TransformInstance,
) -> Result<Option<SwapReport>, ServiceError> {
    let to = module.digest().to_string();
    let (reply, replied) = oneshot::channel();
    let request = SwapRequest {
        module: Arc::new(module),
        instance: Box::new(instance),
        reply,
    };
    match running.swaps.try_send(request) {
        Ok(()) => {}
        Err(mpsc::error::TrySendError::Full(_)) => {
            return Err(ServiceError::Conflict(format!(
                "pipeline {name} has not yet reached the batch boundary for the previous swap; try again when it has"
            )));
        }
        Err(mpsc::error::TrySendError::Closed(_)) => return Ok(None),
    }
    match tokio::time::timeout(SWAP_WAIT, replied).await {
        Ok(Ok(Ok(done))) => {
            running.module = to;
            Ok(Some(done))
        }
        Ok(Ok(Err(message))) => Err(ServiceError::Conflict(format!(
            "{message}; the pipeline stopped and starts with the new module when resumed"
        ))),
        Ok(Err(_)) => Ok(None),
        Err(_) => Err(ServiceError::Conflict(format!(
            "pipeline {name} did not reach a batch boundary within {SWAP_WAIT:?}; it switches when it does"
        ))),
    }
}

//! Where what the API changes takes effect, chosen once: on this node alone
//! ([`Alone`]), or through the cluster's shared state, which every node applies and the
//! node holding a pipeline's slot acts on (`ClusterPart`, in `cluster.rs`). The
//! service's calls make one call to the placement instead of branching on the mode.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use sluice_pipeline::MetricsSnapshot;

use super::Service;
use super::deploy::{Deploy, DeployReport};
use super::refusals::Refusal;
use super::registry::{Entry, Reserved, stop};
use crate::config::TenantConfig;
use crate::error::ServiceError;
use crate::store::{ModuleEntry, PipelineDefinition, PipelineState};

/// A change the placement makes, awaited by the service's call.
pub(super) type Change<'a, T> = Pin<Box<dyn Future<Output = Result<T, ServiceError>> + Send + 'a>>;

/// Where a pipeline's figures come from: the node that shows them, its counters and
/// its rate of change rows per second.
pub(super) type Figures = (Option<String>, MetricsSnapshot, f64);

/// Where changes take effect and where pipelines run.
pub(super) trait Placement: Send + Sync {
    /// Stores an uploaded module.
    fn save_module<'a>(
        &'a self,
        service: &'a Service,
        tenant: &'a str,
        entry: &'a ModuleEntry,
        bytes: &'a [u8],
    ) -> Change<'a, ()>;

    /// Stores a tenant the operator put, or (with `None`) its removal.
    fn save_tenant<'a>(
        &'a self,
        service: &'a Service,
        name: &'a str,
        settings: Option<&'a TenantConfig>,
    ) -> Change<'a, ()>;

    /// Keeps a module's refusal, so it is not compiled again under the same caps.
    fn keep_refusal<'a>(
        &'a self,
        service: &'a Service,
        tenant: &'a str,
        refusal: Refusal,
    ) -> Change<'a, ()>;

    /// Makes a new pipeline, once the host and its tenant have room for what it
    /// reserves, and starts it.
    fn create<'a>(
        &'a self,
        service: &'a Arc<Service>,
        definition: PipelineDefinition,
        reserved: Reserved,
    ) -> Change<'a, Arc<Entry>>;

    /// Pauses (`Paused`) or resumes (`Running`) a pipeline.
    fn set_state<'a>(
        &'a self,
        service: &'a Arc<Service>,
        entry: &'a Arc<Entry>,
        state: PipelineState,
    ) -> Change<'a, ()>;

    /// Stops a pipeline and forgets it.
    fn remove<'a>(&'a self, service: &'a Service, entry: &'a Arc<Entry>) -> Change<'a, ()>;

    /// Switches a pipeline to a checked module.
    fn deploy<'a>(
        &'a self,
        service: &'a Arc<Service>,
        entry: &'a Arc<Entry>,
        request: Deploy,
    ) -> Change<'a, DeployReport>;

    /// A pipeline's figures, from the node that runs it.
    fn figures(&self, service: &Service, entry: &Entry, definition: &PipelineDefinition)
    -> Figures;

    /// Whether this node's metrics count the pipeline: each pipeline is counted by one
    /// node.
    fn counts(&self, service: &Service, definition: &PipelineDefinition) -> bool;

    /// The admin API of the node that runs a pipeline, when that is another node.
    fn runs_elsewhere(&self, service: &Service, tenant: &str, name: &str) -> Option<String>;
}

/// A node without `[cluster]`: it owns every pipeline, and stores changes in its state
/// directory.
pub(super) struct Alone;

impl Placement for Alone {
    fn save_module<'a>(
        &'a self,
        service: &'a Service,
        tenant: &'a str,
        entry: &'a ModuleEntry,
        bytes: &'a [u8],
    ) -> Change<'a, ()> {
        Box::pin(async move { service.state.save_module(tenant, entry, bytes) })
    }

    fn save_tenant<'a>(
        &'a self,
        service: &'a Service,
        name: &'a str,
        settings: Option<&'a TenantConfig>,
    ) -> Change<'a, ()> {
        Box::pin(async move {
            match settings {
                Some(settings) => {
                    service.state.save_tenant(name, settings)?;
                    service.install_tenant(name, settings.clone())
                }
                None => service.uninstall_tenant(name),
            }
        })
    }

    fn keep_refusal<'a>(
        &'a self,
        service: &'a Service,
        tenant: &'a str,
        refusal: Refusal,
    ) -> Change<'a, ()> {
        Box::pin(async move {
            service.refusals.insert(tenant, refusal);
            Ok(())
        })
    }

    fn create<'a>(
        &'a self,
        service: &'a Arc<Service>,
        definition: PipelineDefinition,
        reserved: Reserved,
    ) -> Change<'a, Arc<Entry>> {
        Box::pin(async move {
            let (tenant, name) = (definition.tenant.clone(), definition.name.clone());
            let entry = {
                let mut pipelines = service.pipelines.lock().unwrap_or_else(|e| e.into_inner());
                service.check_new(&pipelines, &tenant, &name, reserved)?;
                let entry = Entry::new(definition.clone(), reserved);
                pipelines.insert((tenant.clone(), name.clone()), entry.clone());
                entry
            };
            let mut control = entry.control.lock().await;
            // Stored before it starts: a crash right after the answer keeps the pipeline.
            let started = service
                .state
                .save_pipeline(&definition)
                .and_then(|()| service.start(&entry, &mut control));
            if let Err(e) = started {
                service
                    .pipelines
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&(tenant.clone(), name.clone()));
                let _ = service.state.remove_pipeline(&tenant, &name);
                return Err(e);
            }
            drop(control);
            Ok(entry)
        })
    }

    fn set_state<'a>(
        &'a self,
        service: &'a Arc<Service>,
        entry: &'a Arc<Entry>,
        state: PipelineState,
    ) -> Change<'a, ()> {
        Box::pin(async move {
            let mut control = entry.control.lock().await;
            match state {
                PipelineState::Running => {
                    if Entry::is_running(&control) {
                        return Err(running(entry));
                    }
                    service.start(entry, &mut control)
                }
                _ => {
                    service.update(entry, |d| {
                        d.state = state;
                        d.error = None;
                    })?;
                    stop(control.take()).await;
                    Ok(())
                }
            }
        })
    }

    fn remove<'a>(&'a self, service: &'a Service, entry: &'a Arc<Entry>) -> Change<'a, ()> {
        Box::pin(async move {
            let definition = entry.definition();
            let (tenant, name) = (definition.tenant.clone(), definition.name.clone());
            let mut control = entry.control.lock().await;
            stop(control.take()).await;
            service
                .forget_state(&definition, definition.state_generation)
                .await;
            service.state.remove_pipeline(&tenant, &name)?;
            service
                .pipelines
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&(tenant, name));
            Ok(())
        })
    }

    fn deploy<'a>(
        &'a self,
        service: &'a Arc<Service>,
        entry: &'a Arc<Entry>,
        request: Deploy,
    ) -> Change<'a, DeployReport> {
        Box::pin(service.deploy_here(entry, request))
    }

    fn figures(&self, _: &Service, entry: &Entry, _: &PipelineDefinition) -> Figures {
        (None, entry.metrics.snapshot(), entry.rows_per_second())
    }

    fn counts(&self, _: &Service, _: &PipelineDefinition) -> bool {
        true
    }

    fn runs_elsewhere(&self, _: &Service, _: &str, _: &str) -> Option<String> {
        None
    }
}

/// The refusal of resuming a running pipeline.
pub(super) fn running(entry: &Entry) -> ServiceError {
    ServiceError::Conflict(format!("pipeline {} is running", entry.definition().name))
}

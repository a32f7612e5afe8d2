//! Cluster mode: the shared state and the slots this node holds, through Kafka (or the
//! in-memory `ClusterIo` of the tests). The API's writes go to the state topic; every
//! node applies each record in topic order (`cluster_state`), and the node holding a
//! pipeline's slot runs it (`cluster_membership`). Without `[cluster]` none of this
//! runs and the node owns every pipeline.
//!
//! This file is the cluster's [`Placement`]: how each change the API makes reaches the
//! shared state.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use sluice_cluster::blob;
use sluice_cluster::{ClusterConfig, ClusterError, Member, SharedLog};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::Service;
use super::deploy::{Deploy, DeployReport, swapped};
use super::placement::{Change, Figures, Placement, running};
use super::refusals::{Refusal, refusal_key};
use super::registry::{Entry, Reserved};
use super::reports::Reports;
use crate::config::TenantConfig;
use crate::error::ServiceError;
use crate::store::{ModuleEntry, PipelineDefinition, PipelineState};

/// A node's part in its cluster.
pub(super) struct ClusterPart {
    pub(super) config: ClusterConfig,
    pub(super) node: String,
    pub(super) log: Arc<dyn SharedLog>,
    /// Definitions a pipeline's owner changed, written in order by a task of their own.
    pub(super) publishes: mpsc::UnboundedSender<PipelineDefinition>,
    /// The offset of the next record to apply: the records before it are applied.
    pub(super) applied: watch::Sender<i64>,
    pub(super) held: Mutex<BTreeSet<u32>>,
    pub(super) reports: Arc<Reports>,
    pub(super) membership: Mutex<Option<Box<dyn Member>>>,
    pub(super) tasks: Mutex<Vec<JoinHandle<()>>>,
}

pub(super) fn cluster_error(e: ClusterError) -> ServiceError {
    ServiceError::Cluster(e.to_string())
}

fn pipeline_key(tenant: &str, name: &str) -> String {
    format!("pipeline/{tenant}/{name}")
}

fn tenant_key(tenant: &str) -> String {
    format!("tenant/{tenant}")
}

fn module_key(tenant: &str, digest: &str) -> String {
    format!("module/{tenant}/{digest}")
}

impl ClusterPart {
    /// Queues a definition for the state topic (a change its owner made).
    pub(super) fn publish_definition(&self, definition: &PipelineDefinition) {
        let _ = self.publishes.send(definition.clone());
    }

    /// Writes a record and waits until this node has applied it, so what the caller
    /// reads next includes it.
    pub(super) async fn write_and_apply(
        &self,
        key: &str,
        value: Option<&[u8]>,
    ) -> Result<(), ServiceError> {
        let offset = self.log.write(key, value).await.map_err(cluster_error)?;
        let mut applied = self.applied.subscribe();
        let _ = applied.wait_for(|next| *next > offset).await;
        Ok(())
    }

    /// Writes a pipeline's changed definition to the shared state and waits until this
    /// node applied it (and, when it runs the pipeline, acted on it).
    async fn write_change(
        &self,
        entry: &Entry,
        change: impl FnOnce(&mut PipelineDefinition),
    ) -> Result<(), ServiceError> {
        let mut definition = entry.definition();
        change(&mut definition);
        definition.revision += 1;
        self.write_definition(&definition).await
    }

    /// Writes a definition to the shared state and waits until this node applied it.
    async fn write_definition(&self, definition: &PipelineDefinition) -> Result<(), ServiceError> {
        let json = serde_json::to_vec(definition).expect("a definition serialises");
        let key = pipeline_key(&definition.tenant, &definition.name);
        self.write_and_apply(&key, Some(&json)).await
    }
}

impl Placement for ClusterPart {
    fn save_module<'a>(
        &'a self,
        _: &'a Service,
        tenant: &'a str,
        entry: &'a ModuleEntry,
        bytes: &'a [u8],
    ) -> Change<'a, ()> {
        Box::pin(async move {
            for (key, chunk) in blob::chunks(&entry.digest, bytes) {
                self.log
                    .write(&key.key(), Some(chunk))
                    .await
                    .map_err(cluster_error)?;
            }
            let json = serde_json::to_vec(entry).expect("a module entry serialises");
            self.write_and_apply(&module_key(tenant, &entry.digest), Some(&json))
                .await
        })
    }

    fn save_tenant<'a>(
        &'a self,
        _: &'a Service,
        name: &'a str,
        settings: Option<&'a TenantConfig>,
    ) -> Change<'a, ()> {
        Box::pin(async move {
            let json = settings.map(|s| serde_json::to_vec(s).expect("a tenant serialises"));
            self.write_and_apply(&tenant_key(name), json.as_deref())
                .await
        })
    }

    fn keep_refusal<'a>(
        &'a self,
        service: &'a Service,
        tenant: &'a str,
        refusal: Refusal,
    ) -> Change<'a, ()> {
        Box::pin(async move {
            let json = serde_json::to_vec(&refusal).expect("a refusal serialises");
            let key = refusal_key(tenant, &refusal.digest);
            if let Err(e) = self.write_and_apply(&key, Some(&json)).await {
                tracing::warn!(
                    tenant,
                    module = refusal.name,
                    error = %e,
                    "A module's refusal could not be written to the cluster's state; this node keeps it alone."
                );
                service.refusals.insert(tenant, refusal);
            }
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
            let (tenant, name) = (definition.tenant.as_str(), definition.name.as_str());
            {
                let pipelines = service.pipelines.lock().unwrap_or_else(|e| e.into_inner());
                service.check_new(&pipelines, tenant, name, reserved)?;
            }
            // The node holding the pipeline's slot makes the entry and starts it when
            // it reads the definition.
            self.write_definition(&definition).await?;
            service.found(|| service.entry(tenant, name)).await
        })
    }

    fn set_state<'a>(
        &'a self,
        _: &'a Arc<Service>,
        entry: &'a Arc<Entry>,
        state: PipelineState,
    ) -> Change<'a, ()> {
        Box::pin(async move {
            if state == PipelineState::Running && entry.definition().state == PipelineState::Running
            {
                return Err(running(entry));
            }
            // The node running it acts on this when it reads it.
            self.write_change(entry, |d| {
                d.state = state;
                d.error = None;
            })
            .await
        })
    }

    fn remove<'a>(&'a self, _: &'a Service, entry: &'a Arc<Entry>) -> Change<'a, ()> {
        Box::pin(async move {
            let definition = entry.definition();
            let (tenant, name) = (definition.tenant.as_str(), definition.name.as_str());
            self.write_and_apply(&pipeline_key(tenant, name), None)
                .await?;
            self.reports.forget(tenant, name).await;
            Ok(())
        })
    }

    fn deploy<'a>(
        &'a self,
        service: &'a Arc<Service>,
        entry: &'a Arc<Entry>,
        request: Deploy,
    ) -> Change<'a, DeployReport> {
        // Checked here, written to the shared state, switched by the node that runs
        // the pipeline when it reads it.
        Box::pin(async move {
            let definition = entry.definition();
            let (tenant, name) = (definition.tenant.as_str(), definition.name.as_str());
            let (_, _, prepare_ms) = service.prepare_checked(entry, &request).await?;
            let failed = definition.state == PipelineState::Failed;
            self.write_change(entry, |d| {
                d.previous_module = Some(d.module.clone());
                d.module = request.module.clone();
                if request.reset_state {
                    // The node that runs it starts it again on the new generation.
                    d.state_generation += 1;
                }
                if failed {
                    d.state = PipelineState::Running;
                    d.error = None;
                }
            })
            .await?;
            let mut report = DeployReport {
                from: definition.module.clone(),
                to: request.module.clone(),
                outcome: if failed { "started" } else { "stored" },
                position: None,
                pause_ms: None,
                committed_rows: None,
                prepare_ms,
            };
            // When this node runs the pipeline, reading the change switched it.
            let switched = entry
                .last_switch
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
                .filter(|done| done.to_digest == request.module);
            if let Some(done) = switched {
                report.switched(&done);
            }
            swapped(entry, tenant, name, &report);
            Ok(report)
        })
    }

    fn figures(
        &self,
        service: &Service,
        entry: &Entry,
        definition: &PipelineDefinition,
    ) -> Figures {
        let counters = entry.metrics.snapshot();
        let (tenant, name) = (&definition.tenant, &definition.name);
        if definition.state != PipelineState::Running {
            return (None, counters, entry.rows_per_second());
        }
        if service.owns(tenant, name) {
            return (Some(self.node.clone()), counters, entry.rows_per_second());
        }
        match self.reports.get(tenant, name) {
            Some(report) => (Some(report.node), report.counters, report.rows_per_second),
            None => (None, counters, entry.rows_per_second()),
        }
    }

    fn counts(&self, service: &Service, definition: &PipelineDefinition) -> bool {
        service.owns(&definition.tenant, &definition.name)
    }

    fn runs_elsewhere(&self, service: &Service, tenant: &str, name: &str) -> Option<String> {
        let definition = service.entry(tenant, name).ok()?.definition();
        if definition.state != PipelineState::Running || service.owns(tenant, name) {
            return None;
        }
        let report = self.reports.get(tenant, name)?;
        (report.node != self.node).then_some(report.api?)
    }
}

/// Writes the definitions owners changed, in the order they changed them.
pub(super) async fn publish(
    log: Arc<dyn SharedLog>,
    mut definitions: mpsc::UnboundedReceiver<PipelineDefinition>,
) {
    while let Some(definition) = definitions.recv().await {
        let json = serde_json::to_vec(&definition).expect("a definition serialises");
        let key = pipeline_key(&definition.tenant, &definition.name);
        if let Err(e) = log.write(&key, Some(&json)).await {
            tracing::error!(error = %e, "A pipeline's status could not be written to the cluster's state.");
        }
    }
}

//! Applying the cluster's shared state on this node: every record of the state topic
//! in topic order (module chunks, tenants, modules, refusals, pipeline definitions),
//! each pipeline then brought in line with its definition and this node's slots.

use std::sync::Arc;

use sluice_cluster::StateRecord;
use sluice_cluster::blob::{Assembler, ChunkKey};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::Service;
use super::cluster::cluster_error;
use super::refusals::Refusal;
use super::registry::{Entry, stop};
use crate::config::TenantConfig;
use crate::error::ServiceError;
use crate::store::{ModuleEntry, PipelineDefinition, PipelineState};

impl Service {
    /// Applies the shared state's records in order, for as long as they come.
    pub(super) async fn apply_records(
        self: Arc<Service>,
        mut records: mpsc::UnboundedReceiver<StateRecord>,
    ) {
        let mut assembler = Assembler::default();
        let (warm, to_warm) = mpsc::unbounded_channel();
        let warmer = tokio::spawn(self.clone().warm_modules(to_warm));
        let _stop_warming = AbortOnDrop(warmer);
        while let Some(record) = records.recv().await {
            let offset = record.offset;
            if let Err(e) = self.apply(record, &mut assembler, &warm).await {
                tracing::error!(offset, error = %e, "A record of the cluster's state could not be applied; it is skipped.");
            }
            if let Some(part) = self.cluster.get() {
                part.applied.send_replace(offset + 1);
            }
        }
    }

    /// Compiles each module sent, one at a time, so that a pipeline of it that moves to
    /// this node later starts without compiling it first (seconds on a busy node).
    async fn warm_modules(
        self: Arc<Service>,
        mut modules: mpsc::UnboundedReceiver<(String, ModuleEntry)>,
    ) {
        while let Some((tenant, module)) = modules.recv().await {
            self.clone().warm_module(tenant, module).await;
        }
    }

    /// Compiles a module into the engine and its cache, unless it is there.
    pub(super) async fn warm_module(self: Arc<Service>, tenant: String, module: ModuleEntry) {
        let warmed = tokio::task::spawn_blocking(move || {
            let bytes = self.state.read_module(&module.digest)?;
            let limits = sluice_engine::InstanceLimits {
                compile: self.tenant(&tenant)?.compile_budget(),
                ..sluice_engine::InstanceLimits::default()
            };
            self.engine
                .load_bytes(
                    &tenant,
                    &module.name,
                    &self.state.module_path(&module.digest),
                    &bytes,
                    limits,
                )
                .map(drop)
                .map_err(|e| ServiceError::InvalidModule(e.to_string()))
        })
        .await;
        if let Ok(Err(e)) = warmed {
            tracing::warn!(error = %e, "A module of the cluster's state could not be compiled ahead; a pipeline using it compiles it when it starts here.");
        }
    }

    async fn apply(
        self: &Arc<Service>,
        record: StateRecord,
        assembler: &mut Assembler,
        warm: &mpsc::UnboundedSender<(String, ModuleEntry)>,
    ) -> Result<(), ServiceError> {
        let bad = |what: &str, e: serde_json::Error| {
            ServiceError::Cluster(format!("{what} `{}` is unreadable: {e}", record.key))
        };
        if let Some(chunk) = ChunkKey::parse(&record.key) {
            if !self.state.has_module_bytes(&chunk.digest)
                && let Some(whole) = assembler.add(&chunk, record.value.unwrap_or_default())
            {
                let bytes = whole.map_err(cluster_error)?;
                self.state.save_module_bytes(&chunk.digest, &bytes)?;
            }
        } else if let Some(name) = record.key.strip_prefix("tenant/") {
            match &record.value {
                Some(json) => {
                    let settings: TenantConfig =
                        serde_json::from_slice(json).map_err(|e| bad("tenant", e))?;
                    self.state.save_tenant(name, &settings)?;
                    self.install_tenant(name, settings)?;
                }
                None => self.uninstall_tenant(name)?,
            }
        } else if let Some(rest) = record.key.strip_prefix("module/") {
            let Some((tenant, _)) = rest.split_once('/') else {
                return Ok(());
            };
            if let Some(json) = &record.value {
                let entry: ModuleEntry =
                    serde_json::from_slice(json).map_err(|e| bad("module", e))?;
                self.state.save_module_entry(tenant, &entry)?;
                let _ = warm.send((tenant.to_string(), entry));
            }
        } else if let Some(rest) = record.key.strip_prefix("refused/") {
            let (Some((tenant, _)), Some(json)) = (rest.split_once('/'), &record.value) else {
                return Ok(());
            };
            let refusal: Refusal = serde_json::from_slice(json).map_err(|e| bad("refusal", e))?;
            self.refusals.insert(tenant, refusal);
        } else if let Some(rest) = record.key.strip_prefix("pipeline/") {
            let Some((tenant, name)) = rest.split_once('/') else {
                return Ok(());
            };
            match &record.value {
                Some(json) => {
                    let definition: PipelineDefinition =
                        serde_json::from_slice(json).map_err(|e| bad("pipeline", e))?;
                    self.apply_definition(definition).await?;
                }
                None => self.apply_removal(tenant, name).await?,
            }
        }
        Ok(())
    }

    /// Takes a pipeline's definition from the shared state; the node holding its slot
    /// acts on it.
    async fn apply_definition(
        self: &Arc<Service>,
        definition: PipelineDefinition,
    ) -> Result<(), ServiceError> {
        let existing = self
            .pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(definition.tenant.clone(), definition.name.clone()))
            .cloned();
        let entry = match existing {
            Some(entry) => {
                if !entry.replace(definition.clone()) {
                    return Ok(());
                }
                entry
            }
            None => self.register(definition.clone()),
        };
        self.state.save_pipeline(&definition)?;
        self.reconcile(&entry).await;
        Ok(())
    }

    async fn apply_removal(&self, tenant: &str, name: &str) -> Result<(), ServiceError> {
        let removed = self
            .pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(tenant.to_string(), name.to_string()));
        if let Some(entry) = removed {
            let mut control = entry.control.lock().await;
            stop(control.take()).await;
            // One node deletes the state: the one whose slot held the pipeline.
            if self.owns(tenant, name) {
                let definition = entry.definition();
                self.forget_state(&definition, definition.state_generation)
                    .await;
            }
            self.remove_stale_state(tenant, name, None);
        }
        self.state.remove_pipeline(tenant, name)
    }

    /// Brings a pipeline's task in line with its definition and this node's slots:
    /// started when it should run here, switched to its module, stopped when not.
    pub(super) async fn reconcile(self: &Arc<Service>, entry: &Arc<Entry>) {
        let mut control = entry.control.lock().await;
        let definition = entry.definition();
        let (tenant, name) = (definition.tenant.as_str(), definition.name.as_str());
        let should_run = definition.state == PipelineState::Running && self.owns(tenant, name);
        let runs = Entry::is_running(&control);
        if should_run && !runs {
            if let Err(e) = self.start(entry, &mut control) {
                tracing::error!(tenant, pipeline = name, error = %e, "A pipeline could not be started; it is marked failed.");
                let failed = self.update(entry, |d| {
                    d.state = PipelineState::Failed;
                    d.error = Some(e.to_string());
                });
                if let Err(e) = failed {
                    tracing::error!(tenant, pipeline = name, error = %e, "A pipeline's status could not be stored.");
                }
            }
        } else if should_run
            && let Some(old) = control
                .as_ref()
                .map(|r| r.state_generation)
                .filter(|&g| g != definition.state_generation)
        {
            // A deploy reset the state: the pipeline starts again on the new generation.
            stop(control.take()).await;
            self.forget_state(&definition, old).await;
            if let Err(e) = self.start(entry, &mut control) {
                tracing::error!(tenant, pipeline = name, error = %e, "A pipeline could not be started after its state was reset.");
            }
        } else if should_run {
            let module = control
                .as_ref()
                .map(|r| r.module.clone())
                .unwrap_or_default();
            if module != definition.module
                && let Err(e) = self.switch_to(entry, &mut control, &definition).await
            {
                tracing::warn!(tenant, pipeline = name, module = definition.module, error = %e, "A module swap failed on the node that runs the pipeline.");
            }
        } else if runs {
            stop(control.take()).await;
        }
        if !Entry::is_running(&control) {
            self.remove_stale_state(tenant, name, Some(definition.state_generation));
        }
    }

    /// Removes this node's copies of a pipeline's state but generation `keep`'s (all
    /// with `None`), which a reset or delete made while another node ran it left.
    fn remove_stale_state(&self, tenant: &str, name: &str, keep: Option<u64>) {
        match self.state.remove_other_state(tenant, name, keep) {
            Ok(removed) => {
                for path in removed {
                    tracing::info!(tenant, pipeline = name, path = %path.display(), "This node's copy of a pipeline's state that is no longer used was removed.");
                }
            }
            Err(error) => {
                tracing::warn!(tenant, pipeline = name, %error, "This node's copy of a pipeline's state that is no longer used could not be removed; delete it by hand.");
            }
        }
    }
}

/// Aborts a task when dropped: a helper task ends with the task that started it.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

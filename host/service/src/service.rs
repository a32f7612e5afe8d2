//! The registry of pipelines and what can be done to them: create, deploy (swap),
//! roll back, pause, resume, delete, and the status of each. Every pipeline runs as a
//! task of its own; one task failing or trapping touches no other.

mod cluster;
mod dead_letters;
mod deploy;
mod history;
mod host;
mod refusals;
mod registry;
mod reports;
mod tenancy;
mod views;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use serde::Deserialize;
use sluice_engine::{EngineConfig, TransformEngine};
use tokio::sync::watch;

use crate::auth::{Caller, Tokens};
use crate::config::{ServeConfig, valid_name};
use crate::error::ServiceError;
use crate::logs::LogLine;
use crate::store::{ModuleEntry, PipelineDefinition, PipelineState, StateDir, now_seconds};
pub use cluster::NodeView;
pub use dead_letters::{DeadLetter, DeadLetters, MAX_LETTERS};
pub use deploy::{Deploy, DeployReport};
pub use history::{HISTORY_EVERY, History, HistoryPoint, TenantHistory};
pub use host::{HostMemory, HostView, TenantFigures};
pub use refusals::Refusal;
use registry::{Entry, stop};
#[cfg(test)]
pub(crate) use tenancy::reaches_host_files;
use tenancy::{Tenant, check_room};
pub use tenancy::{TenantSource, TenantView};
#[cfg(test)]
pub(crate) use views::redacted;
pub use views::{LastSwap, ModuleListing, ModuleView, PipelineStatus, SAMPLE_EVERY, WaitingStatus};

/// A request to create a pipeline.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreatePipeline {
    /// The pipeline config in the TOML of `sluice run`, without `[pipeline] name` and
    /// `[transform] module`, which the service sets.
    pub config: String,
    /// Digest of an uploaded module of the tenant.
    pub module: String,
}

/// The service: tenants, their modules and pipelines.
pub struct Service {
    config: ServeConfig,
    state: StateDir,
    engine: TransformEngine,
    tokens: Tokens,
    tenants: RwLock<BTreeMap<String, Tenant>>,
    pipelines: Mutex<BTreeMap<(String, String), Arc<Entry>>>,
    ready: AtomicBool,
    cluster: OnceLock<Arc<cluster::ClusterPart>>,
    refusals: refusals::Refusals,
    stopping: watch::Sender<bool>,
    started: std::time::Instant,
}

fn not_found(what: String) -> ServiceError {
    ServiceError::NotFound { what }
}

impl Service {
    /// Opens the state directory and sets up the engine; call [`Service::restore`]
    /// next.
    pub fn new(config: ServeConfig) -> Result<Arc<Service>, ServiceError> {
        let tokens = Tokens::load(&config)?;
        let state = StateDir::open(&config.server.state_dir)?;
        let engine = TransformEngine::new(EngineConfig {
            fuel_metering: config.server.fuel_metering,
            // Many modules with limits of their own: allocate on demand.
            pooled_instances: 0,
            cache_dir: Some(state.compiled_dir()),
            ..EngineConfig::default()
        })
        .map_err(|e| ServiceError::Config {
            path: config.server.state_dir.clone(),
            message: e.to_string(),
        })?;
        let tenants = config
            .tenants
            .iter()
            .map(|(name, tenant)| (name.clone(), Tenant::from_file(tenant)))
            .collect();
        Ok(Arc::new(Service {
            config,
            state,
            engine,
            tokens,
            tenants: RwLock::new(tenants),
            pipelines: Mutex::default(),
            ready: AtomicBool::new(false),
            cluster: OnceLock::new(),
            stopping: watch::channel(false).0,
            started: std::time::Instant::now(),
            refusals: refusals::Refusals::default(),
        }))
    }

    /// The service's config.
    pub fn config(&self) -> &ServeConfig {
        &self.config
    }

    /// Who an `Authorization` header names.
    pub fn caller(&self, authorization: Option<&str>) -> Result<Caller, ServiceError> {
        self.tokens.caller(authorization)
    }

    /// Says the service is stopping: followed log streams end, compiles are stopped.
    pub fn begin_stop(&self) {
        self.stopping.send_replace(true);
        // Uploads being compiled are requests the API server waits for: they end now.
        self.engine.cancel_compiles();
    }

    /// Becomes true when the service is stopping.
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.stopping.subscribe()
    }

    /// Whether every stored pipeline was restored.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    fn entry(&self, tenant: &str, name: &str) -> Result<Arc<Entry>, ServiceError> {
        self.pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(tenant.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| not_found(format!("Pipeline {name} of tenant {tenant}")))
    }

    /// Every pipeline in the registry.
    fn entries(&self) -> Vec<Arc<Entry>> {
        self.pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Stores an uploaded module for `tenant` after checking it compiles and speaks a
    /// supported contract.
    pub async fn upload_module(
        &self,
        caller: &Caller,
        tenant: &str,
        name: &str,
        bytes: Vec<u8>,
    ) -> Result<ModuleEntry, ServiceError> {
        caller.may_act_for(tenant)?;
        let limits = self.found(|| self.tenant(tenant)).await?;
        if !valid_name(name) {
            return Err(ServiceError::BadRequest(format!(
                "module name `{name}` must be 1 to 100 letters, digits, '_' or '-'"
            )));
        }
        let max = limits.max_module_mib * 1024 * 1024;
        if bytes.len() > max {
            return Err(ServiceError::LimitExceeded(format!(
                "module {name} is {} bytes; tenant {tenant} may upload modules of at most {} MiB",
                bytes.len(),
                limits.max_module_mib
            )));
        }
        let budget = limits.compile_budget();
        let digest = sluice_engine::module_digest(&bytes);
        if let Some(refusal) = self.refusals.holding(tenant, &digest, &budget) {
            return Err(ServiceError::InvalidModule(format!(
                "{} (refused before, at {}; it is compiled again once it changes or the tenant's compile caps do)",
                refusal.reason, refusal.refused_at
            )));
        }
        let engine = self.engine.clone();
        let module_name = name.to_string();
        let owner = tenant.to_string();
        let module_limits = sluice_engine::InstanceLimits {
            compile: budget.clone(),
            ..sluice_engine::InstanceLimits::default()
        };
        let (bytes, module) = tokio::task::spawn_blocking(move || {
            let checked = engine.load_bytes(
                &owner,
                &module_name,
                Path::new(&module_name),
                &bytes,
                module_limits,
            );
            (bytes, checked)
        })
        .await
        .expect("checking a module does not panic");
        let module = match module {
            Ok(module) => module,
            Err(error @ sluice_engine::EngineError::CompileLimit { .. }) => {
                let reason = error.to_string();
                self.record_refusal(tenant, name, &digest, &budget, &reason)
                    .await;
                return Err(ServiceError::InvalidModule(reason));
            }
            Err(error @ sluice_engine::EngineError::CompileCancelled { .. }) => {
                return Err(ServiceError::Unavailable(format!(
                    "{error} Upload it again once the service is back."
                )));
            }
            // The host failed to compile, not the module its budgets: nothing is recorded.
            Err(error @ sluice_engine::EngineError::CompileCrashed { .. }) => {
                return Err(ServiceError::Unavailable(error.to_string()));
            }
            Err(error) => return Err(ServiceError::InvalidModule(error.to_string())),
        };
        let entry = ModuleEntry {
            digest: module.digest().to_string(),
            name: name.to_string(),
            size_bytes: bytes.len() as u64,
            contract: module.contract().version().to_string(),
            uploaded_at: now_seconds(),
            language: sluice_engine::source_language(&bytes),
        };
        match self.cluster_part() {
            Some(part) => self.write_module(part, tenant, &entry, &bytes).await?,
            None => self.state.save_module(tenant, &entry, &bytes)?,
        }
        tracing::info!(
            tenant,
            module = name,
            digest = entry.digest,
            "A module was uploaded."
        );
        Ok(entry)
    }

    /// Creates a pipeline and starts it.
    pub async fn create_pipeline(
        self: &Arc<Service>,
        caller: &Caller,
        tenant: &str,
        name: &str,
        request: CreatePipeline,
    ) -> Result<PipelineStatus, ServiceError> {
        caller.may_act_for(tenant)?;
        let limits = self.found(|| self.tenant(tenant)).await?;
        if !valid_name(name) {
            return Err(ServiceError::BadRequest(format!(
                "pipeline name `{name}` must be 1 to 100 letters, digits, '_' or '-'"
            )));
        }
        let module = || {
            self.state
                .module(tenant, &request.module)?
                .ok_or_else(|| not_found(format!("Module {} of tenant {tenant}", request.module)))
        };
        self.found(module).await?;
        let config = self.pipeline_config(tenant, name, &request.config, &request.module)?;
        let definition = PipelineDefinition {
            tenant: tenant.to_string(),
            name: name.to_string(),
            config: request.config,
            module: request.module,
            previous_module: None,
            state: PipelineState::Running,
            error: None,
            stopped_at: None,
            revision: 0,
        };
        let entry = {
            let mut pipelines = self.pipelines.lock().unwrap_or_else(|e| e.into_inner());
            let key = (tenant.to_string(), name.to_string());
            if pipelines.contains_key(&key) {
                return Err(ServiceError::Conflict(format!(
                    "pipeline {name} of tenant {tenant} exists; deploy a module to it or delete it first"
                )));
            }
            let asked = config.guest_memory_mib();
            check_room(&pipelines, tenant, &limits, &self.config.limits, asked)?;
            // In a cluster the node holding the pipeline's slot makes the entry and
            // starts it when it reads the definition.
            match self.cluster_part() {
                Some(_) => None,
                None => {
                    let entry = Entry::new(definition.clone(), asked);
                    pipelines.insert(key, entry.clone());
                    Some(entry)
                }
            }
        };
        let Some(entry) = entry else {
            let part = self
                .cluster_part()
                .expect("only a node of a cluster makes no entry here");
            self.write_definition(part, &definition).await?;
            tracing::info!(tenant, pipeline = name, "A pipeline was created.");
            let entry = self.found(|| self.entry(tenant, name)).await?;
            return self.status_of(&entry);
        };
        let mut control = entry.control.lock().await;
        // Stored before it starts: a crash right after the answer keeps the pipeline.
        let started = self
            .state
            .save_pipeline(&definition)
            .and_then(|()| self.start(&entry, &mut control));
        if let Err(e) = started {
            self.pipelines
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&(tenant.to_string(), name.to_string()));
            let _ = self.state.remove_pipeline(tenant, name);
            return Err(e);
        }
        drop(control);
        tracing::info!(tenant, pipeline = name, "A pipeline was created.");
        self.status_of(&entry)
    }

    /// Stops a pipeline after it commits its work; it stays stopped across restarts.
    pub async fn pause(
        &self,
        caller: &Caller,
        tenant: &str,
        name: &str,
    ) -> Result<PipelineStatus, ServiceError> {
        caller.may_act_for(tenant)?;
        let entry = self.found(|| self.entry(tenant, name)).await?;
        if let Some(part) = self.cluster_part() {
            // The node running it stops it when it reads this.
            self.write_change(part, &entry, |d| {
                d.state = PipelineState::Paused;
                d.error = None;
            })
            .await?;
            return self.status_of(&entry);
        }
        let mut control = entry.control.lock().await;
        self.update(&entry, |d| {
            d.state = PipelineState::Paused;
            d.error = None;
        })?;
        stop(control.take()).await;
        drop(control);
        // A pipeline that failed while stopping stays failed.
        self.status_of(&entry)
    }

    /// Starts a paused or failed pipeline from its stored position.
    pub async fn resume(
        self: &Arc<Service>,
        caller: &Caller,
        tenant: &str,
        name: &str,
    ) -> Result<PipelineStatus, ServiceError> {
        caller.may_act_for(tenant)?;
        let entry = self.found(|| self.entry(tenant, name)).await?;
        if let Some(part) = self.cluster_part() {
            if entry.definition().state == PipelineState::Running {
                return Err(ServiceError::Conflict(format!(
                    "pipeline {name} is running"
                )));
            }
            self.write_change(part, &entry, |d| {
                d.state = PipelineState::Running;
                d.error = None;
            })
            .await?;
            return self.status_of(&entry);
        }
        let mut control = entry.control.lock().await;
        if Entry::is_running(&control) {
            return Err(ServiceError::Conflict(format!(
                "pipeline {name} is running"
            )));
        }
        self.start(&entry, &mut control)?;
        drop(control);
        self.status_of(&entry)
    }

    /// Stops a pipeline and forgets it. Its position stays in Kafka: a pipeline
    /// created again under the same name resumes from it.
    pub async fn delete(
        &self,
        caller: &Caller,
        tenant: &str,
        name: &str,
    ) -> Result<(), ServiceError> {
        caller.may_act_for(tenant)?;
        let entry = self.found(|| self.entry(tenant, name)).await?;
        if let Some(part) = self.cluster_part() {
            self.write_removal(part, tenant, name).await?;
            part.reports().forget(tenant, name).await;
            tracing::info!(tenant, pipeline = name, "A pipeline was deleted.");
            return Ok(());
        }
        let mut control = entry.control.lock().await;
        stop(control.take()).await;
        self.state.remove_pipeline(tenant, name)?;
        self.pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(tenant.to_string(), name.to_string()));
        tracing::info!(tenant, pipeline = name, "A pipeline was deleted.");
        Ok(())
    }

    /// A pipeline's kept guest log lines and a receiver for new ones.
    pub async fn logs(
        &self,
        caller: &Caller,
        tenant: &str,
        name: &str,
    ) -> Result<(Vec<LogLine>, tokio::sync::broadcast::Receiver<LogLine>), ServiceError> {
        caller.may_act_for(tenant)?;
        Ok(self
            .found(|| self.entry(tenant, name))
            .await?
            .log
            .subscribe())
    }
}

//! The registry of pipelines and what can be done to them: create, deploy (swap),
//! roll back, pause, resume, delete, and the status of each. Every pipeline runs as a
//! task of its own; one task failing or trapping touches no other.

mod cluster;
mod cluster_membership;
mod cluster_state;
mod dead_letters;
mod deploy;
mod history;
mod host;
mod keyed_state;
mod last_swap;
mod placement;
mod refusals;
mod registry;
mod replay;
mod reports;
mod shadow;
mod tenancy;
mod views;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use serde::Deserialize;
use sluice_engine::{EngineConfig, TransformEngine};
use sluice_pipeline::{Destination, KafkaDestination, LookupTables};
use tokio::sync::watch;

use crate::auth::{Caller, TenantScope, Tokens};
use crate::config::{ServeConfig, valid_name};
use crate::error::ServiceError;
use crate::logs::LogLine;
use crate::store::{
    ModuleEntry, PipelineDefinition, PipelineState, StateDir, now_millis, now_seconds,
};
pub use cluster_membership::NodeView;
pub use deploy::{Deploy, DeployReport};
pub use history::{HISTORY_EVERY, History, HistoryPoint, TenantHistory};
pub use host::{HostMemory, HostView, TenantFigures};
pub use keyed_state::{MAX_STATE_PAGE, StateSummary};
pub use last_swap::LastSwap;
use placement::{Alone, Placement};
pub use refusals::Refusal;
use registry::{Entry, Reserved};
pub use replay::Replay;
pub use shadow::ShadowDeploy;
#[cfg(test)]
pub(crate) use tenancy::reaches_host_files;
use tenancy::{Tenant, check_room};
pub use tenancy::{TenantSource, TenantView};
#[cfg(test)]
pub(crate) use views::redacted;
pub use views::{ModuleListing, ModuleView, PipelineStatus, SAMPLE_EVERY, WaitingStatus};

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
    destination: Arc<dyn Destination>,
    tokens: Tokens,
    tenants: RwLock<BTreeMap<String, Tenant>>,
    pipelines: Mutex<BTreeMap<(String, String), Arc<Entry>>>,
    ready: AtomicBool,
    cluster: OnceLock<Arc<cluster::ClusterPart>>,
    refusals: refusals::Refusals,
    stopping: watch::Sender<bool>,
    started: std::time::Instant,
    /// The lookup tables this node follows, shared by its pipelines.
    lookups: Arc<LookupTables>,
}

fn not_found(what: String) -> ServiceError {
    ServiceError::NotFound { what }
}

impl Service {
    /// Opens the state directory and sets up the engine; its pipelines deliver to
    /// Kafka. Call [`Service::restore`] next.
    pub fn new(config: ServeConfig) -> Result<Arc<Service>, ServiceError> {
        Service::with_destination(config, Arc::new(KafkaDestination))
    }

    /// [`Service::new`], with the pipelines delivering to `destination`.
    pub fn with_destination(
        config: ServeConfig,
        destination: Arc<dyn Destination>,
    ) -> Result<Arc<Service>, ServiceError> {
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
            lookups: Arc::new(LookupTables::new(state.lookups_dir())),
            config,
            state,
            engine,
            destination,
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

    /// Where changes take effect: the cluster's shared state once the node joined one,
    /// else this node alone.
    fn placement(&self) -> &dyn Placement {
        match self.cluster.get() {
            Some(part) => part.as_ref(),
            None => &Alone,
        }
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
        tenant: &TenantScope,
        name: &str,
        bytes: Vec<u8>,
    ) -> Result<ModuleEntry, ServiceError> {
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
        self.placement()
            .save_module(self, tenant, &entry, &bytes)
            .await?;
        tracing::info!(
            %tenant,
            module = name,
            digest = entry.digest,
            "A module was uploaded."
        );
        Ok(entry)
    }

    /// Creates a pipeline and starts it.
    pub async fn create_pipeline(
        self: &Arc<Service>,
        tenant: &TenantScope,
        name: &str,
        request: CreatePipeline,
    ) -> Result<PipelineStatus, ServiceError> {
        self.found(|| self.tenant(tenant)).await?;
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
        // A new pipeline's state never meets an older one's of the same name: its
        // generation, and so its changelog topic and store, are its own.
        let state_generation = now_millis();
        let config = self.pipeline_config(
            tenant,
            name,
            &request.config,
            &request.module,
            state_generation,
        )?;
        let definition = PipelineDefinition {
            tenant: tenant.to_string(),
            name: name.to_string(),
            config: request.config,
            module: request.module,
            previous_module: None,
            state: PipelineState::Running,
            error: None,
            stopped_at: None,
            state_generation,
            revision: 0,
        };
        let entry = self
            .placement()
            .create(self, definition, Reserved::of(&config))
            .await?;
        tracing::info!(%tenant, pipeline = name, "A pipeline was created.");
        self.status_of(&entry)
    }

    /// Refuses a new pipeline that exists, or that its tenant or the host has no room
    /// for. Called with the registry locked, so two creates cannot both pass.
    fn check_new(
        &self,
        pipelines: &BTreeMap<(String, String), Arc<Entry>>,
        tenant: &str,
        name: &str,
        reserved: Reserved,
    ) -> Result<(), ServiceError> {
        if pipelines.contains_key(&(tenant.to_string(), name.to_string())) {
            return Err(ServiceError::Conflict(format!(
                "pipeline {name} of tenant {tenant} exists; deploy a module to it or delete it first"
            )));
        }
        let limits = self.tenant(tenant)?;
        check_room(pipelines, tenant, &limits, &self.config.limits, reserved)
    }

    /// Stops a pipeline after it commits its work; it stays stopped across restarts.
    pub async fn pause(
        self: &Arc<Service>,
        tenant: &TenantScope,
        name: &str,
    ) -> Result<PipelineStatus, ServiceError> {
        let entry = self.found(|| self.entry(tenant, name)).await?;
        self.placement()
            .set_state(self, &entry, PipelineState::Paused)
            .await?;
        // A pipeline that failed while stopping stays failed.
        self.status_of(&entry)
    }

    /// Starts a paused or failed pipeline from its stored position.
    pub async fn resume(
        self: &Arc<Service>,
        tenant: &TenantScope,
        name: &str,
    ) -> Result<PipelineStatus, ServiceError> {
        let entry = self.found(|| self.entry(tenant, name)).await?;
        self.placement()
            .set_state(self, &entry, PipelineState::Running)
            .await?;
        self.status_of(&entry)
    }

    /// Stops a pipeline and forgets it. Its position stays in Kafka: a pipeline
    /// created again under the same name resumes from it.
    pub async fn delete(&self, tenant: &TenantScope, name: &str) -> Result<(), ServiceError> {
        let entry = self.found(|| self.entry(tenant, name)).await?;
        self.placement().remove(self, &entry).await?;
        entry.shadow.take("its pipeline was deleted");
        tracing::info!(%tenant, pipeline = name, "A pipeline was deleted.");
        Ok(())
    }

    /// A pipeline's kept guest log lines and a receiver for new ones.
    pub async fn logs(
        &self,
        tenant: &TenantScope,
        name: &str,
    ) -> Result<(Vec<LogLine>, tokio::sync::broadcast::Receiver<LogLine>), ServiceError> {
        Ok(self
            .found(|| self.entry(tenant, name))
            .await?
            .log
            .subscribe())
    }
}

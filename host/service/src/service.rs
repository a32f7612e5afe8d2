//! The registry of pipelines and what can be done to them: create, deploy (swap),
//! roll back, pause, resume, delete, and the status of each. Every pipeline runs as a
//! task of its own; one task failing or trapping touches no other.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sluice_engine::{
    EngineConfig, TransformEngine, TransformError, TransformInstance, TransformModule,
};
use sluice_pipeline::{
    MetricsSnapshot, PipelineConfig, PipelineMetrics, Position, RunControls, RunMode, StartFrom,
    SwapRequest, instance_limits, run_controlled,
};
use sluice_source::{ChangeFeed, SourceOptions};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::auth::{Caller, Tokens};
use crate::config::{ServeConfig, TenantConfig, valid_name};
use crate::error::ServiceError;
use crate::logs::{LogLine, PipelineLog};
use crate::store::{ModuleEntry, PipelineDefinition, PipelineState, StateDir, now_seconds};

/// Longest a deploy waits for the pipeline to reach a batch boundary.
const SWAP_WAIT: Duration = Duration::from_secs(120);

/// Longest a pause or shutdown waits for a pipeline to commit and stop.
const STOP_WAIT: Duration = Duration::from_secs(60);

/// Rate samples kept per pipeline (one per `SAMPLE_EVERY`).
const RATE_SAMPLES: usize = 10;

/// How often rates are sampled.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(1);

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
}

/// A done swap.
#[derive(Clone, Debug, Serialize)]
pub struct DeployReport {
    /// Digest of the module before.
    pub from: String,
    /// Digest of the module now.
    pub to: String,
    /// `switched` (the running pipeline switched at a boundary), `started` (it had
    /// failed; it was started with the new module) or `stored` (it was paused or
    /// stopped before the boundary; it starts with the new module when resumed).
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

/// A pipeline's status, as the API shows it.
#[derive(Clone, Debug, Serialize)]
pub struct PipelineStatus {
    /// The owning tenant.
    pub tenant: String,
    /// Its name.
    pub name: String,
    /// `running`, `paused` or `failed`.
    pub state: PipelineState,
    /// Why it failed.
    pub error: Option<String>,
    /// The module it runs.
    pub module: ModuleView,
    /// The module `rollback` returns to.
    pub previous_module: Option<String>,
    /// The table.
    pub table: String,
    /// The topic for records that name none.
    pub topic: String,
    /// Where it is (as of its last commit since the service started).
    pub position: Position,
    /// The table's latest version when last looked at.
    pub latest_version: u64,
    /// Versions committed to the table and not yet delivered.
    pub lag_versions: u64,
    /// Change rows per second over the last seconds.
    pub rows_per_second: f64,
    /// Counters since the service started.
    pub counters: MetricsSnapshot,
    /// The config as submitted, secrets redacted.
    pub config: String,
}

/// A module by digest and name.
#[derive(Clone, Debug, Serialize)]
pub struct ModuleView {
    /// SHA-256 of its bytes.
    pub digest: String,
    /// Its name.
    pub name: String,
}

/// A running pipeline's task and its controls.
struct Running {
    shutdown: watch::Sender<bool>,
    swaps: mpsc::Sender<SwapRequest>,
    task: JoinHandle<()>,
}

/// One pipeline in the registry.
struct Entry {
    definition: Mutex<PipelineDefinition>,
    metrics: Arc<PipelineMetrics>,
    log: Arc<PipelineLog>,
    rates: Mutex<VecDeque<(Instant, u64)>>,
    // Serialises what is done to one pipeline (deploy, pause, ...).
    control: tokio::sync::Mutex<Option<Running>>,
    // The memory this pipeline may use, counted against the host's cap.
    memory_mib: usize,
}

impl Entry {
    fn definition(&self) -> PipelineDefinition {
        self.definition
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn update(
        &self,
        state: &StateDir,
        change: impl FnOnce(&mut PipelineDefinition),
    ) -> Result<(), ServiceError> {
        let mut definition = self.definition.lock().unwrap_or_else(|e| e.into_inner());
        change(&mut definition);
        state.save_pipeline(&definition)
    }
}

/// The service: tenants, their modules and pipelines.
pub struct Service {
    config: ServeConfig,
    state: StateDir,
    engine: TransformEngine,
    tokens: Tokens,
    pipelines: Mutex<BTreeMap<(String, String), Arc<Entry>>>,
    ready: AtomicBool,
    stopping: watch::Sender<bool>,
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
        Ok(Arc::new(Service {
            config,
            state,
            engine,
            tokens,
            pipelines: Mutex::default(),
            ready: AtomicBool::new(false),
            stopping: watch::channel(false).0,
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

    /// Says the service is stopping: followed log streams end.
    pub fn begin_stop(&self) {
        self.stopping.send_replace(true);
    }

    /// Becomes true when the service is stopping.
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.stopping.subscribe()
    }

    /// Whether every stored pipeline was restored.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// Starts every stored pipeline that was running when the service last stopped.
    pub async fn restore(self: &Arc<Service>) -> Result<usize, ServiceError> {
        let definitions = self.state.pipelines()?;
        let count = definitions.len();
        for definition in definitions {
            let memory_mib = self
                .pipeline_config(
                    &definition.tenant,
                    &definition.name,
                    &definition.config,
                    &definition.module,
                )
                .map_or(0, |c| c.guest_memory_mib());
            let entry = Arc::new(Entry {
                definition: Mutex::new(definition.clone()),
                metrics: Arc::default(),
                log: Arc::default(),
                rates: Mutex::default(),
                control: tokio::sync::Mutex::new(None),
                memory_mib,
            });
            self.pipelines
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(
                    (definition.tenant.clone(), definition.name.clone()),
                    entry.clone(),
                );
            if definition.state == PipelineState::Running {
                let mut control = entry.control.lock().await;
                if let Err(e) = self.start(&entry, &mut control) {
                    tracing::error!(tenant = definition.tenant, pipeline = definition.name, error = %e, "A stored pipeline could not be restored; it is marked failed.");
                    entry.update(&self.state, |d| {
                        d.state = PipelineState::Failed;
                        d.error = Some(e.to_string());
                    })?;
                }
            }
        }
        self.ready.store(true, Ordering::Relaxed);
        tracing::info!(pipelines = count, "The service restored its pipelines.");
        Ok(count)
    }

    fn tenant(&self, tenant: &str) -> Result<&TenantConfig, ServiceError> {
        self.config
            .tenants
            .get(tenant)
            .ok_or_else(|| not_found(format!("Tenant {tenant}")))
    }

    fn entry(&self, tenant: &str, name: &str) -> Result<Arc<Entry>, ServiceError> {
        self.pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(tenant.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| not_found(format!("Pipeline {name} of tenant {tenant}")))
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
        let limits = self.tenant(tenant)?;
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
        let engine = self.engine.clone();
        let module_name = name.to_string();
        let (bytes, module) = tokio::task::spawn_blocking(move || {
            let checked = engine.load_bytes(
                &module_name,
                Path::new(&module_name),
                &bytes,
                sluice_engine::InstanceLimits::default(),
            );
            (bytes, checked)
        })
        .await
        .expect("checking a module does not panic");
        let module = module.map_err(|e| ServiceError::InvalidModule(e.to_string()))?;
        let entry = ModuleEntry {
            digest: module.digest().to_string(),
            name: name.to_string(),
            size_bytes: bytes.len() as u64,
            contract: module.contract().version().to_string(),
            uploaded_at: now_seconds(),
        };
        self.state.save_module(tenant, &entry, &bytes)?;
        tracing::info!(
            tenant,
            module = name,
            digest = entry.digest,
            "A module was uploaded."
        );
        Ok(entry)
    }

    /// The tenant's modules.
    pub fn modules(&self, caller: &Caller, tenant: &str) -> Result<Vec<ModuleEntry>, ServiceError> {
        caller.may_act_for(tenant)?;
        self.tenant(tenant)?;
        self.state.modules(tenant)
    }

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

    /// Compiles a stored module under a pipeline's limits and starts an instance of it
    /// with the pipeline's parameters (which runs its `init`).
    fn prepare_module(
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
                &listed.name,
                &self.state.module_path(digest),
                &bytes,
                instance_limits(&config.transform),
            )
            .map_err(|e| ServiceError::InvalidModule(e.to_string()))?
            .with_log_tap(entry.log.tap(digest));
        let instance = module
            .instantiate(&config.transform_params())
            .map_err(|e| ServiceError::InvalidModule(e.to_string()))?;
        Ok((module, instance))
    }

    /// Starts a pipeline's task. The caller holds the pipeline's control lock.
    fn start(
        self: &Arc<Service>,
        entry: &Arc<Entry>,
        control: &mut Option<Running>,
    ) -> Result<(), ServiceError> {
        let definition = entry.definition();
        let config = self.pipeline_config(
            &definition.tenant,
            &definition.name,
            &definition.config,
            &definition.module,
        )?;
        entry.update(&self.state, |d| {
            d.state = PipelineState::Running;
            d.error = None;
        })?;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let (swaps, swaps_rx) = mpsc::channel(1);
        let service = self.clone();
        let task_entry = entry.clone();
        let task = tokio::spawn(async move {
            let entry = task_entry;
            let prepared = {
                let (service, entry, config) = (service.clone(), entry.clone(), config.clone());
                let (tenant, digest) = (definition.tenant.clone(), definition.module.clone());
                tokio::task::spawn_blocking(move || {
                    service.prepare_module(&entry, &config, &digest, &tenant)
                })
                .await
                .expect("preparing a module does not panic")
            };
            let result = match prepared {
                Ok((module, _)) => {
                    let controls = RunControls {
                        module: Some(Arc::new(module)),
                        swaps: Some(swaps_rx),
                        metrics: entry.metrics.clone(),
                        quiet_progress: false,
                    };
                    run_controlled(
                        &config,
                        RunMode::Follow,
                        StartFrom::StoredPosition,
                        shutdown_rx,
                        controls,
                    )
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
                }
                Err(e) => Err(e.to_string()),
            };
            service.finished(&entry, result);
        });
        *control = Some(Running {
            shutdown,
            swaps,
            task,
        });
        Ok(())
    }

    /// Records how a pipeline's task ended.
    fn finished(&self, entry: &Entry, result: Result<(), String>) {
        let definition = entry.definition();
        let (tenant, name) = (definition.tenant.as_str(), definition.name.as_str());
        let at = entry.metrics.snapshot();
        let stopped_at = Some(at.position);
        let stored = match result {
            Ok(()) => {
                tracing::info!(tenant, pipeline = name, "A pipeline stopped.");
                entry.update(&self.state, |d| d.stopped_at = stopped_at)
            }
            Err(error) => {
                tracing::error!(tenant, pipeline = name, %error, "A pipeline stopped with an error; it stays stopped until it is resumed or gets a new module.");
                entry.update(&self.state, |d| {
                    d.state = PipelineState::Failed;
                    d.error = Some(error);
                    d.stopped_at = stopped_at;
                })
            }
        };
        if let Err(e) = stored {
            tracing::error!(tenant, pipeline = name, error = %e, "A pipeline's status could not be stored.");
        }
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
        let limits = self.tenant(tenant)?;
        if !valid_name(name) {
            return Err(ServiceError::BadRequest(format!(
                "pipeline name `{name}` must be 1 to 100 letters, digits, '_' or '-'"
            )));
        }
        if self.state.module(tenant, &request.module)?.is_none() {
            return Err(not_found(format!(
                "Module {} of tenant {tenant}",
                request.module
            )));
        }
        let config = self.pipeline_config(tenant, name, &request.config, &request.module)?;
        let entry = {
            let mut pipelines = self.pipelines.lock().unwrap_or_else(|e| e.into_inner());
            let key = (tenant.to_string(), name.to_string());
            if pipelines.contains_key(&key) {
                return Err(ServiceError::Conflict(format!(
                    "pipeline {name} of tenant {tenant} exists; deploy a module to it or delete it first"
                )));
            }
            let own = pipelines.keys().filter(|(t, _)| t == tenant).count();
            if own >= limits.max_pipelines {
                return Err(ServiceError::LimitExceeded(format!(
                    "tenant {tenant} has {own} pipelines, its limit"
                )));
            }
            let host = &self.config.limits;
            if pipelines.len() >= host.max_pipelines {
                return Err(ServiceError::LimitExceeded(format!(
                    "this host runs {} pipelines, its limit",
                    pipelines.len()
                )));
            }
            let memory: usize = pipelines.values().map(|e| e.memory_mib).sum();
            let asked = config.guest_memory_mib();
            if memory + asked > host.max_memory_mib {
                return Err(ServiceError::LimitExceeded(format!(
                    "this host's pipelines may already use {memory} MiB of guest memory; {asked} MiB more would pass its limit of {} MiB",
                    host.max_memory_mib
                )));
            }
            let entry = Arc::new(Entry {
                definition: Mutex::new(PipelineDefinition {
                    tenant: tenant.to_string(),
                    name: name.to_string(),
                    config: request.config,
                    module: request.module,
                    previous_module: None,
                    state: PipelineState::Running,
                    error: None,
                    stopped_at: None,
                }),
                metrics: Arc::default(),
                log: Arc::default(),
                rates: Mutex::default(),
                control: tokio::sync::Mutex::new(None),
                memory_mib: asked,
            });
            pipelines.insert(key, entry.clone());
            entry
        };
        let mut control = entry.control.lock().await;
        if let Err(e) = self.start(&entry, &mut control) {
            self.pipelines
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&(tenant.to_string(), name.to_string()));
            return Err(e);
        }
        drop(control);
        tracing::info!(tenant, pipeline = name, "A pipeline was created.");
        self.status_of(&entry)
    }

    /// The tenant's pipelines.
    pub fn pipelines(
        &self,
        caller: &Caller,
        tenant: &str,
    ) -> Result<Vec<PipelineStatus>, ServiceError> {
        caller.may_act_for(tenant)?;
        self.tenant(tenant)?;
        let entries: Vec<Arc<Entry>> = self
            .pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|((t, _), _)| t == tenant)
            .map(|(_, e)| e.clone())
            .collect();
        entries.iter().map(|e| self.status_of(e)).collect()
    }

    /// One pipeline's status.
    pub fn status(
        &self,
        caller: &Caller,
        tenant: &str,
        name: &str,
    ) -> Result<PipelineStatus, ServiceError> {
        caller.may_act_for(tenant)?;
        let entry = self.entry(tenant, name)?;
        self.status_of(&entry)
    }

    fn status_of(&self, entry: &Entry) -> Result<PipelineStatus, ServiceError> {
        let definition = entry.definition();
        let counters = entry.metrics.snapshot();
        let module_name = self
            .state
            .module(&definition.tenant, &definition.module)?
            .map_or_else(String::new, |m| m.name);
        let rows_per_second = {
            let rates = entry.rates.lock().unwrap_or_else(|e| e.into_inner());
            match (rates.front(), rates.back()) {
                (Some((t0, r0)), Some((t1, r1))) if t1 > t0 => {
                    (r1 - r0) as f64 / t1.duration_since(*t0).as_secs_f64()
                }
                _ => 0.0,
            }
        };
        let position = position_of(&definition, &counters);
        let (table, topic) = match toml::from_str::<toml::Table>(&definition.config) {
            Ok(config) => {
                let get = |section: &str, key: &str| {
                    config
                        .get(section)
                        .and_then(|s| s.get(key))
                        .and_then(toml::Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                (get("source", "table"), get("sink", "topic"))
            }
            Err(_) => Default::default(),
        };
        Ok(PipelineStatus {
            tenant: definition.tenant,
            name: definition.name,
            state: definition.state,
            error: definition.error,
            module: ModuleView {
                digest: definition.module,
                name: module_name,
            },
            previous_module: definition.previous_module,
            table,
            topic,
            position,
            latest_version: counters.latest_version,
            lag_versions: counters.lag_versions(),
            rows_per_second,
            counters,
            config: redacted(&definition.config),
        })
    }

    /// Swaps a pipeline's module: compiled and checked first (a refusal changes
    /// nothing), then switched at the next batch boundary.
    pub async fn deploy(
        self: &Arc<Service>,
        caller: &Caller,
        tenant: &str,
        name: &str,
        request: Deploy,
    ) -> Result<DeployReport, ServiceError> {
        caller.may_act_for(tenant)?;
        let entry = self.entry(tenant, name)?;
        let mut control = entry.control.lock().await;
        let definition = entry.definition();
        if definition.module == request.module {
            return Err(ServiceError::Conflict(format!(
                "pipeline {name} already runs module {}",
                request.module
            )));
        }
        let config = self.pipeline_config(tenant, name, &definition.config, &request.module)?;
        let started = Instant::now();
        let prepared = {
            let (service, entry, config) = (self.clone(), entry.clone(), config.clone());
            let (tenant, digest) = (tenant.to_string(), request.module.clone());
            let position = position_of(&definition, &entry.metrics.snapshot());
            tokio::task::spawn_blocking(move || {
                let prepared = service.prepare_module(&entry, &config, &digest, &tenant)?;
                if let Some(rows) = request.sample_rows {
                    sample(&config, &prepared.0, position, rows)?;
                }
                Ok::<_, ServiceError>(prepared)
            })
            .await
            .expect("preparing a module does not panic")
        };
        let (module, instance) = prepared.inspect_err(|e| {
            tracing::warn!(tenant, pipeline = name, module = request.module, error = %e, "A module swap was refused; the pipeline keeps its module.");
        })?;
        let prepare_ms = started.elapsed().as_secs_f64() * 1000.0;
        // The new module is recorded first: if the service stops before the switch, the
        // pipeline starts with it.
        entry.update(&self.state, |d| {
            d.previous_module = Some(d.module.clone());
            d.module = request.module.clone();
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
        let running = control.as_ref().filter(|r| !r.task.is_finished());
        if let Some(running) = running {
            let (reply, replied) = oneshot::channel();
            let request = SwapRequest {
                module: Arc::new(module),
                instance: Box::new(instance),
                reply,
            };
            let sent = match running.swaps.try_send(request) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    return Err(ServiceError::Conflict(format!(
                        "pipeline {name} has not yet reached the batch boundary for the previous swap; try again when it has"
                    )));
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            };
            if sent {
                match tokio::time::timeout(SWAP_WAIT, replied).await {
                    Ok(Ok(Ok(done))) => {
                        report.outcome = "switched";
                        report.position = Some(done.position);
                        report.pause_ms = Some(done.pause.as_secs_f64() * 1000.0);
                        report.committed_rows = Some(done.committed_rows);
                    }
                    Ok(Ok(Err(message))) => {
                        return Err(ServiceError::Conflict(format!(
                            "{message}; the pipeline stopped and starts with the new module when resumed"
                        )));
                    }
                    // The pipeline stopped before the boundary: it starts with the new
                    // module when resumed.
                    Ok(Err(_)) => {}
                    Err(_) => {
                        return Err(ServiceError::Conflict(format!(
                            "pipeline {name} did not reach a batch boundary within {SWAP_WAIT:?}; it switches when it does"
                        )));
                    }
                }
            }
        } else if definition.state == PipelineState::Failed {
            // A new module is the usual fix for a failed pipeline: start it.
            self.start(&entry, &mut control)?;
            report.outcome = "started";
        }
        tracing::info!(
            tenant,
            pipeline = name,
            from = report.from,
            to = report.to,
            outcome = report.outcome,
            "A pipeline's module was swapped."
        );
        Ok(report)
    }

    /// Swaps back to the module before the last swap.
    pub async fn rollback(
        self: &Arc<Service>,
        caller: &Caller,
        tenant: &str,
        name: &str,
    ) -> Result<DeployReport, ServiceError> {
        caller.may_act_for(tenant)?;
        let previous = self
            .entry(tenant, name)?
            .definition()
            .previous_module
            .ok_or_else(|| {
                ServiceError::Conflict(format!("pipeline {name} has no previous module"))
            })?;
        self.deploy(
            caller,
            tenant,
            name,
            Deploy {
                module: previous,
                sample_rows: None,
            },
        )
        .await
    }

    /// Stops a pipeline after it commits its work; it stays stopped across restarts.
    pub async fn pause(
        &self,
        caller: &Caller,
        tenant: &str,
        name: &str,
    ) -> Result<PipelineStatus, ServiceError> {
        caller.may_act_for(tenant)?;
        let entry = self.entry(tenant, name)?;
        let mut control = entry.control.lock().await;
        entry.update(&self.state, |d| {
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
        let entry = self.entry(tenant, name)?;
        let mut control = entry.control.lock().await;
        if control.as_ref().is_some_and(|r| !r.task.is_finished()) {
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
        let entry = self.entry(tenant, name)?;
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
    pub fn logs(
        &self,
        caller: &Caller,
        tenant: &str,
        name: &str,
    ) -> Result<(Vec<LogLine>, tokio::sync::broadcast::Receiver<LogLine>), ServiceError> {
        caller.may_act_for(tenant)?;
        Ok(self.entry(tenant, name)?.log.subscribe())
    }

    /// Every pipeline's status, for the operator's metrics.
    pub fn all_statuses(&self, caller: &Caller) -> Result<Vec<PipelineStatus>, ServiceError> {
        if *caller != Caller::Operator {
            return Err(ServiceError::OperatorOnly("read every tenant's metrics"));
        }
        let entries: Vec<Arc<Entry>> = self
            .pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        entries.iter().map(|e| self.status_of(e)).collect()
    }

    /// Takes a sample of each pipeline's rows counter, for its rate.
    pub fn sample_rates(&self) {
        let now = Instant::now();
        for entry in self
            .pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
        {
            let rows = entry.metrics.snapshot().rows_in;
            let mut rates = entry.rates.lock().unwrap_or_else(|e| e.into_inner());
            if rates.len() == RATE_SAMPLES {
                rates.pop_front();
            }
            rates.push_back((now, rows));
        }
    }

    /// Stops every pipeline after it commits its work, keeping their states, so the
    /// next start resumes them.
    pub async fn shutdown(&self) {
        let entries: Vec<Arc<Entry>> = self
            .pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        // All at once: each waits for its own batch boundary and commit.
        let stopping: Vec<_> = entries
            .into_iter()
            .map(|entry| {
                tokio::spawn(async move {
                    let mut control = entry.control.lock().await;
                    stop(control.take()).await;
                })
            })
            .collect();
        for stopped in stopping {
            let _ = stopped.await;
        }
    }
}

/// Where a pipeline is: from its counters while it runs, else where it last stopped.
fn position_of(definition: &PipelineDefinition, counters: &MetricsSnapshot) -> Position {
    let counted = counters.position;
    match definition.stopped_at {
        Some(stopped)
            if definition.state != PipelineState::Running || counted == Position::default() =>
        {
            stopped
        }
        _ => counted,
    }
}

/// Asks a pipeline's task to stop and waits for it.
async fn stop(running: Option<Running>) {
    if let Some(running) = running {
        let _ = running.shutdown.send(true);
        let mut task = running.task;
        if tokio::time::timeout(STOP_WAIT, &mut task).await.is_err() {
            tracing::warn!(
                "A pipeline did not stop within {STOP_WAIT:?}; it was cancelled, and resumes from its last committed position."
            );
            task.abort();
        }
    }
}

/// Runs a module on up to `rows` change rows: the next ones from the pipeline's
/// position, or the table's most recent ones when it has caught up. A batch error or a
/// trap refuses the module (rejected rows do not).
fn sample(
    config: &PipelineConfig,
    module: &TransformModule,
    at: Position,
    rows: usize,
) -> Result<(), ServiceError> {
    let options = SourceOptions {
        batch_rows: rows.max(1),
        storage_options: config.source.storage_options.clone().into_iter().collect(),
    };
    let refuse = |m: String| ServiceError::InvalidModule(format!("on a sample of the table: {m}"));
    let feed =
        ChangeFeed::open(&config.source.table, options).map_err(|e| refuse(e.to_string()))?;
    let latest = feed.latest_version().map_err(|e| refuse(e.to_string()))?;
    let rows_from = |from: u64| -> Result<usize, ServiceError> {
        let mut seen = 0;
        for batch in feed
            .read(Position::at_version(from), latest)
            .map_err(|e| refuse(e.to_string()))?
        {
            seen += batch.map_err(|e| refuse(e.to_string()))?.batch.num_rows();
            if seen >= rows {
                break;
            }
        }
        Ok(seen)
    };
    // Inside a snapshot the next rows are the snapshot's, not the version's changes.
    let from = if at.version <= latest {
        at
    } else {
        let mut version = latest;
        while version > 0 && rows_from(version)? < rows {
            version -= 1;
        }
        Position::at_version(version)
    };
    let mut instance = module
        .instantiate(&config.transform_params())
        .map_err(|e| refuse(e.to_string()))?;
    let mut left = rows;
    let batches: Box<dyn Iterator<Item = _>> = if from.snapshot {
        Box::new(
            feed.read_snapshot(from)
                .map_err(|e| refuse(e.to_string()))?,
        )
    } else {
        Box::new(feed.read(from, latest).map_err(|e| refuse(e.to_string()))?)
    };
    for batch in batches {
        let batch = batch.map_err(|e| refuse(e.to_string()))?.batch;
        let batch = batch.slice(0, batch.num_rows().min(left));
        match instance.transform(&batch) {
            Ok(_) | Err(TransformError::Row { .. }) => {}
            Err(e) => return Err(refuse(e.to_string())),
        }
        left -= batch.num_rows();
        if left == 0 {
            break;
        }
    }
    Ok(())
}

/// The config text with secret Kafka properties replaced.
pub(crate) fn redacted(text: &str) -> String {
    let Ok(mut table) = toml::from_str::<toml::Table>(text) else {
        return String::new();
    };
    if let Some(kafka) = table
        .get_mut("sink")
        .and_then(|s| s.get_mut("kafka"))
        .and_then(toml::Value::as_table_mut)
    {
        for (name, value) in kafka.iter_mut() {
            if sluice_pipeline::is_secret_property(name) {
                *value = "<redacted>".into();
            }
        }
    }
    toml::to_string(&table).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_and_the_rest_kept() {
        let text = r#"
            [sink]
            topic = "t"
            [sink.kafka]
            "bootstrap.servers" = "b:9092"
            "sasl.password" = "hunter2"
            "ssl.key.password" = "k"
            "sasl.oauthbearer.client.secret" = "s"
        "#;
        let shown = redacted(text);
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!shown.contains("\"k\""), "{shown}");
        assert!(!shown.contains("\"s\""), "{shown}");
        assert!(shown.contains("b:9092"), "{shown}");
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

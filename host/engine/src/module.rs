//! The Wasm engine and loaded transform modules.

use std::collections::HashMap;
use std::hash::{Hash as _, Hasher as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sluice_encoding::Format;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::compile::{self, CompileBudget, CompileFailure, CompileWorker, wasmtime_config};
use crate::compile_queue::CompileQueue;
use crate::contract::{self, v0_1, v1};
use crate::error::{CompileLimit, EngineError};
use crate::instance::{ModulePre, TransformInstance};
use crate::limits::{EPOCH_TICK, InstanceLimits};
use crate::log::LogTap;
use crate::shape::ModuleShape;
use crate::state::HostState;

/// How the engine is set up, and the limits of modules loaded without their own.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Limits for [`TransformEngine::load`].
    pub limits: InstanceLimits,
    /// Whether instructions are metered, so modules may have a fuel budget. Every
    /// module of the engine pays the metering cost.
    pub fuel_metering: bool,
    /// Instance slots the pooling allocator reserves, each sized for
    /// `limits.memory_limit_bytes`; 0 allocates on demand (for hosts of many modules).
    pub pooled_instances: u32,
    /// Where compiled modules are cached by content digest; no cache when `None`.
    pub cache_dir: Option<PathBuf>,
    /// The process modules are compiled in, so a runaway compile is killed instead of
    /// taking the host with it; in this process when `None` (trusted modules only).
    /// Defaults to the worker registered with [`crate::isolate_compiles`].
    pub compile_worker: Option<CompileWorker>,
    /// Most compiles running at once (each may use a core and its memory budget).
    pub max_concurrent_compiles: usize,
    /// What a module may declare before it is compiled.
    pub shape_limits: ModuleShape,
    /// Most compiled modules kept for reuse beyond those in use.
    pub max_kept_modules: usize,
}

impl Default for EngineConfig {
    fn default() -> EngineConfig {
        EngineConfig {
            limits: InstanceLimits::default(),
            fuel_metering: false,
            pooled_instances: 16,
            cache_dir: None,
            compile_worker: compile::registered_worker(),
            max_concurrent_compiles: std::thread::available_parallelism().map_or(1, |n| n.get()),
            shape_limits: ModuleShape::LIMITS,
            max_kept_modules: 64,
        }
    }
}

/// A module's compiled code, once compiled; locked while it compiles.
type CompiledSlot = Arc<Mutex<Option<Component>>>;

/// Compiled code by module digest, so many pipelines running one module share it; the
/// least recently used beyond the engine's bound are dropped (modules in use keep
/// their own reference), and a module that failed is never kept.
#[derive(Default)]
struct CompiledModules {
    slots: HashMap<String, (CompiledSlot, u64)>,
    uses: u64,
}

impl CompiledModules {
    fn slot(&mut self, digest: &str, keep: usize) -> CompiledSlot {
        self.uses += 1;
        let uses = self.uses;
        let slot = {
            let entry = self.slots.entry(digest.to_string()).or_default();
            entry.1 = uses;
            entry.0.clone()
        };
        while self.slots.len() > keep.max(1) {
            let oldest = self
                .slots
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(digest, _)| digest.clone());
            match oldest {
                Some(oldest) if oldest != digest => self.slots.remove(&oldest),
                _ => break,
            };
        }
        slot
    }

    fn forget(&mut self, digest: &str) {
        self.slots.remove(digest);
    }
}

/// Stops the epoch thread when the last engine or module using it is dropped.
struct Ticker {
    stop: Arc<AtomicBool>,
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A wasmtime engine configured for transforms, with the thread that advances its
/// epoch so deadlines fire.
///
/// Cloning is cheap: clones share the engine, its compiled code and its ticker.
#[derive(Clone)]
pub struct TransformEngine {
    engine: wasmtime::Engine,
    config: EngineConfig,
    ticker: Arc<Ticker>,
    compiled: Arc<Mutex<CompiledModules>>,
    compiles: Arc<CompileQueue>,
    // Set when the host stops: compiles are killed, waiting ones give up.
    cancelled: Arc<AtomicBool>,
}

impl TransformEngine {
    /// Creates the engine and starts its epoch ticker.
    pub fn new(config: EngineConfig) -> Result<TransformEngine, EngineError> {
        let mut wasm =
            wasmtime_config(config.fuel_metering || config.limits.fuel_per_batch.is_some());
        if config.pooled_instances > 0 {
            wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling(&config)));
        }
        let engine =
            wasmtime::Engine::new(&wasm).map_err(|e| EngineError::Config(format!("{e:#}")))?;
        let ticker_stop = Arc::new(AtomicBool::new(false));
        let (ticking_engine, stop) = (engine.clone(), ticker_stop.clone());
        std::thread::Builder::new()
            .name("sluice-epoch".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    ticking_engine.increment_epoch();
                }
            })
            .map_err(|e| EngineError::Config(format!("cannot start the epoch thread: {e}")))?;
        Ok(TransformEngine {
            engine,
            ticker: Arc::new(Ticker { stop: ticker_stop }),
            compiled: Arc::default(),
            // One compile of an owner at a time: the rest of the host stays for others.
            compiles: Arc::new(CompileQueue::new(config.max_concurrent_compiles, 1)),
            cancelled: Arc::default(),
            config,
        })
    }

    /// Stops every compile: running workers are killed, waiting loads fail. For a host
    /// that is shutting down.
    pub fn cancel_compiles(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    /// Whether instructions are metered, so modules may have a fuel budget.
    fn fuel_metered(&self) -> bool {
        self.config.fuel_metering || self.config.limits.fuel_per_batch.is_some()
    }

    /// Loads, checks and compiles a transform component from a file, with the
    /// engine's default limits; the module is named after the file.
    pub fn load(&self, path: &Path) -> Result<TransformModule, EngineError> {
        let bytes = std::fs::read(path).map_err(|source| EngineError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let name = path.file_stem().map_or_else(
            || path.display().to_string(),
            |s| s.to_string_lossy().into_owned(),
        );
        self.load_bytes("", &name, path, &bytes, self.config.limits.clone())
    }

    /// Checks and compiles a transform component whose instances run under `limits`;
    /// `name` names the module in logs and errors, `path` where it came from. Compiles
    /// of one `owner` (a tenant) wait for each other, never for another owner's.
    pub fn load_bytes(
        &self,
        owner: &str,
        name: &str,
        path: &Path,
        bytes: &[u8],
        limits: InstanceLimits,
    ) -> Result<TransformModule, EngineError> {
        let path_buf = path.to_path_buf();
        if limits.fuel_per_batch.is_some() && !self.fuel_metered() {
            return Err(EngineError::Config(format!(
                "module {name} has a fuel budget, but this engine does not meter fuel; enable fuel metering for the host"
            )));
        }
        if self.config.pooled_instances > 0
            && limits.memory_limit_bytes > self.config.limits.memory_limit_bytes
        {
            return Err(EngineError::Config(format!(
                "module {name} may use {} bytes of memory, more than the engine's pooled slots hold ({})",
                limits.memory_limit_bytes, self.config.limits.memory_limit_bytes
            )));
        }
        match bytes.get(..8) {
            Some([0, b'a', b's', b'm', 1, 0, 0, 0]) => {
                return Err(EngineError::CoreModule { path: path_buf });
            }
            Some([0, b'a', b's', b'm', ..]) => {}
            _ => return Err(EngineError::NotWasm { path: path_buf }),
        }
        let digest = compile::module_digest(bytes);
        let job = CompileJob {
            owner,
            name,
            path: &path_buf,
            bytes,
            digest: &digest,
            budget: &limits.compile,
        };
        let component = self.compile(&job)?;
        let version = check_contract(&self.engine, &component, &path_buf)?;
        check_imports(&self.engine, &component, &path_buf, version)?;
        let mut linker: Linker<HostState> = Linker::new(&self.engine);
        let invalid = |e: wasmtime::Error| EngineError::Invalid {
            path: path_buf.clone(),
            reason: format!("{e:#}"),
        };
        // Interpreted guests import WASI; it links, sealed (see `wasi.rs`).
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(invalid)?;
        crate::wasi::cap_waits(&mut linker).map_err(invalid)?;
        let pre = match version {
            Contract::V1_3 | Contract::V1_2 | Contract::V1_1 | Contract::V1_0 => {
                v1::Transform::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)
                    .map_err(invalid)?;
                let pre = linker.instantiate_pre(&component).map_err(invalid)?;
                ModulePre::V1(v1::TransformPre::new(pre).map_err(invalid)?)
            }
            Contract::V0_1 => {
                let pre = linker.instantiate_pre(&component).map_err(invalid)?;
                ModulePre::V0_1(v0_1::TransformPre::new(pre).map_err(invalid)?)
            }
        };
        Ok(TransformModule {
            name: name.to_string(),
            digest,
            contract: version,
            engine: self.engine.clone(),
            _ticker: self.ticker.clone(),
            limits,
            log_tap: None,
            pre,
        })
    }

    /// Compiles the component, or takes it from the engine's compiled modules or the
    /// cache directory. Cached files are keyed by the module's digest and the engine's
    /// settings, and written only by this code.
    /// One module is compiled once even when several callers ask at the same time
    /// (pipelines of a module starting together): the others wait for it.
    fn compile(&self, job: &CompileJob<'_>) -> Result<Component, EngineError> {
        let slot = self
            .compiled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .slot(job.digest, self.config.max_kept_modules);
        let mut slot = slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(component) = slot.as_ref() {
            return Ok(component.clone());
        }
        match self.compile_or_read_cache(job) {
            Ok(component) => {
                *slot = Some(component.clone());
                Ok(component)
            }
            Err(error) => {
                self.compiled
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .forget(job.digest);
                Err(error)
            }
        }
    }

    /// The cache file of a module, keyed by its digest and the engine's settings.
    fn cache_file(&self, digest: &str) -> Option<PathBuf> {
        let dir = self.config.cache_dir.as_ref()?;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.engine
            .precompile_compatibility_hash()
            .hash(&mut hasher);
        Some(dir.join(format!("{digest}-{:016x}.cwasm", hasher.finish())))
    }

    /// Compiles the component, or reads it from the cache directory.
    fn compile_or_read_cache(&self, job: &CompileJob<'_>) -> Result<Component, EngineError> {
        let cached = self.cache_file(job.digest);
        if let Some(cached) = cached.as_ref().filter(|c| c.exists()) {
            // SAFETY: the file was written below, from `Component::serialize` or a
            // compile worker, for this engine configuration (the name carries its
            // compatibility hash).
            match unsafe { Component::deserialize_file(&self.engine, cached) } {
                Ok(component) => return Ok(component),
                Err(e) => tracing::warn!(
                    path = %cached.display(),
                    error = %e,
                    "A cached compiled module could not be read; compiling it again."
                ),
            }
        }
        let invalid = |reason: String| EngineError::Invalid {
            path: job.path.to_path_buf(),
            reason,
        };
        let shape = ModuleShape::of(job.bytes).map_err(invalid)?;
        if let Some(excess) = shape.excess(&self.config.shape_limits) {
            return Err(EngineError::CompileLimit {
                module: job.name.to_string(),
                limit: CompileLimit::Shape(excess),
            });
        }
        let Some(_slot) = self
            .compiles
            .enter(job.owner, &|| self.cancelled.load(Ordering::Relaxed))
        else {
            return Err(EngineError::CompileCancelled {
                module: job.name.to_string(),
            });
        };
        let started = Instant::now();
        let (component, serialized) = match &self.config.compile_worker {
            Some(worker) => {
                let serialized = self.compile_in_worker(worker, job)?;
                // SAFETY: the bytes were written by our own compile worker, with this
                // engine's code generation settings, into a directory only this
                // process and the worker it started can write.
                let component = unsafe { Component::deserialize(&self.engine, &serialized) }
                    .map_err(|e| invalid(format!("{e:#}")))?;
                (component, Some(serialized))
            }
            None => (
                Component::new(&self.engine, job.bytes).map_err(|e| invalid(format!("{e:#}")))?,
                None,
            ),
        };
        tracing::info!(
            module = job.name,
            digest = job.digest,
            seconds = started.elapsed().as_secs_f64(),
            "A transform module was compiled."
        );
        if let Some(cached) = cached {
            write_cache(&cached, &component, serialized);
        }
        Ok(component)
    }

    /// Compiles in a worker process within the module's budget.
    fn compile_in_worker(
        &self,
        worker: &CompileWorker,
        job: &CompileJob<'_>,
    ) -> Result<Vec<u8>, EngineError> {
        let module = job.name.to_string();
        let result = compile::compile_isolated(
            worker,
            job.bytes,
            job.digest,
            job.budget,
            compile_threads(self.config.max_concurrent_compiles),
            self.fuel_metered(),
            &|| self.cancelled.load(Ordering::Relaxed),
        );
        match result {
            Ok((serialized, usage)) => {
                tracing::debug!(
                    module,
                    seconds = usage.elapsed.as_secs_f64(),
                    peak_mib = usage.peak_bytes / (1024 * 1024),
                    "A compile worker finished."
                );
                Ok(serialized)
            }
            Err(CompileFailure::Invalid(reason)) => Err(EngineError::Invalid {
                path: job.path.to_path_buf(),
                reason,
            }),
            Err(CompileFailure::Memory(peak)) => Err(EngineError::CompileLimit {
                module,
                limit: CompileLimit::Memory {
                    limit_bytes: job.budget.memory_bytes,
                    seen_bytes: peak,
                },
            }),
            Err(CompileFailure::Deadline) => Err(EngineError::CompileLimit {
                module,
                limit: CompileLimit::Deadline {
                    deadline: job.budget.deadline,
                },
            }),
            Err(CompileFailure::Cancelled) => Err(EngineError::CompileCancelled { module }),
            Err(CompileFailure::Busy(waited)) => Err(EngineError::CompileCrashed {
                module,
                detail: format!(
                    "it was not compiled within {:.0} s on the clock, though within its CPU budget: the host is too busy; try again",
                    waited.as_secs_f64()
                ),
            }),
            Err(CompileFailure::Crashed(detail)) => {
                Err(EngineError::CompileCrashed { module, detail })
            }
        }
    }
}

/// The threads one compile may use: the host's cores shared among the compiles that
/// may run at once.
fn compile_threads(max_concurrent_compiles: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores / max_concurrent_compiles.max(1)).max(1)
}

/// One module to compile, and for whom.
struct CompileJob<'a> {
    owner: &'a str,
    name: &'a str,
    path: &'a Path,
    bytes: &'a [u8],
    digest: &'a str,
    budget: &'a CompileBudget,
}

/// Writes a compiled module to the cache; a failure only costs a compile next start.
fn write_cache(cached: &Path, component: &Component, serialized: Option<Vec<u8>>) {
    let serialized = match serialized {
        Some(bytes) => Ok(bytes),
        None => component.serialize().map_err(|e| e.to_string()),
    };
    let written = serialized.and_then(|compiled| {
        if let Some(dir) = cached.parent() {
            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        }
        let partial = cached.with_extension("partial");
        std::fs::write(&partial, compiled).map_err(|e| e.to_string())?;
        std::fs::rename(&partial, cached).map_err(|e| e.to_string())
    });
    if let Err(error) = written {
        tracing::warn!(
            path = %cached.display(),
            %error,
            "Could not cache the compiled module; it will be compiled again next start."
        );
    }
}

/// The pooling allocator's slots, sized from the instance limits. Guests built by
/// interpreters (JavaScript, Python) hold several core instances, memories and large
/// tables, so the per-component counts are generous.
fn pooling(config: &EngineConfig) -> PoolingAllocationConfig {
    let instances = config.pooled_instances;
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(instances)
        .total_core_instances(instances * 16)
        .total_memories(instances * 4)
        .total_tables(instances * 16)
        .max_core_instances_per_component(64)
        .max_memories_per_component(16)
        .max_tables_per_component(64)
        .max_memories_per_module(2)
        .max_tables_per_module(8)
        .table_elements(100_000)
        .max_core_instance_size(16 * 1024 * 1024)
        .max_component_instance_size(16 * 1024 * 1024)
        .max_memory_size(config.limits.memory_limit_bytes);
    pool
}

/// The contract versions a module can be built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contract {
    /// `sluice:transform@1.3.0`: 1.2.0 and `lookup`.
    V1_3,
    /// `sluice:transform@1.2.0`: 1.1.0 and `state`.
    V1_2,
    /// `sluice:transform@1.1.0`: 1.0.0 and `emit-framed`.
    V1_1,
    /// `sluice:transform@1.0.0`.
    V1_0,
    /// `sluice:transform@0.1.0`, the skeleton's.
    V0_1,
}

impl Contract {
    /// The contract's package version.
    pub fn version(self) -> &'static str {
        match self {
            Contract::V1_3 => "1.3.0",
            Contract::V1_2 => "1.2.0",
            Contract::V1_1 => "1.1.0",
            Contract::V1_0 => "1.0.0",
            Contract::V0_1 => "0.1.0",
        }
    }
}

fn check_contract(
    engine: &wasmtime::Engine,
    component: &Component,
    path: &Path,
) -> Result<Contract, EngineError> {
    let component_type = component.component_type();
    let exports: Vec<String> = component_type
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    if exports.iter().any(|name| name == contract::V1_3_EXPORT) {
        return Ok(Contract::V1_3);
    }
    if exports.iter().any(|name| name == contract::V1_2_EXPORT) {
        return Ok(Contract::V1_2);
    }
    if exports.iter().any(|name| name == contract::V1_1_EXPORT) {
        return Ok(Contract::V1_1);
    }
    if exports.iter().any(|name| name == contract::V1_0_EXPORT) {
        return Ok(Contract::V1_0);
    }
    if exports.iter().any(|name| name == contract::V0_1_EXPORT) {
        return Ok(Contract::V0_1);
    }
    match exports
        .iter()
        .find(|name| name.starts_with(contract::TRANSFORMER_PREFIX))
    {
        Some(found) => Err(EngineError::UnsupportedContract {
            path: path.to_path_buf(),
            found: found.clone(),
            supported: crate::SUPPORTED_CONTRACTS.join(", "),
        }),
        None => Err(EngineError::NotATransform {
            path: path.to_path_buf(),
            exports: exports.join(", "),
        }),
    }
}

/// Refuses a module that imports anything but the contract's own interfaces and WASI
/// (which links to a context that grants nothing).
fn check_imports(
    engine: &wasmtime::Engine,
    component: &Component,
    path: &Path,
    version: Contract,
) -> Result<(), EngineError> {
    let allowed = |name: &str| {
        name.starts_with("wasi:")
            || name
                .strip_prefix("sluice:transform/")
                .and_then(|rest| rest.split_once('@'))
                .is_some_and(|(_, v)| v == version.version())
    };
    let component_type = component.component_type();
    let forbidden = component_type
        .imports(engine)
        .map(|(name, _)| name.to_string())
        .find(|name| !allowed(name));
    match forbidden {
        Some(import) => Err(EngineError::ForbiddenImport {
            path: path.to_path_buf(),
            import,
        }),
        None => Ok(()),
    }
}

/// A compiled transform module, ready to instantiate.
pub struct TransformModule {
    name: String,
    digest: String,
    contract: Contract,
    engine: wasmtime::Engine,
    // Deadlines fire only while the engine's epoch thread runs.
    _ticker: Arc<Ticker>,
    limits: InstanceLimits,
    log_tap: Option<LogTap>,
    pre: ModulePre,
}

impl TransformModule {
    /// The module's name (its file stem).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// SHA-256 of the module's bytes, in hex: which code made a record.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The contract version the module was built for.
    pub fn contract(&self) -> Contract {
        self.contract
    }

    /// The limits its instances run under.
    pub fn limits(&self) -> &InstanceLimits {
        &self.limits
    }

    /// Sends the module's log messages to `tap` as well as to the host's log.
    pub fn with_log_tap(mut self, tap: LogTap) -> TransformModule {
        self.log_tap = Some(tap);
        self
    }

    /// Starts a fresh instance and calls its `init` with `params`; its helpers write
    /// records in `format`.
    pub fn instantiate(
        &self,
        params: &[(String, String)],
        format: Arc<Format>,
    ) -> Result<TransformInstance, EngineError> {
        TransformInstance::start(
            &self.engine,
            &self.limits,
            self.log_tap.clone(),
            &self.pre,
            &self.name,
            params,
            format,
        )
    }
}

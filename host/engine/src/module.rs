//! The Wasm engine and loaded transform modules.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sha2::Digest as _;
use wasmtime::component::{Component, Linker};

use crate::contract::{self, v0_1};
use crate::error::EngineError;
use crate::instance::{HostState, TransformInstance};

/// How often the engine's epoch advances; deadlines are counted in these ticks.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Limits every transform instance runs under.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Most linear memory one instance may grow to, in bytes.
    pub memory_limit_bytes: usize,
    /// Longest one `init` or `transform` call may run before it is interrupted.
    pub batch_deadline: Duration,
}

impl Default for EngineConfig {
    fn default() -> EngineConfig {
        EngineConfig {
            memory_limit_bytes: 256 * 1024 * 1024,
            batch_deadline: Duration::from_secs(10),
        }
    }
}

/// A wasmtime engine configured for transforms, with the thread that advances its
/// epoch so deadlines fire.
pub struct TransformEngine {
    engine: wasmtime::Engine,
    config: EngineConfig,
    ticker_stop: Arc<AtomicBool>,
}

impl TransformEngine {
    /// Creates the engine and starts its epoch ticker.
    pub fn new(config: EngineConfig) -> Result<TransformEngine, EngineError> {
        let mut wasm = wasmtime::Config::new();
        wasm.wasm_component_model(true).epoch_interruption(true);
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
            config,
            ticker_stop,
        })
    }

    /// Loads, checks and compiles a transform component from a file.
    pub fn load(&self, path: &Path) -> Result<TransformModule, EngineError> {
        let bytes = std::fs::read(path).map_err(|source| EngineError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        self.load_bytes(path, &bytes)
    }

    /// Checks and compiles a transform component; `path` names it in messages.
    fn load_bytes(&self, path: &Path, bytes: &[u8]) -> Result<TransformModule, EngineError> {
        let path_buf = path.to_path_buf();
        match bytes.get(..8) {
            Some([0, b'a', b's', b'm', 1, 0, 0, 0]) => {
                return Err(EngineError::CoreModule { path: path_buf });
            }
            Some([0, b'a', b's', b'm', ..]) => {}
            _ => return Err(EngineError::NotWasm { path: path_buf }),
        }
        let component = Component::new(&self.engine, bytes).map_err(|e| EngineError::Invalid {
            path: path_buf.clone(),
            reason: format!("{e:#}"),
        })?;
        check_contract(&self.engine, &component, &path_buf)?;
        let linker: Linker<HostState> = Linker::new(&self.engine);
        let pre = linker.instantiate_pre(&component).map_err(|e| {
            let component_type = component.component_type();
            let import = component_type
                .imports(&self.engine)
                .next()
                .map_or_else(|| format!("{e:#}"), |(name, _)| name.to_string());
            EngineError::ForbiddenImport {
                path: path_buf.clone(),
                import,
            }
        })?;
        let pre = v0_1::TransformPre::new(pre).map_err(|e| EngineError::Invalid {
            path: path_buf.clone(),
            reason: format!("{e:#}"),
        })?;
        let digest = sha2::Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let name = path.file_stem().map_or_else(
            || path.display().to_string(),
            |s| s.to_string_lossy().into_owned(),
        );
        Ok(TransformModule {
            name,
            digest,
            engine: self.engine.clone(),
            config: self.config.clone(),
            pre,
        })
    }
}

impl Drop for TransformEngine {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

fn check_contract(
    engine: &wasmtime::Engine,
    component: &Component,
    path: &Path,
) -> Result<(), EngineError> {
    let component_type = component.component_type();
    let exports: Vec<String> = component_type
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    if exports.iter().any(|name| name == contract::V0_1_EXPORT) {
        return Ok(());
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

/// A compiled transform module, ready to instantiate.
pub struct TransformModule {
    name: String,
    digest: String,
    engine: wasmtime::Engine,
    config: EngineConfig,
    pre: v0_1::TransformPre<HostState>,
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

    /// Starts a fresh instance and calls its `init` with `params`.
    pub fn instantiate(
        &self,
        params: &[(String, String)],
    ) -> Result<TransformInstance, EngineError> {
        TransformInstance::start(&self.engine, &self.config, &self.pre, &self.name, params)
    }
}

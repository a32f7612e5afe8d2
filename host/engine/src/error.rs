//! Errors of loading and running transform modules.

use std::path::PathBuf;

use crate::shape::ShapeExcess;

/// Why a module could not be loaded or started.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The Wasm engine could not be configured.
    #[error("Cannot configure the Wasm engine: {0}")]
    Config(String),
    /// The module file could not be read.
    #[error("Cannot read transform module {path}: {source}. Check the [transform] module path.")]
    Read {
        /// The module's path.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The file is not WebAssembly at all.
    #[error(
        "Transform module {path} is not a WebAssembly file. Build a transform with `sluice build`."
    )]
    NotWasm {
        /// The module's path.
        path: PathBuf,
    },
    /// The file is a core module, not a component.
    #[error(
        "Transform module {path} is a core WebAssembly module, not a component. Build it with `sluice build`, which wraps it into a component."
    )]
    CoreModule {
        /// The module's path.
        path: PathBuf,
    },
    /// wasmtime refused the component.
    #[error("Transform module {path} is not a valid component: {reason}")]
    Invalid {
        /// The module's path.
        path: PathBuf,
        /// wasmtime's explanation.
        reason: String,
    },
    /// The module targets a contract version this host does not run.
    #[error(
        "Transform module {path} was built for contract {found}, which this host does not support; it supports {supported}. Rebuild the module with a matching SDK."
    )]
    UnsupportedContract {
        /// The module's path.
        path: PathBuf,
        /// The contract the module exports.
        found: String,
        /// The contracts this host runs.
        supported: String,
    },
    /// The component exports no transformer.
    #[error(
        "Transform module {path} is a component but not a Sluice transform: it exports [{exports}] and no sluice:transform/transformer. Build it with a Sluice SDK."
    )]
    NotATransform {
        /// The module's path.
        path: PathBuf,
        /// What it exports instead.
        exports: String,
    },
    /// The module asks for something the sandbox does not grant.
    #[error(
        "Transform module {path} imports `{import}`, which the host does not provide: transforms get the sluice:transform contract and a WASI without files, network, environment or clocks, nothing else. Build it with a Sluice SDK."
    )]
    ForbiddenImport {
        /// The module's path.
        path: PathBuf,
        /// The first import the host does not provide.
        import: String,
    },
    /// Compiling the module passed one of its budgets; nothing of it was kept.
    #[error(
        "Transform module {module} was refused: {limit}. Build a smaller module (or, for the host's operator, raise the limit)."
    )]
    CompileLimit {
        /// The module's name.
        module: String,
        /// Which budget, and by how much.
        limit: CompileLimit,
    },
    /// The compile worker ended without an answer (it is killed past its budgets,
    /// which are reported as [`EngineError::CompileLimit`]).
    #[error("Transform module {module} could not be compiled: {detail}")]
    CompileCrashed {
        /// The module's name.
        module: String,
        /// How the worker ended.
        detail: String,
    },
    /// The host began shutting down while the module waited or compiled.
    #[error("Transform module {module} was not compiled: the host is shutting down.")]
    CompileCancelled {
        /// The module's name.
        module: String,
    },
    /// Instantiation failed (for example the memory cap is below the module's minimum).
    #[error("Cannot start transform module {module}: {reason}")]
    Instantiate {
        /// The module's name.
        module: String,
        /// wasmtime's explanation.
        reason: String,
    },
    /// The module's `init` refused the parameters.
    #[error("Transform module {module} refused its parameters: {message}")]
    Init {
        /// The module's name.
        module: String,
        /// The module's message.
        message: String,
    },
    /// The module trapped in `init`.
    #[error("Transform module {module} crashed in init ({kind}): {message}")]
    InitTrap {
        /// The module's name.
        module: String,
        /// What kind of trap.
        kind: TrapKind,
        /// wasmtime's explanation.
        message: String,
    },
}

/// Which budget a module's compile passed.
#[derive(Debug)]
pub enum CompileLimit {
    /// The module declares more of something than the host compiles.
    Shape(ShapeExcess),
    /// The compile needed more memory than its budget.
    Memory {
        /// The budget, in bytes.
        limit_bytes: usize,
        /// The most the compile was seen using, in bytes.
        seen_bytes: usize,
    },
    /// The compile used more CPU time than its deadline.
    Deadline {
        /// The deadline.
        deadline: std::time::Duration,
    },
}

impl std::fmt::Display for CompileLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |bytes: usize| bytes / (1024 * 1024);
        match self {
            CompileLimit::Shape(excess) => write!(
                f,
                "it has {} {}, more than the {} this host compiles",
                excess.found, excess.what, excess.limit
            ),
            CompileLimit::Memory {
                limit_bytes,
                seen_bytes,
            } => write!(
                f,
                "compiling it needed more than its compile memory limit of {} MiB (max_compile_mib; at least {} MiB seen) and was stopped",
                mib(*limit_bytes),
                mib(*seen_bytes)
            ),
            CompileLimit::Deadline { deadline } => write!(
                f,
                "compiling it took more than its compile deadline of {} s (max_compile_seconds) of CPU time and was stopped",
                deadline.as_secs_f64()
            ),
        }
    }
}

/// What kind of trap stopped a module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrapKind {
    /// The call ran past the batch deadline.
    Deadline,
    /// The module grew its memory past the cap.
    Memory,
    /// The module used up its fuel budget for the batch.
    Fuel,
    /// The module made the host spend more on its behalf than its budgets allow
    /// (results past its memory cap, output past its output cap, arguments that
    /// multiply work past their bounds).
    HostLimit,
    /// The module's state would grow past the pipeline's `[state]` limits.
    StateLimit,
    /// The module panicked or hit `unreachable`.
    Panic,
    /// Any other trap.
    Other,
}

impl std::fmt::Display for TrapKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TrapKind::Deadline => "deadline exceeded",
            TrapKind::Memory => "memory limit exceeded",
            TrapKind::Fuel => "fuel budget exhausted",
            TrapKind::HostLimit => "host limit exceeded",
            TrapKind::StateLimit => "state limit exceeded",
            TrapKind::Panic => "panic",
            TrapKind::Other => "trap",
        })
    }
}

/// Why a batch could not be transformed.
#[derive(Debug, thiserror::Error)]
pub enum TransformError {
    /// The module trapped; its instance is unusable.
    #[error("Transform module {module} crashed ({kind}): {message}")]
    Trap {
        /// The module's name.
        module: String,
        /// What kind of trap.
        kind: TrapKind,
        /// wasmtime's explanation.
        message: String,
    },
    /// The module reported that one row failed.
    #[error("Transform module {module} failed on batch row {row}: {message}")]
    Row {
        /// The module's name.
        module: String,
        /// The row's index within the batch.
        row: u32,
        /// The module's message.
        message: String,
    },
    /// The module reported that the batch failed.
    #[error("Transform module {module} failed on a batch: {message}")]
    Batch {
        /// The module's name.
        module: String,
        /// The module's message.
        message: String,
    },
    /// The module returned something the contract forbids.
    #[error("Transform module {module} returned invalid output: {message}")]
    BadOutput {
        /// The module's name.
        module: String,
        /// What was wrong.
        message: String,
    },
    /// The module could not use state (the pipeline keeps none, the store failed):
    /// the pipeline stops instead of failing rows for it.
    #[error("Transform module {module} could not use state: {message}")]
    State {
        /// The module's name.
        module: String,
        /// What failed.
        message: String,
    },
    /// A lookup table could not be read during the batch (its store failed): the
    /// pipeline stops instead of failing rows for it.
    #[error("Transform module {module} could not look up rows: {message}")]
    Lookup {
        /// The module's name.
        module: String,
        /// What failed.
        message: String,
    },
    /// The batch has a column the contract cannot carry.
    #[error("Cannot pass the batch to transform module {module}: {message}")]
    Input {
        /// The module's name.
        module: String,
        /// What was wrong.
        message: String,
    },
}

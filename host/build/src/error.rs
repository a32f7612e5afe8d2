//! Why a transform could not be built.

use std::path::PathBuf;

use crate::Language;

/// Why a transform could not be built. Messages say what to do.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// No language's files were found.
    #[error(
        "{dir} is not a transform project: it has no Cargo.toml (Rust), package.json (JavaScript or TypeScript), app.py (Python), go.mod (Go) or .c files (C). Create one with `sluice init --lang <language> <dir>`."
    )]
    UnknownProject {
        /// The directory.
        dir: PathBuf,
    },
    /// The project's manifest could not be read or says too little.
    #[error("Cannot use {path} as the transform's manifest: {reason}")]
    Manifest {
        /// The manifest's path.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A source file cannot make a transform as written.
    #[error("Cannot build {path} into a transform: {reason}.")]
    Source {
        /// The file.
        path: PathBuf,
        /// What is wrong and what to do.
        reason: String,
    },
    /// A toolchain program is missing and cannot be installed here.
    #[error("Building {language} transforms needs {tool}, which cannot be run: {reason}. {hint}")]
    ToolMissing {
        /// The language being built.
        language: Language,
        /// The program.
        tool: String,
        /// What went wrong.
        reason: String,
        /// How to get it.
        hint: String,
    },
    /// A toolchain step failed; its output was shown on stderr.
    #[error(
        "{tool} failed to build {module} ({language}, {status}); its messages are above.{hint}"
    )]
    Compile {
        /// The module being built.
        module: String,
        /// Its language.
        language: Language,
        /// The program that failed.
        tool: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// What might be wrong, with a leading space, or empty.
        hint: String,
    },
    /// The contract's bindings could not be generated.
    #[error("Cannot generate the contract's {language} bindings: {reason}")]
    Bindings {
        /// The language.
        language: Language,
        /// Why.
        reason: String,
    },
    /// A file could not be read or written.
    #[error("Cannot access {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The module built but is not a transform (no contract types, wrong exports).
    #[error("{module} ({language}) built, but is not a Sluice transform: {reason}.")]
    NotATransform {
        /// The module's name.
        module: String,
        /// Its language.
        language: Language,
        /// Why.
        reason: String,
    },
}

impl BuildError {
    /// Adds what might be wrong to a toolchain step's failure (other errors as they are).
    pub(crate) fn with_hint(self, hint: &str) -> BuildError {
        match self {
            BuildError::Compile {
                module,
                language,
                tool,
                status,
                ..
            } => BuildError::Compile {
                module,
                language,
                tool,
                status,
                hint: format!(" {hint}"),
            },
            other => other,
        }
    }
}

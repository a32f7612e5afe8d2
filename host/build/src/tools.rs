//! Runs toolchain programs, and installs the pinned ones Sluice manages into its tools
//! directory on first use.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{BuildError, Language};

/// Runs `command`, its output shown on the terminal; a failure names `tool`.
pub(crate) fn run(
    command: &mut Command,
    tool: &str,
    module: &str,
    language: Language,
    hint: &str,
) -> Result<(), BuildError> {
    let status = command.status().map_err(|e| BuildError::ToolMissing {
        language,
        tool: tool.to_string(),
        reason: e.to_string(),
        hint: hint.to_string(),
    })?;
    if status.success() {
        Ok(())
    } else {
        Err(BuildError::Compile {
            module: module.to_string(),
            language,
            tool: tool.to_string(),
            status,
            hint: String::new(),
        })
    }
}

/// Whether `program --version` runs and prints `version`.
pub(crate) fn has_version(program: &Path, version: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains(version))
}

/// Installs a pinned toolchain into `dir` with `install` unless `marker` exists, so a
/// half-finished install is redone. Concurrent builds wait for one install (a file
/// lock beside `dir`). Tells the user, since it takes a while.
pub(crate) fn install_once(
    dir: &Path,
    marker: &Path,
    what: &str,
    language: Language,
    install: impl FnOnce(&Path) -> Result<(), BuildError>,
) -> Result<(), BuildError> {
    if marker.exists() {
        return Ok(());
    }
    let lock_path = dir.with_extension("lock");
    if let Some(parent) = lock_path.parent() {
        std::fs::create_dir_all(parent).map_err(|source| io(parent, source))?;
    }
    let lock = std::fs::File::create(&lock_path).map_err(|source| io(&lock_path, source))?;
    lock.lock().map_err(|source| io(&lock_path, source))?;
    if marker.exists() {
        return Ok(());
    }
    eprintln!(
        "Installing {what} into {} (once; set SLUICE_TOOLS_DIR to put it elsewhere).",
        dir.display()
    );
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|source| io(dir, source))?;
    }
    std::fs::create_dir_all(dir).map_err(|source| io(dir, source))?;
    install(dir)?;
    if !marker.exists() {
        return Err(BuildError::ToolMissing {
            language,
            tool: what.to_string(),
            reason: format!("its install did not produce {}", marker.display()),
            hint: format!("Remove {} and try again.", dir.display()),
        });
    }
    Ok(())
}

/// Writes `contents` to `path`, making its folder first.
pub(crate) fn write_file(path: &Path, contents: impl AsRef<[u8]>) -> Result<(), BuildError> {
    path.parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(path, contents))
        .map_err(|source| io(path, source))
}

pub(crate) fn io(path: &Path, source: std::io::Error) -> BuildError {
    BuildError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// An absolute form of `path` (relative to the current directory).
pub(crate) fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

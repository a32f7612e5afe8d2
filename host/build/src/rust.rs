//! Builds a Rust transform crate into a Wasm component.
//!
//! The crate is compiled for `wasm32-unknown-unknown`, so the module imports nothing
//! (no files, clocks, network or environment), then wrapped into a component from the
//! WIT type information that the SDK embeds.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tools::{io, run};
use crate::{BuildError, BuildOptions, Language};

/// The Rust target transforms compile for.
pub const GUEST_TARGET: &str = "wasm32-unknown-unknown";

/// Builds the transform crate in `crate_dir` and returns the component's path.
pub(crate) fn build(crate_dir: &Path, options: &BuildOptions) -> Result<PathBuf, BuildError> {
    let manifest = crate_dir.join("Cargo.toml");
    let package = package_name(&manifest)?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .args([
            "build",
            "--release",
            "--quiet",
            "--lib",
            "--target",
            GUEST_TARGET,
        ])
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&options.target_dir)
        // Modules ship without debug info: a workspace's release profile may ask for
        // line tables, which make a module ten times larger and the host never reads.
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_STRIP", "debuginfo");
    run(
        &mut command,
        "cargo",
        &package,
        Language::Rust,
        "Install Rust with rustup.",
    )
    .map_err(|e| {
        e.with_hint(&format!(
            "If the target is missing, run `rustup target add {GUEST_TARGET}`."
        ))
    })?;
    let module_path = options
        .target_dir
        .join(GUEST_TARGET)
        .join("release")
        .join(format!("{}.wasm", package.replace('-', "_")));
    let module = std::fs::read(&module_path).map_err(|source| io(&module_path, source))?;
    let component = crate::componentize(&module).map_err(|reason| BuildError::NotATransform {
        module: package.clone(),
        language: Language::Rust,
        reason: format!("{reason}. Does it call sluice_transform::export!?"),
    })?;
    crate::write_component(&package, Language::Rust, &component, options)
}

fn package_name(manifest: &Path) -> Result<String, BuildError> {
    let text = std::fs::read_to_string(manifest).map_err(|source| io(manifest, source))?;
    let bad = |reason: String| BuildError::Manifest {
        path: manifest.to_path_buf(),
        reason,
    };
    let doc: toml::Table = text.parse().map_err(|e| bad(format!("{e}")))?;
    doc.get("package")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str())
        .map(str::to_string)
        .ok_or_else(|| bad("it has no [package] name".to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_without_package_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Cargo.toml"), "[workspace]\n").unwrap();
        let err = package_name(&dir.path().join("Cargo.toml")).unwrap_err();
        assert!(matches!(err, BuildError::Manifest { .. }), "{err}");
    }
}

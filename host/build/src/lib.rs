//! Builds a Rust transform crate into a Wasm component.
//!
//! The crate is compiled for `wasm32-unknown-unknown`, so the module imports nothing
//! (no files, clocks, network or environment), then wrapped into a component from the
//! WIT type information that the SDK embeds. The result runs in the Sluice host.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Rust target transforms compile for.
pub const GUEST_TARGET: &str = "wasm32-unknown-unknown";

/// Why a transform could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The crate's manifest could not be read.
    #[error("Cannot read the transform's manifest {path}: {source}")]
    Manifest {
        /// The manifest's path.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The manifest is not a Cargo package.
    #[error("{path} is not a Cargo package manifest: {reason}")]
    NotAPackage {
        /// The manifest's path.
        path: PathBuf,
        /// What is missing.
        reason: String,
    },
    /// cargo could not be started.
    #[error("Cannot run cargo: {0}. Install Rust with rustup.")]
    CargoMissing(std::io::Error),
    /// cargo failed; its output was shown on stderr.
    #[error(
        "cargo failed to build {package} for {GUEST_TARGET} ({status}). If the target is missing, run `rustup target add {GUEST_TARGET}`."
    )]
    Compile {
        /// The package name.
        package: String,
        /// cargo's exit status.
        status: std::process::ExitStatus,
    },
    /// The compiled module could not be read or the component could not be written.
    #[error("Cannot access {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The module is not a transform (no embedded contract types, bad exports).
    #[error(
        "{package} built, but is not a Sluice transform: {reason}. Does it call sluice_transform::export_transform!?"
    )]
    Componentize {
        /// The package name.
        package: String,
        /// wit-component's explanation.
        reason: String,
    },
}

/// Where and how to build.
#[derive(Clone, Debug)]
pub struct BuildOptions {
    /// cargo's target directory for guest builds.
    pub target_dir: PathBuf,
    /// Where to write the component (`<package>.wasm` inside it).
    pub out_dir: PathBuf,
}

/// Builds the transform crate in `crate_dir` and returns the component's path.
pub fn build_rust_transform(
    crate_dir: &Path,
    options: &BuildOptions,
) -> Result<PathBuf, BuildError> {
    let manifest = crate_dir.join("Cargo.toml");
    let package = package_name(&manifest)?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
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
        .env("CARGO_PROFILE_RELEASE_STRIP", "debuginfo")
        .status()
        .map_err(BuildError::CargoMissing)?;
    if !status.success() {
        return Err(BuildError::Compile { package, status });
    }
    let module_path = options
        .target_dir
        .join(GUEST_TARGET)
        .join("release")
        .join(format!("{}.wasm", package.replace('-', "_")));
    let module = std::fs::read(&module_path).map_err(|source| BuildError::Io {
        path: module_path.clone(),
        source,
    })?;
    let component = componentize(&module).map_err(|reason| BuildError::Componentize {
        package: package.clone(),
        reason,
    })?;
    let out = options.out_dir.join(format!("{package}.wasm"));
    std::fs::create_dir_all(&options.out_dir)
        .and_then(|()| std::fs::write(&out, component))
        .map_err(|source| BuildError::Io {
            path: out.clone(),
            source,
        })?;
    Ok(out)
}

/// The interface every transform exports, whatever its contract version.
const TRANSFORMER_INTERFACE: &str = "sluice:transform/transformer@";

/// Wraps a core module that embeds the SDK's component type section into a component,
/// and checks that the component exports a transformer.
pub fn componentize(module: &[u8]) -> Result<Vec<u8>, String> {
    let component = wit_component::ComponentEncoder::default()
        .module(module)
        .and_then(|encoder| encoder.validate(true).encode())
        .map_err(|e| format!("{e:#}"))?;
    let decoded = wit_component::decode(&component).map_err(|e| format!("{e:#}"))?;
    let (resolve, world) = (decoded.resolve(), decoded.package());
    let exports: Vec<String> = resolve.packages[world]
        .worlds
        .values()
        .flat_map(|&w| {
            resolve.worlds[w]
                .exports
                .keys()
                .map(|key| resolve.name_world_key(key))
        })
        .collect();
    if exports
        .iter()
        .any(|name| name.starts_with(TRANSFORMER_INTERFACE))
    {
        Ok(component)
    } else {
        Err(format!(
            "it exports [{}] and no sluice:transform/transformer",
            exports.join(", ")
        ))
    }
}

fn package_name(manifest: &Path) -> Result<String, BuildError> {
    let text = std::fs::read_to_string(manifest).map_err(|source| BuildError::Manifest {
        path: manifest.to_path_buf(),
        source,
    })?;
    let not_a_package = |reason: String| BuildError::NotAPackage {
        path: manifest.to_path_buf(),
        reason,
    };
    let doc: toml::Table = text.parse().map_err(|e| not_a_package(format!("{e}")))?;
    doc.get("package")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str())
        .map(str::to_string)
        .ok_or_else(|| not_a_package("it has no [package] name".to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_core_module_without_contract_types_is_refused() {
        let empty_module = b"\0asm\x01\0\0\0";
        let err = componentize(empty_module).unwrap_err();
        assert!(!err.is_empty());
    }

    #[test]
    fn a_manifest_without_package_is_refused() {
        let dir = std::env::temp_dir().join(format!("sluice-build-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("Cargo.toml"), "[workspace]\n").unwrap();
        let err = package_name(&dir.join("Cargo.toml")).unwrap_err();
        assert!(matches!(err, BuildError::NotAPackage { .. }), "{err}");
    }
}

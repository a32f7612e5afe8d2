//! Builds a C transform: generates the contract's C bindings (wit-bindgen's C
//! generator, built in), compiles the project's `.c` files with the SDK for
//! `wasm32-wasi` with clang and wasi-libc, then wraps the module into a component.
//! libc's few WASI calls go through the preview 1 adapter, which the host seals.

use std::path::{Path, PathBuf};
use std::process::Command;

use wit_bindgen_core::Files;

use crate::tools::{absolute, io, run, write_file};
use crate::{BuildError, BuildOptions, Language};

/// Compilers tried, in order: Debian's versioned clang first, whose wasm32 runtime
/// and wasi-libc `scripts/setup.sh` installs.
const COMPILERS: [&str; 2] = ["clang-14", "clang"];

const INSTALL_HINT: &str = "Install clang, lld, wasi-libc and the wasm32 compiler runtime (Debian: clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32; scripts/setup.sh does it).";

/// The project's C sources: its `.c` files and those under `src/`.
pub(crate) fn sources(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for folder in [dir.to_path_buf(), dir.join("src")] {
        if !folder.is_dir() {
            continue;
        }
        for entry in std::fs::read_dir(&folder)? {
            let path = entry?.path();
            if path.extension().is_some_and(|x| x == "c") {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

pub(crate) fn build(dir: &Path, options: &BuildOptions) -> Result<PathBuf, BuildError> {
    let dir = absolute(dir);
    let name = crate::dir_name(&dir);
    let work = absolute(&options.target_dir.join("sluice-c").join(&name));
    let bindings = work.join("bindings");
    write_bindings(&bindings)?;
    let sdk = absolute(&options.sdk_dir.join("c"));
    let compiler = COMPILERS
        .iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok())
        .ok_or_else(|| BuildError::ToolMissing {
            language: Language::C,
            tool: "clang".to_string(),
            reason: "neither clang-14 nor clang is on PATH".to_string(),
            hint: INSTALL_HINT.to_string(),
        })?;
    let core = work.join(format!("{name}.core.wasm"));
    let mut command = Command::new(compiler);
    command
        .args([
            "--target=wasm32-wasi",
            "-O2",
            "-mexec-model=reactor",
            "-Wall",
        ])
        .args(["-Wl,--strip-debug", "-Wl,--export=cabi_realloc"])
        .arg("-I")
        .arg(&bindings)
        .arg("-I")
        .arg(sdk.join("include"))
        .args(sources(&dir).map_err(|source| io(&dir, source))?)
        .args(sources(&sdk.join("src")).map_err(|source| io(&sdk, source))?)
        .arg(bindings.join("transform.c"))
        .arg(bindings.join("transform_component_type.o"))
        .arg("-o")
        .arg(&core);
    run(&mut command, compiler, &name, Language::C, INSTALL_HINT).map_err(|e| {
        e.with_hint(&format!(
            "If it cannot find wasi-libc or the wasm32 runtime: {INSTALL_HINT}"
        ))
    })?;
    let module = std::fs::read(&core).map_err(|source| io(&core, source))?;
    let component = crate::componentize(&module).map_err(|reason| BuildError::NotATransform {
        module: name.clone(),
        language: Language::C,
        reason,
    })?;
    crate::write_component(&name, Language::C, &component, options)
}

/// Writes the contract's C bindings (`transform.h`, `transform.c` and the object file
/// carrying its component types) into `dir`.
pub fn write_bindings(dir: &Path) -> Result<(), BuildError> {
    let failed = |reason: String| BuildError::Bindings {
        language: Language::C,
        reason,
    };
    let (mut resolve, world) = crate::contract(crate::CONTRACT_WIT).map_err(failed)?;
    let mut files = Files::default();
    // The host's batch is lent to each call; the bindings hand the loan back when
    // the call returns, so transforms never drop it themselves.
    wit_bindgen_c::Opts {
        autodrop_borrows: wit_bindgen_c::Enabled::Yes,
        ..Default::default()
    }
    .build()
    .generate(&mut resolve, world, &mut files)
    .map_err(|e| failed(format!("{e:#}")))?;
    for (name, contents) in files.iter() {
        write_file(&dir.join(name), contents)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_are_generated_from_the_contract() {
        let dir = tempfile::tempdir().unwrap();
        write_bindings(dir.path()).unwrap();
        let header = std::fs::read_to_string(dir.path().join("transform.h")).unwrap();
        assert!(
            header.contains("exports_sluice_transform_transformer_transform"),
            "{header}"
        );
        assert!(dir.path().join("transform_component_type.o").is_file());
    }
}

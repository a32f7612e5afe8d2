//! Builds a Go transform: generates the contract's Go bindings (wit-bindgen's Go
//! generator, built in), writes them with Go's component runtime package and the
//! adapter between them and the SDK (`go/exports.go`) into a module that imports the
//! project's package, compiles it with the machine's Go for `wasip1` as a reactor, and
//! wraps the module into a component with the contract's types. The Go runtime's few
//! WASI calls go through the preview 1 adapter, which the host seals.

use std::path::{Path, PathBuf};
use std::process::Command;

use wit_bindgen_core::Files;

use crate::tools::{absolute, io, run, write_file};
use crate::{BuildError, BuildOptions, Language};

include!(concat!(env!("OUT_DIR"), "/go_runtime.rs"));

/// The SDK module's path, as transforms import it.
const SDK_MODULE: &str = "sluice.dev/sluice";

/// The runtime package's module path, as the generated bindings import it.
const RUNTIME_MODULE: &str = "go.bytecodealliance.org/pkg";

/// The module the bindings are generated into.
const BINDINGS_MODULE: &str = "wit_component";

/// The oldest Go that builds transforms: `go:wasmexport` and wasip1 reactors (1.24),
/// and what the runtime package uses.
const MIN_MINOR: u32 = 25;

const INSTALL_HINT: &str =
    "Install Go 1.25 or later and put `go` on PATH (scripts/setup.sh checks it).";

/// The lines of a `go.mod` without their comments.
fn manifest_lines(dir: &Path) -> Result<Vec<String>, BuildError> {
    let manifest = dir.join("go.mod");
    let text = std::fs::read_to_string(&manifest).map_err(|source| io(&manifest, source))?;
    Ok(text
        .lines()
        .map(|l| l.split("//").next().unwrap_or("").trim().to_string())
        .collect())
}

/// The module path a project's `go.mod` declares.
fn module_path(dir: &Path) -> Result<String, BuildError> {
    manifest_lines(dir)?
        .iter()
        .find_map(|line| line.strip_prefix("module "))
        .map(|path| path.trim().trim_matches('"').to_string())
        .filter(|path| !path.is_empty())
        .ok_or(BuildError::Manifest {
            path: dir.join("go.mod"),
            reason: "it has no `module` line".to_string(),
        })
}

/// The version a `require` of `module` must name: its major version when the path
/// ends in one (`/v2`, gopkg.in's `.v2`), as Go insists, else v0.
fn required_version(module: &str) -> String {
    let last = module.rsplit('/').next().unwrap_or(module);
    let major = match module.starts_with("gopkg.in/") {
        true => last.rsplit_once(".v").map(|(_, major)| major),
        false => last.strip_prefix('v'),
    };
    match major.and_then(|m| m.parse::<u32>().ok()) {
        Some(major) if major >= 2 || module.starts_with("gopkg.in/") => format!("v{major}.0.0"),
        _ => "v0.0.0".to_string(),
    }
}

/// A path as a quoted Go string, as `go.mod` accepts it.
fn quoted(path: &Path) -> String {
    format!("{:?}", path.display().to_string())
}

/// The project's `replace` directives with local paths made absolute, so the build's
/// module sees the same dependencies the project does.
fn replacements(dir: &Path) -> Result<Vec<String>, BuildError> {
    let mut found = Vec::new();
    let mut in_block = false;
    for line in manifest_lines(dir)? {
        let directive = match (in_block, line.as_str()) {
            (false, "replace (") => {
                in_block = true;
                continue;
            }
            (true, ")") => {
                in_block = false;
                continue;
            }
            (true, directive) => directive,
            (false, line) => match line.strip_prefix("replace ") {
                Some(directive) => directive,
                None => continue,
            },
        };
        let Some((from, to)) = directive.split_once("=>") else {
            continue;
        };
        let from = from.trim();
        let to = to.trim();
        // The build supplies the SDK itself, from the checkout it was built with.
        if from.split_whitespace().next() == Some(SDK_MODULE) {
            continue;
        }
        let target = to.trim_matches('"');
        let local = [".", ".."].contains(&target)
            || ["./", "../", ".\\", "..\\"]
                .iter()
                .any(|prefix| target.starts_with(prefix));
        let to = match local {
            true => quoted(&absolute(&dir.join(target))),
            false => to.to_string(),
        };
        found.push(format!("replace {from} => {to}"));
    }
    Ok(found)
}

/// Refuses a project whose package is `main`: the build imports the project's package
/// into a main package of its own.
fn check_package(dir: &Path) -> Result<(), BuildError> {
    let entries = std::fs::read_dir(dir).map_err(|source| io(dir, source))?;
    for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if !name.ends_with(".go") || name.ends_with("_test.go") {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|source| io(&path, source))?;
        let package = text
            .lines()
            .find_map(|line| line.trim().strip_prefix("package "))
            .map(|p| p.split("//").next().unwrap_or("").trim().to_string());
        if package.as_deref() == Some("main") {
            return Err(BuildError::Source {
                path,
                reason: "its package is `main`, and a transform is an importable package whose `init` function registers it (`sluice.OnBatch`); name the package after the module (`package wondeals`) and drop `func main`".to_string(),
            });
        }
    }
    Ok(())
}

/// The machine's Go, checked to be new enough.
fn go_toolchain() -> Result<(), BuildError> {
    let missing = |reason: String| BuildError::ToolMissing {
        language: Language::Go,
        tool: "go".to_string(),
        reason,
        hint: INSTALL_HINT.to_string(),
    };
    let output = Command::new("go")
        .args(["env", "GOVERSION"])
        .env("GOTOOLCHAIN", "local")
        .output()
        .map_err(|e| missing(e.to_string()))?;
    let version = String::from_utf8_lossy(&output.stdout).trim().to_string();
    let minor = version
        .strip_prefix("go1.")
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|minor| minor.parse::<u32>().ok());
    match minor {
        Some(minor) if minor >= MIN_MINOR => Ok(()),
        _ => Err(missing(format!(
            "it is `{version}`, and transforms need Go 1.{MIN_MINOR} or later"
        ))),
    }
}

pub(crate) fn build(dir: &Path, options: &BuildOptions) -> Result<PathBuf, BuildError> {
    let dir = absolute(dir);
    let name = crate::dir_name(&dir);
    let package = module_path(&dir)?;
    check_package(&dir)?;
    go_toolchain()?;
    let work = absolute(&options.target_dir.join("sluice-go").join(&name));
    if work.exists() {
        std::fs::remove_dir_all(&work).map_err(|source| io(&work, source))?;
    }
    write_bindings(&work, crate::CONTRACT_WIT)?;
    let sdk = absolute(&options.sdk_dir.join("go"));
    let mut manifest = format!(
        "module {BINDINGS_MODULE}\n\ngo 1.{MIN_MINOR}\n\nrequire (\n\t{RUNTIME_MODULE} v0.4.0\n\t{SDK_MODULE} v0.0.0\n\t{package:?} {}\n)\n\nreplace {RUNTIME_MODULE} => ./runtime\n\nreplace {SDK_MODULE} => {}\n\nreplace {package:?} => {}\n",
        required_version(&package),
        quoted(&sdk),
        quoted(&dir)
    );
    for replacement in replacements(&dir)? {
        manifest.push('\n');
        manifest.push_str(&replacement);
        manifest.push('\n');
    }
    write_file(&work.join("go.mod"), manifest)?;
    let sums = dir.join("go.sum");
    if sums.is_file() {
        std::fs::copy(&sums, work.join("go.sum")).map_err(|source| io(&sums, source))?;
    }
    // The generated main package exports the contract; this file links the project's
    // package in, whose init functions register the transform.
    write_file(
        &work.join("transform_package.go"),
        format!("package main\n\nimport _ \"{package}\"\n"),
    )?;
    let core = work.join(format!("{name}.core.wasm"));
    let mut command = Command::new("go");
    command
        .args(["build", "-mod=mod", "-buildmode=c-shared", "-trimpath"])
        // The generated bindings pin their exports with go:linkname into the runtime.
        .arg("-ldflags=-checklinkname=0")
        .arg("-o")
        .arg(&core)
        .arg(".")
        .current_dir(&work)
        .env("GOOS", "wasip1")
        .env("GOARCH", "wasm")
        .env("CGO_ENABLED", "0")
        .env("GOWORK", "off")
        .env("GOTOOLCHAIN", "local");
    run(&mut command, "go build", &name, Language::Go, INSTALL_HINT)?;
    let module = std::fs::read(&core).map_err(|source| io(&core, source))?;
    let component = embed_contract(module)
        .and_then(|module| crate::componentize(&module))
        .map_err(|reason| BuildError::NotATransform {
            module: name.clone(),
            language: Language::Go,
            reason,
        })?;
    crate::write_component(&name, Language::Go, &component, options)
}

/// Adds the contract's component types to a core module built by Go, which cannot
/// embed them itself.
fn embed_contract(mut module: Vec<u8>) -> Result<Vec<u8>, String> {
    let (resolve, world) = crate::contract(crate::CONTRACT_WIT)?;
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
    )
    .map_err(|e| format!("{e:#}"))?;
    Ok(module)
}

/// Writes the contract's Go bindings for `wit`, the runtime package (`runtime/`) and
/// the adapter to the SDK into `dir`.
fn write_bindings(dir: &Path, wit: &str) -> Result<(), BuildError> {
    let failed = |reason: String| BuildError::Bindings {
        language: Language::Go,
        reason,
    };
    let (mut resolve, world) = crate::contract(wit).map_err(failed)?;
    if let Some(function) = resolve
        .worlds
        .iter()
        .flat_map(|(_, w)| w.imports.values().chain(w.exports.values()))
        .filter_map(|item| match item {
            wit_parser::WorldItem::Interface { id, .. } => Some(*id),
            _ => None,
        })
        .flat_map(|id| resolve.interfaces[id].functions.values())
        .find(|f| f.kind.is_async())
    {
        return Err(failed(format!(
            "`{}` is async, and Go builds async component functions only with a patched Go; this Sluice supports synchronous contracts in Go",
            function.name
        )));
    }
    let mut files = Files::default();
    wit_bindgen_go::Opts {
        format: wit_bindgen_go::Format::False,
        ..Default::default()
    }
    .build()
    .generate(&mut resolve, world, &mut files)
    .map_err(|e| failed(format!("{e:#}")))?;
    for (name, contents) in files.iter() {
        // The build writes the module's go.mod itself.
        if name != "go.mod" {
            write_file(&dir.join(name), contents)?;
        }
    }
    for (path, contents) in GO_RUNTIME {
        let contents = if *path == "go.mod" {
            // The package asks for a Go that is not released yet and needs nothing
            // newer than the oldest Go that builds transforms.
            runtime_manifest(contents)
        } else {
            contents.to_vec()
        };
        write_file(&dir.join("runtime").join(path), contents)?;
    }
    write_file(
        &dir.join("export_sluice_transform_transformer/exports.go"),
        include_str!("go/exports.go"),
    )
}

/// The runtime package's `go.mod` with its `go` line set to the oldest Go that builds
/// transforms.
fn runtime_manifest(contents: &[u8]) -> Vec<u8> {
    String::from_utf8_lossy(contents)
        .lines()
        .map(|line| match line.starts_with("go ") {
            true => format!("go 1.{MIN_MINOR}"),
            false => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_runtime_and_adapter_are_written_together() {
        let dir = tempfile::tempdir().unwrap();
        write_bindings(dir.path(), crate::CONTRACT_WIT).unwrap();
        let exports = std::fs::read_to_string(dir.path().join("wit_exports.go")).unwrap();
        assert!(
            exports.contains("export_sluice_transform_transformer.Transform("),
            "{exports}"
        );
        let runtime = std::fs::read_to_string(dir.path().join("runtime/go.mod")).unwrap();
        assert!(
            runtime.contains(RUNTIME_MODULE) && runtime.contains("\ngo 1.25"),
            "{runtime}"
        );
        assert!(dir.path().join("runtime/wit/runtime/runtime.go").is_file());
        assert!(
            dir.path()
                .join("export_sluice_transform_transformer/exports.go")
                .is_file()
        );
    }

    #[test]
    fn a_required_module_names_its_major_version() {
        assert_eq!(required_version("won-deals"), "v0.0.0");
        assert_eq!(required_version("example.com/deals/v2"), "v2.0.0");
        assert_eq!(required_version("example.com/v1"), "v0.0.0");
        assert_eq!(required_version("gopkg.in/deals.v1"), "v1.0.0");
    }

    #[test]
    fn a_main_package_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("main_test.go"), "package main\n").unwrap();
        std::fs::write(dir.path().join("deals.go"), "// Deals.\npackage deals\n").unwrap();
        check_package(dir.path()).unwrap();
        std::fs::write(dir.path().join("main.go"), "package main // a program\n").unwrap();
        let err = check_package(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("its package is `main`") && err.contains("sluice.OnBatch"),
            "{err}"
        );
    }

    #[test]
    fn an_async_contract_is_refused_with_why() {
        let wit = "package sluice:transform@9.0.0;\ninterface transformer { transform: async func(); }\nworld transform { export transformer; }\n";
        let dir = tempfile::tempdir().unwrap();
        let err = write_bindings(dir.path(), wit).unwrap_err().to_string();
        assert!(
            err.contains("`transform` is async") && err.contains("patched Go"),
            "{err}"
        );
    }

    #[test]
    fn a_projects_module_path_and_replacements_are_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("go.mod"),
            "module won-deals\n\ngo 1.25\n\nreplace sluice.dev/sluice => ../sluice/guest-sdk/go\n\nreplace (\n\texample.com/lib => ./lib // a local fork\n\texample.com/other v1.2.0 => example.com/fork v1.2.1\n)\nreplace example.com/up => \"..\"\n",
        )
        .unwrap();
        assert_eq!(module_path(dir.path()).unwrap(), "won-deals");
        let lib = quoted(&absolute(&dir.path().join("./lib")));
        let parent = quoted(&absolute(&dir.path().join("..")));
        assert_eq!(
            replacements(dir.path()).unwrap(),
            [
                format!("replace example.com/lib => {lib}"),
                "replace example.com/other v1.2.0 => example.com/fork v1.2.1".to_string(),
                format!("replace example.com/up => {parent}"),
            ]
        );
        std::fs::write(
            dir.path().join("go.mod"),
            "module won-deals/v3 // the third\n",
        )
        .unwrap();
        assert_eq!(module_path(dir.path()).unwrap(), "won-deals/v3");
        std::fs::write(dir.path().join("go.mod"), "go 1.25\n").unwrap();
        let err = module_path(dir.path()).unwrap_err().to_string();
        assert!(err.contains("no `module` line"), "{err}");
    }
}

//! Builds transforms into Wasm components the Sluice host runs, and scaffolds new
//! ones, so authors never need the component toolchains' flags.
//!
//! The language is told by the project's files: `Cargo.toml` (Rust), `package.json`
//! (JavaScript or TypeScript), `app.py` (Python), `go.mod` (Go), `*.c` (C). Each builder compiles
//! against the contract in `wit/` (built into this crate) and the language's SDK,
//! installs the pinned toolchain it needs on first use, and checks that the result
//! exports a transformer.

mod c;
mod error;
mod go;
mod javascript;
mod python;
mod rust;
mod scaffold;
mod tools;

use std::fmt;
use std::path::{Path, PathBuf};

pub use error::BuildError;
pub use rust::GUEST_TARGET;
pub use scaffold::{ScaffoldError, scaffold};

/// The contract every transform is built against (`wit/transform.wit`).
pub const CONTRACT_WIT: &str = include_str!("../../../wit/transform.wit");

/// The contract's world.
pub const CONTRACT_WORLD: &str = "transform";

/// A language transforms can be written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    /// Rust, with `guest-sdk/rust/transform`.
    Rust,
    /// JavaScript, with `guest-sdk/js`.
    JavaScript,
    /// TypeScript, with `guest-sdk/js` (built like JavaScript).
    TypeScript,
    /// Python, with `guest-sdk/python`.
    Python,
    /// C, with `guest-sdk/c`.
    C,
    /// Go, with `guest-sdk/go`.
    Go,
}

impl Language {
    /// Every language, in the order `sluice init --help` lists them.
    pub const ALL: [Language; 6] = [
        Language::Rust,
        Language::JavaScript,
        Language::TypeScript,
        Language::Python,
        Language::C,
        Language::Go,
    ];

    /// The language's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::JavaScript => "js",
            Language::TypeScript => "ts",
            Language::Python => "python",
            Language::C => "c",
            Language::Go => "go",
        }
    }

    /// The language called `name` (`javascript`, `typescript`, `py` and `golang`
    /// accepted too).
    pub fn parse(name: &str) -> Option<Language> {
        match name.to_ascii_lowercase().as_str() {
            "rust" | "rs" => Some(Language::Rust),
            "js" | "javascript" => Some(Language::JavaScript),
            "ts" | "typescript" => Some(Language::TypeScript),
            "python" | "py" => Some(Language::Python),
            "c" => Some(Language::C),
            "go" | "golang" => Some(Language::Go),
            _ => None,
        }
    }

    /// The language of the project in `dir`, told by its files.
    pub fn detect(dir: &Path) -> Result<Language, BuildError> {
        if dir.join("Cargo.toml").is_file() {
            return Ok(Language::Rust);
        }
        if dir.join("package.json").is_file() {
            return Ok(
                if javascript::entry(dir).is_ok_and(|e| e.extension().is_some_and(|x| x == "ts")) {
                    Language::TypeScript
                } else {
                    Language::JavaScript
                },
            );
        }
        if dir.join(python::APP).is_file() {
            return Ok(Language::Python);
        }
        if dir.join("go.mod").is_file() {
            return Ok(Language::Go);
        }
        if !c::sources(dir).unwrap_or_default().is_empty() {
            return Ok(Language::C);
        }
        Err(BuildError::UnknownProject {
            dir: dir.to_path_buf(),
        })
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where and how to build.
#[derive(Clone, Debug)]
pub struct BuildOptions {
    /// Where intermediate files go (cargo's target directory for Rust).
    pub target_dir: PathBuf,
    /// Where to write the component (`<name>.wasm` inside it).
    pub out_dir: PathBuf,
    /// The guest SDKs (`guest-sdk` of a Sluice checkout).
    pub sdk_dir: PathBuf,
    /// Where pinned toolchains (componentize-js, componentize-py) are installed.
    pub tools_dir: PathBuf,
}

impl BuildOptions {
    /// Options with the default SDK and tools directories.
    pub fn new(target_dir: PathBuf, out_dir: PathBuf) -> BuildOptions {
        BuildOptions {
            target_dir,
            out_dir,
            sdk_dir: default_sdk_dir(),
            tools_dir: default_tools_dir(),
        }
    }
}

/// Where the project in `dir` keeps its intermediate files unless told otherwise: for a
/// Rust project cargo's `CARGO_TARGET_DIR` when it is set, as cargo itself would (the
/// SDK's dependencies then build once for every project), else `<dir>/target`.
pub fn default_target_dir(dir: &Path) -> PathBuf {
    target_dir_for(dir, std::env::var_os("CARGO_TARGET_DIR"))
}

fn target_dir_for(dir: &Path, cargo_target_dir: Option<std::ffi::OsString>) -> PathBuf {
    match cargo_target_dir {
        Some(shared)
            if !shared.is_empty() && Language::detect(dir).ok() == Some(Language::Rust) =>
        {
            PathBuf::from(shared)
        }
        _ => dir.join("target"),
    }
}

/// `SLUICE_SDK_DIR`; else the SDKs installed beside the running `sluice`
/// (`<prefix>/share/sluice/guest-sdk` for `<prefix>/bin/sluice`, as the release archive
/// lays them out); else the `guest-sdk` of the checkout this tool was built from.
pub fn default_sdk_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SLUICE_SDK_DIR") {
        return PathBuf::from(dir);
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| installed_sdk_dir(&exe))
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guest-sdk"))
}

/// The SDKs of an installed `sluice` at `exe`, when they are there.
fn installed_sdk_dir(exe: &Path) -> Option<PathBuf> {
    let prefix = exe.parent()?.parent()?;
    let dir = prefix.join("share/sluice/guest-sdk");
    dir.is_dir().then_some(dir)
}

/// `SLUICE_TOOLS_DIR`, or `sluice/tools` in the user's cache directory.
pub fn default_tools_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SLUICE_TOOLS_DIR") {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    cache.join("sluice").join("tools")
}

/// A built transform.
#[derive(Clone, Debug)]
pub struct Built {
    /// The component's path.
    pub component: PathBuf,
    /// The language it was written in.
    pub language: Language,
}

/// Builds the transform project in `dir`, whatever its language.
pub fn build_transform(dir: &Path, options: &BuildOptions) -> Result<Built, BuildError> {
    let language = Language::detect(dir)?;
    let component = match language {
        Language::Rust => rust::build(dir, options),
        Language::JavaScript | Language::TypeScript => javascript::build(dir, language, options),
        Language::Python => python::build(dir, options),
        Language::C => c::build(dir, options),
        Language::Go => go::build(dir, options),
    }?;
    Ok(Built {
        component,
        language,
    })
}

/// The contract's world, parsed from `wit` (the built-in contract but in tests).
fn contract(wit: &str) -> Result<(wit_parser::Resolve, wit_parser::WorldId), String> {
    let mut resolve = wit_parser::Resolve::new();
    let package = resolve
        .push_str("transform.wit", wit)
        .map_err(|e| format!("{e:#}"))?;
    let world = resolve
        .select_world(&[package], Some(CONTRACT_WORLD))
        .map_err(|e| format!("{e:#}"))?;
    Ok((resolve, world))
}

/// Writes the contract's WIT into `dir` (made if missing) and returns the file.
fn write_contract(dir: &Path) -> Result<PathBuf, BuildError> {
    let path = dir.join("transform.wit");
    tools::write_file(&path, CONTRACT_WIT)?;
    Ok(path)
}

/// A project's module name: the directory's name.
fn dir_name(dir: &Path) -> String {
    std::fs::canonicalize(dir)
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "transform".to_string())
}

/// Writes `component` to `<out_dir>/<name>.wasm` after checking it is a transform.
fn write_component(
    name: &str,
    language: Language,
    component: &[u8],
    options: &BuildOptions,
) -> Result<PathBuf, BuildError> {
    check_exports(component).map_err(|reason| BuildError::NotATransform {
        module: name.to_string(),
        language,
        reason,
    })?;
    let out = options.out_dir.join(format!("{name}.wasm"));
    tools::write_file(&out, component)?;
    Ok(out)
}

/// The interface every transform exports, whatever its contract version.
const TRANSFORMER_INTERFACE: &str = "sluice:transform/transformer@";

/// Checks that a component exports a transformer.
fn check_exports(component: &[u8]) -> Result<(), String> {
    let decoded = wit_component::decode(component).map_err(|e| format!("{e:#}"))?;
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
        Ok(())
    } else {
        Err(format!(
            "it exports [{}] and no sluice:transform/transformer",
            exports.join(", ")
        ))
    }
}

/// Wraps a core module that embeds the contract's component type section into a
/// component; WASI preview 1 imports (C's libc, Go's runtime) go through the preview 2 adapter,
/// which the host seals.
fn componentize(module: &[u8]) -> Result<Vec<u8>, String> {
    wit_component::ComponentEncoder::default()
        .module(module)
        .and_then(|encoder| {
            encoder.adapter(
                "wasi_snapshot_preview1",
                wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
            )
        })
        .and_then(|encoder| encoder.validate(true).encode())
        .map_err(|e| format!("{e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_core_module_without_contract_types_is_refused() {
        let empty_module = b"\0asm\x01\0\0\0";
        let err = componentize(empty_module)
            .and_then(|c| check_exports(&c))
            .unwrap_err();
        assert!(!err.is_empty());
    }

    #[test]
    fn languages_are_told_by_their_files() {
        let dir = tempfile::tempdir().unwrap();
        let err = Language::detect(dir.path()).unwrap_err();
        assert!(err.to_string().contains("sluice init"), "{err}");
        std::fs::write(dir.path().join("app.py"), "").unwrap();
        assert_eq!(Language::detect(dir.path()).unwrap(), Language::Python);
        std::fs::write(dir.path().join("package.json"), "{}").unwrap();
        assert_eq!(Language::detect(dir.path()).unwrap(), Language::JavaScript);
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/index.ts"), "").unwrap();
        assert_eq!(Language::detect(dir.path()).unwrap(), Language::TypeScript);
    }

    #[test]
    fn an_installed_sluice_finds_the_sdks_beside_it() {
        let prefix = tempfile::tempdir().unwrap();
        let exe = prefix.path().join("bin/sluice");
        assert_eq!(installed_sdk_dir(&exe), None, "no SDKs installed yet");
        std::fs::create_dir_all(prefix.path().join("share/sluice/guest-sdk")).unwrap();
        assert_eq!(
            installed_sdk_dir(&exe),
            Some(prefix.path().join("share/sluice/guest-sdk"))
        );
    }

    #[test]
    fn only_rust_projects_build_in_cargos_target_dir() {
        let shared = Some(std::ffi::OsString::from("/cache/target"));
        let rust = tempfile::tempdir().unwrap();
        std::fs::write(rust.path().join("Cargo.toml"), "").unwrap();
        assert_eq!(
            target_dir_for(rust.path(), shared.clone()),
            Path::new("/cache/target")
        );
        assert_eq!(
            target_dir_for(rust.path(), None),
            rust.path().join("target")
        );
        assert_eq!(
            target_dir_for(rust.path(), Some("".into())),
            rust.path().join("target")
        );
        let python = tempfile::tempdir().unwrap();
        std::fs::write(python.path().join("app.py"), "").unwrap();
        assert_eq!(
            target_dir_for(python.path(), shared),
            python.path().join("target")
        );
    }

    #[test]
    fn language_names_round_trip() {
        for language in Language::ALL {
            assert_eq!(Language::parse(language.name()), Some(language));
        }
        assert_eq!(Language::parse("golang"), Some(Language::Go));
        assert_eq!(Language::parse("zig"), None);
    }
}

//! Builds a JavaScript or TypeScript transform: bundles it with its imports (the SDK
//! included) into one ES module with rolldown, then makes a component of it with
//! componentize-js (SpiderMonkey in Wasm). Both are pinned and installed into the
//! tools directory with npm on first use.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tools::{absolute, install_once, io, run, write_file};
use crate::{BuildError, BuildOptions, Language};

/// The componentize-js release transforms are built with.
pub const COMPONENTIZE_JS_VERSION: &str = "0.23.0";
/// The rolldown release that bundles them.
pub const ROLLDOWN_VERSION: &str = "1.3.3";

/// Entry files tried, in order, when `package.json` names no `main`.
const ENTRIES: [&str; 4] = ["src/index.ts", "src/index.js", "index.ts", "index.js"];

/// The project's entry module: `package.json`'s `main`, or a conventional file.
pub(crate) fn entry(dir: &Path) -> Result<PathBuf, BuildError> {
    let manifest = dir.join("package.json");
    let package = read_package(&manifest)?;
    if let Some(main) = package.get("main").and_then(|m| m.as_str()) {
        return Ok(dir.join(main));
    }
    ENTRIES
        .iter()
        .map(|e| dir.join(e))
        .find(|p| p.is_file())
        .ok_or_else(|| BuildError::Manifest {
            path: manifest,
            reason: format!(
                "it names no `main` and none of {} exists",
                ENTRIES.join(", ")
            ),
        })
}

fn read_package(manifest: &Path) -> Result<serde_json::Value, BuildError> {
    let text = std::fs::read_to_string(manifest).map_err(|source| io(manifest, source))?;
    serde_json::from_str(&text).map_err(|e| BuildError::Manifest {
        path: manifest.to_path_buf(),
        reason: e.to_string(),
    })
}

/// The module's name: `package.json`'s `name` without its scope, else the directory's.
fn module_name(dir: &Path) -> Result<String, BuildError> {
    let package = read_package(&dir.join("package.json"))?;
    Ok(match package.get("name").and_then(|n| n.as_str()) {
        Some(name) => name.rsplit('/').next().unwrap_or(name).to_string(),
        None => crate::dir_name(dir),
    })
}

/// Builds the project in `dir`; `language` (JavaScript or TypeScript, as
/// `Language::detect` told) names it in messages.
pub(crate) fn build(
    dir: &Path,
    language: Language,
    options: &BuildOptions,
) -> Result<PathBuf, BuildError> {
    let dir = absolute(dir);
    let entry = absolute(&entry(&dir)?);
    let name = module_name(&dir)?;
    let tools = install_tools(&options.tools_dir)?;
    let work = absolute(&options.target_dir.join("sluice-js").join(&name));
    let contract = crate::write_contract(&work)?;

    let bundle = work.join("bundle.js");
    let config = work.join("rolldown.config.mjs");
    write_file(
        &config,
        rolldown_config(&dir, &entry, &bundle, &options.sdk_dir),
    )?;
    run(
        Command::new(tools.join("node_modules/.bin/rolldown"))
            .arg("--config")
            .arg(&config)
            .current_dir(&dir)
            .stdout(std::process::Stdio::null()),
        "rolldown",
        &name,
        language,
        "Install Node.js and npm.",
    )?;

    let component = work.join(format!("{name}.wasm"));
    run(
        Command::new(tools.join("node_modules/.bin/componentize-js"))
            .arg(&bundle)
            .arg("--wit")
            .arg(&contract)
            .args(["--world-name", crate::CONTRACT_WORLD])
            // The host offers no HTTP; leaving these out keeps the module's imports to
            // what the host seals (stdio, clocks, random).
            .args(["--disable", "http", "fetch-event"])
            .arg("--out")
            .arg(&component)
            .current_dir(&work),
        "componentize-js",
        &name,
        language,
        "Install Node.js and npm.",
    )?;
    let bytes = std::fs::read(&component).map_err(|source| io(&component, source))?;
    crate::write_component(&name, language, &bytes, options)
}

/// rolldown's config: one ES module, the contract's imports left to the component,
/// `@sluice/transform` from the SDK unless the project installed its own.
fn rolldown_config(dir: &Path, entry: &Path, bundle: &Path, sdk_dir: &Path) -> String {
    let installed = dir.join("node_modules/@sluice/transform").exists();
    let alias = if installed {
        String::new()
    } else {
        let sdk = absolute(&sdk_dir.join("js/src/index.js"));
        format!(
            "resolve: {{ alias: {{ '@sluice/transform': {} }} }},",
            serde_json::Value::from(sdk.to_string_lossy())
        )
    };
    format!(
        "export default {{\n  input: {input},\n  external: [/^sluice:/],\n  platform: 'neutral',\n  {alias}\n  output: {{ file: {file}, format: 'esm', codeSplitting: false }},\n}};\n",
        input = serde_json::Value::from(entry.to_string_lossy()),
        file = serde_json::Value::from(bundle.to_string_lossy()),
    )
}

/// The pinned componentize-js and rolldown, installed with npm on first use.
fn install_tools(tools_dir: &Path) -> Result<PathBuf, BuildError> {
    let dir = tools_dir.join(format!(
        "js-componentize-{COMPONENTIZE_JS_VERSION}-rolldown-{ROLLDOWN_VERSION}"
    ));
    let marker = dir.join("node_modules/.bin/componentize-js");
    install_once(
        &dir,
        &marker,
        "componentize-js and rolldown",
        Language::JavaScript,
        |dir| {
            std::fs::write(dir.join("package.json"), "{\"private\": true}\n")
                .map_err(|source| io(dir, source))?;
            run(
                Command::new("npm")
                    .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
                    .arg(format!(
                        "@bytecodealliance/componentize-js@{COMPONENTIZE_JS_VERSION}"
                    ))
                    .arg(format!("rolldown@{ROLLDOWN_VERSION}"))
                    .current_dir(dir),
                "npm",
                "the JavaScript toolchain",
                Language::JavaScript,
                "Install Node.js 20 or newer with npm.",
            )
        },
    )?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_is_main_or_a_conventional_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("package.json"),
            r#"{"name": "@acme/deals"}"#,
        )
        .unwrap();
        let err = entry(dir.path()).unwrap_err();
        assert!(err.to_string().contains("src/index.ts"), "{err}");
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/index.js"), "").unwrap();
        assert_eq!(entry(dir.path()).unwrap(), dir.path().join("src/index.js"));
        assert_eq!(module_name(dir.path()).unwrap(), "deals");
        std::fs::write(dir.path().join("package.json"), r#"{"main": "lib/t.js"}"#).unwrap();
        assert_eq!(entry(dir.path()).unwrap(), dir.path().join("lib/t.js"));
    }

    #[test]
    fn the_sdk_is_aliased_unless_installed() {
        let dir = tempfile::tempdir().unwrap();
        let config = rolldown_config(
            dir.path(),
            Path::new("/p/src/index.ts"),
            Path::new("/w/bundle.js"),
            Path::new("/sdk"),
        );
        assert!(
            config.contains("'@sluice/transform': \"/sdk/js/src/index.js\""),
            "{config}"
        );
        assert!(config.contains("external: [/^sluice:/]"), "{config}");
    }
}

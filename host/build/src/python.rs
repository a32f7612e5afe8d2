//! Builds a Python transform (`app.py`, with the SDK and any modules beside it) into
//! a component with componentize-py, which bundles CPython compiled to Wasm. Uses
//! the pinned componentize-py from `PATH`, or installs it into a virtual environment
//! in the tools directory on first use.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tools::{absolute, has_version, install_once, io, run};
use crate::{BuildError, BuildOptions, Language};

/// The componentize-py release transforms are built with.
pub const COMPONENTIZE_PY_VERSION: &str = "0.25.1";

/// The module the build starts from; it must define `Transformer`.
pub(crate) const APP: &str = "app.py";

pub(crate) fn build(dir: &Path, options: &BuildOptions) -> Result<PathBuf, BuildError> {
    let dir = absolute(dir);
    let name = crate::dir_name(&dir);
    let componentize_py = componentize_py(&options.tools_dir)?;
    let work = absolute(&options.target_dir.join("sluice-python").join(&name));
    let contract = crate::write_contract(&work)?;
    let component = work.join(format!("{name}.wasm"));
    run(
        Command::new(componentize_py)
            .arg("--wit-path")
            .arg(&contract)
            .args(["--world", crate::CONTRACT_WORLD, "componentize", "app"])
            .arg("--python-path")
            .arg(&dir)
            .arg("--python-path")
            .arg(absolute(&options.sdk_dir.join("python")))
            .arg("--output")
            .arg(&component)
            .stdout(std::process::Stdio::null()),
        "componentize-py",
        &name,
        Language::Python,
        "Install Python 3 with pip and venv.",
    )
    .map_err(|e| e.with_hint("Check that app.py imports cleanly and assigns `Transformer = sluice_transform.export(YourTransform)`."))?;
    let bytes = std::fs::read(&component).map_err(|source| io(&component, source))?;
    crate::write_component(&name, Language::Python, &bytes, options)
}

/// componentize-py at the pinned version: from `PATH`, else from the tools directory.
fn componentize_py(tools_dir: &Path) -> Result<PathBuf, BuildError> {
    let on_path = PathBuf::from("componentize-py");
    if has_version(&on_path, COMPONENTIZE_PY_VERSION) {
        return Ok(on_path);
    }
    let dir = tools_dir.join(format!("componentize-py-{COMPONENTIZE_PY_VERSION}"));
    let program = dir.join("bin/componentize-py");
    install_once(&dir, &program, "componentize-py", Language::Python, |dir| {
        run(
            Command::new("python3").args(["-m", "venv"]).arg(dir),
            "python3 -m venv",
            "the Python toolchain",
            Language::Python,
            "Install Python 3 with venv (Debian: python3-venv).",
        )?;
        run(
            Command::new(dir.join("bin/pip"))
                .args(["install", "--quiet", "--disable-pip-version-check"])
                .arg(format!("componentize-py=={COMPONENTIZE_PY_VERSION}")),
            "pip",
            "the Python toolchain",
            Language::Python,
            "Install Python 3 with pip.",
        )
    })?;
    Ok(program)
}

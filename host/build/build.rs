//! Builds Go's component runtime package (`go.bytecodealliance.org/pkg`, which the
//! bindings `wit-bindgen-go` generates import) into the crate. It ships inside the
//! pinned `wit-bindgen-go` crate's sources, not on the Go module proxy, so the build
//! finds that crate through `cargo metadata` and embeds the package's files.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The crate whose sources hold the runtime package, under `src/pkg`.
const GENERATOR: &str = "wit-bindgen-go";

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // Only the packages built for this target: others' sources may not be downloaded.
    let target = std::env::var("TARGET").unwrap();
    let metadata = |offline: bool| {
        let mut command = Command::new(&cargo);
        command
            .args(["metadata", "--format-version", "1", "--filter-platform"])
            .arg(&target)
            .arg("--manifest-path")
            .arg(manifest_dir.join("Cargo.toml"));
        if offline {
            command.arg("--offline");
        }
        command.output().expect("cargo metadata runs")
    };
    // Offline first; a build of some packages only (`cargo build -p sluice`) may not
    // have downloaded the workspace's other dependencies, which metadata lists.
    let mut output = metadata(true);
    if !output.status.success() {
        output = metadata(false);
    }
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let manifest = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == GENERATOR)
        .and_then(|p| p["manifest_path"].as_str())
        .unwrap_or_else(|| panic!("{GENERATOR} is a dependency"));
    let pkg = Path::new(manifest).parent().unwrap().join("src/pkg");

    let mut files = vec![pkg.join("go.mod"), pkg.join("LICENSE")];
    collect(&pkg.join("wit"), &mut files);
    files.sort();
    let mut source =
        String::from("/// Go's component runtime package: path within it, contents.\n");
    source.push_str("pub(crate) const GO_RUNTIME: &[(&str, &[u8])] = &[\n");
    for file in &files {
        println!("cargo::rerun-if-changed={}", file.display());
        let relative = file.strip_prefix(&pkg).unwrap().to_string_lossy();
        writeln!(
            source,
            "    ({relative:?}, include_bytes!({:?})),",
            file.display().to_string()
        )
        .unwrap();
    }
    source.push_str("];\n");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap()).join("go_runtime.rs");
    std::fs::write(out, source).unwrap();
}

/// Adds the `.go` and `.s` files under `dir` to `files`.
fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|x| x == "go" || x == "s") {
            files.push(path);
        }
    }
}

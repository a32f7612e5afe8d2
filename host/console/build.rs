//! Writes the table of the console's built files (`dist/`, kept in the repository and
//! rebuilt from `web/` by `scripts/console.sh build`) that `src/lib.rs` embeds. Building
//! the crate needs no Node: `cargo install` takes only cargo. The test command checks
//! that `dist/` matches a fresh build of `web/`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let dist = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("dist");
    println!("cargo:rerun-if-changed={}", dist.display());
    if !dist.join("index.html").is_file() {
        panic!(
            "The console's built files are missing from {}: run scripts/console.sh build (it needs Node 20.19+ and npm).",
            dist.display()
        );
    }
    let mut files = Vec::new();
    collect(&dist, &dist, &mut files);
    files.sort();
    let mut table = String::from("/// The console's files: path under `/console/`, bytes.\n");
    table.push_str("static FILES: &[(&str, &[u8])] = &[\n");
    for (name, path) in &files {
        println!("cargo:rerun-if-changed={path}");
        writeln!(table, "    ({name:?}, include_bytes!({path:?})),").unwrap();
    }
    table.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    std::fs::write(out.join("files.rs"), table).expect("OUT_DIR is writable");
}

/// Every file under `dir`, as (path relative to `root` with `/`, absolute path).
fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, String)>) {
    let entries = std::fs::read_dir(dir).expect("the console's files are readable");
    for entry in entries {
        let path = entry.expect("the console's files are readable").path();
        if path.is_dir() {
            collect(root, &path, files);
        } else {
            let name = path.strip_prefix(root).unwrap().to_string_lossy();
            files.push((name.replace('\\', "/"), path.display().to_string()));
        }
    }
}

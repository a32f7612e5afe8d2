//! Builds the console (`web/`, a Vite project) into `OUT_DIR` and writes the table of
//! its files that `src/lib.rs` embeds. `npm ci` runs when `node_modules` is missing or
//! older than the lock file; both need Node 20.19+ and npm, which
//! `scripts/setup.sh` checks.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let web = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("web");
    for input in [
        "src",
        "index.html",
        "package.json",
        "package-lock.json",
        "vite.config.ts",
    ] {
        println!("cargo:rerun-if-changed={}", web.join(input).display());
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let dist = out.join("console");
    // Builds of two profiles (or an editor's check beside a build) share `node_modules`:
    // one installs at a time (`npm ci` empties it first).
    let manifest = std::fs::File::open(web.join("package.json")).expect("web/package.json");
    manifest.lock().expect("web/package.json can be locked");
    if needs_install(&web) {
        run(
            Command::new("npm").args(["ci", "--no-audit", "--no-fund"]),
            &web,
        );
    }
    run(
        Command::new("node")
            .arg("node_modules/vite/bin/vite.js")
            .args(["build", "--logLevel", "warn", "--emptyOutDir", "--outDir"])
            .arg(&dist),
        &web,
    );
    let mut files = Vec::new();
    collect(&dist, &dist, &mut files);
    files.sort();
    let mut table = String::from("/// The console's files: path under `/console/`, bytes.\n");
    table.push_str("static FILES: &[(&str, &[u8])] = &[\n");
    for (name, path) in &files {
        writeln!(table, "    ({name:?}, include_bytes!({path:?})),").unwrap();
    }
    table.push_str("];\n");
    std::fs::write(out.join("files.rs"), table).expect("OUT_DIR is writable");
}

/// Whether `npm ci` must run: no `node_modules`, or one older than the lock file.
fn needs_install(web: &Path) -> bool {
    let modified = |p: PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    match (
        modified(web.join("node_modules/.package-lock.json")),
        modified(web.join("package-lock.json")),
    ) {
        (Some(installed), Some(locked)) => installed < locked,
        _ => true,
    }
}

fn run(command: &mut Command, dir: &Path) {
    let shown = format!("{command:?}");
    match command.current_dir(dir).status() {
        Ok(status) if status.success() => {}
        Ok(status) => panic!(
            "Building the web console failed: {shown} in {} exited with {status}.",
            dir.display()
        ),
        Err(e) => panic!(
            "Building the web console needs Node 20.19+ and npm on PATH ({shown}: {e}). Run scripts/setup.sh, which checks the project's tools."
        ),
    }
}

/// Every file under `dir`, as (path relative to `root` with `/`, absolute path).
fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, String)>) {
    let entries = std::fs::read_dir(dir).expect("the console was built");
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

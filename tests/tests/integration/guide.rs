//! Follows each language's "your first transform" guide word for word (Rust in
//! docs/write-a-transform-in-rust.md, TypeScript, Python, C and Go in the SDKs' READMEs):
//! every `sh` block is run and every block marked `file=PATH` is written, in order, in
//! a fresh directory beside a checkout of this repository; then the preview's records
//! are checked.

use std::path::Path;
use std::process::Command;

use sluice_tests::{deals_table, repo_root, sluice_binary};

/// The guide's code blocks in order: (info string, body).
fn blocks(markdown: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in markdown.lines() {
        match (&mut current, line.strip_prefix("```")) {
            (None, Some(info)) => current = Some((info.trim().to_string(), String::new())),
            (Some(_), Some(_)) => blocks.extend(current.take()),
            (Some((_, body)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    blocks
}

/// Follows the guide at `path` (relative to the repository) in a fresh directory
/// holding the `deals` scenario table and a `sluice` link to this checkout; returns
/// how many steps it took and what its last command printed.
fn follow(guide_path: &str) -> (usize, String) {
    let guide = std::fs::read_to_string(repo_root().join(guide_path)).expect("the guide exists");
    let work = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(repo_root(), work.path().join("sluice")).unwrap();
    deals_table(&work.path().join("deals"), &["scenario"]);
    let bin_dir = sluice_binary().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The guide's crate compiles, natively and to Wasm (`sluice build` uses cargo's
    // CARGO_TARGET_DIR too), with one cache that outlives the run.
    let native_target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| repo_root().join("target"), std::path::PathBuf::from)
        .join("guide");

    let mut last_output = String::new();
    let mut steps = 0;
    for (info, body) in blocks(&guide) {
        if let Some(file) = info
            .split_whitespace()
            .find_map(|w| w.strip_prefix("file="))
        {
            let target = work.path().join(file);
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::write(&target, body).unwrap();
            steps += 1;
        } else if info == "sh" {
            let output = Command::new("bash")
                .args(["-euo", "pipefail", "-c", &body])
                .current_dir(work.path())
                .env("PATH", &path)
                .env("CARGO_TARGET_DIR", &native_target)
                .output()
                .expect("bash runs");
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(
                output.status.success(),
                "{guide_path}: `{}` failed: {stderr}",
                body.trim()
            );
            last_output = String::from_utf8_lossy(&output.stdout).into_owned();
            steps += 1;
        }
    }
    assert!(
        Path::new(&work.path().join("modules/won-deals.wasm")).exists(),
        "{guide_path}"
    );
    (steps, last_output)
}

/// Checks the won-deals preview every guide ends with: won deals keyed by their id,
/// deleted deals as tombstones.
fn check_won_deals(last_output: &str) {
    let records: Vec<serde_json::Value> = last_output
        .lines()
        .map(|line| serde_json::from_str(line).expect("preview prints JSON lines"))
        .collect();
    let won: Vec<_> = records.iter().filter(|r| r["value"].is_string()).collect();
    let tombstones = records.iter().filter(|r| r["value"].is_null()).count();
    assert!(!won.is_empty(), "the scenario wins deals: {last_output}");
    assert!(tombstones > 0, "the scenario deletes deals: {last_output}");
    for record in won {
        let value: serde_json::Value =
            serde_json::from_str(record["value"].as_str().unwrap()).unwrap();
        assert_eq!(value["id"], record["key"]);
    }
}

#[test]
fn the_rust_transform_guide_works_as_written() {
    let (steps, output) = follow("docs/write-a-transform-in-rust.md");
    assert_eq!(steps, 6, "the guide's steps: 4 commands, 2 files");
    check_won_deals(&output);
}

#[test]
fn the_typescript_transform_guide_works_as_written() {
    let (steps, output) = follow("guest-sdk/js/README.md");
    assert_eq!(steps, 5, "the guide's steps: 4 commands, 1 file");
    check_won_deals(&output);
}

#[test]
fn the_python_transform_guide_works_as_written() {
    let (steps, output) = follow("guest-sdk/python/README.md");
    assert_eq!(steps, 6, "the guide's steps: 4 commands, 2 files");
    check_won_deals(&output);
}

#[test]
fn the_c_transform_guide_works_as_written() {
    let (steps, output) = follow("guest-sdk/c/README.md");
    assert_eq!(steps, 4, "the guide's steps: 3 commands, 1 file");
    check_won_deals(&output);
}

#[test]
fn the_go_transform_guide_works_as_written() {
    let (steps, output) = follow("guest-sdk/go/README.md");
    assert_eq!(steps, 6, "the guide's steps: 4 commands, 2 files");
    check_won_deals(&output);
}

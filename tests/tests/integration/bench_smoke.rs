//! A small run of the end-to-end benchmark harness (`bench/e2e/run.py`), without Spark,
//! so the harness keeps working: every contestant must deliver the same records (the
//! stateful ones the same as each other). No figure is asserted.

use std::process::Command;

use sluice_tests::{kafka_bootstrap, repo_root, transform_component};

#[test]
fn the_benchmark_harness_runs_and_its_contestants_agree() {
    // The harness uses the modules where the build puts them.
    for module in ["gold-deals", "account-pipeline", "account-pipeline-js"] {
        transform_component(module);
    }
    let out = tempfile::tempdir().unwrap();
    let run = Command::new("python3")
        .arg(repo_root().join("bench/e2e/run.py"))
        .args([
            "--rows",
            "3000",
            "--runs",
            "2",
            "--commits",
            "3",
            "--profile",
            "debug",
        ])
        .args([
            "--contestants",
            "sluice-eos,sluice-replay,sluice-alo,sluice-oauth,sluice-account,sluice-account-js,native,wasm,wasm-shadow,raw,kafka-perf",
        ])
        .args(["--bootstrap", &kafka_bootstrap()])
        .arg("--out")
        .arg(out.path())
        .output()
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "the harness failed:\n{stderr}");
    let report = std::fs::read_to_string(out.path().join("README.md")).unwrap();
    for contestant in [
        "sluice-eos",
        "sluice-replay",
        "sluice-alo",
        "sluice-account",
        "native",
        "raw",
        "wasm",
        "wasm-shadow",
        "kafka-perf",
    ] {
        assert!(report.contains(&format!("| {contestant} |")), "{report}");
    }
    assert!(
        report.contains("restored from its changelog alone"),
        "the stateful contestants' restore is reported: {report}"
    );
    assert!(
        report.contains("p50"),
        "the follow-mode latency is reported: {report}"
    );
    assert!(
        report.contains("interleaved rounds") && report.contains("cores busy before"),
        "how the samples were taken is on the page: {report}"
    );
    // A ratio is given with its interval: `1.23x (1.10-1.31)`.
    let interval = has_ratio_interval(&report);
    assert!(interval, "no ratio with an interval: {report}");
}

#[test]
fn the_benchmark_statistics_pass_their_unit_tests() {
    let run = Command::new("python3")
        .arg(repo_root().join("bench/e2e/test_samples.py"))
        .output()
        .expect("python3 runs");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

/// Whether `report` holds a ratio with its interval, `<r>x (<low>-<high>)`.
fn has_ratio_interval(report: &str) -> bool {
    report.split("x (").skip(1).any(|after| {
        after
            .split_once(')')
            .and_then(|(inside, _)| inside.split_once('-'))
            .is_some_and(|(low, high)| low.parse::<f64>().is_ok() && high.parse::<f64>().is_ok())
    })
}

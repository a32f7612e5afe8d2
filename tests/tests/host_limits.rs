//! A hostile module cannot make the host spend memory or time beyond its own budgets:
//! every way `transforms/misbehaving/host-hogs` asks the host to work or hold memory
//! on its behalf (the contract's host functions and WASI) ends the run with a clear
//! error, exit status 1 and no signal, while the host's peak memory stays below the
//! module's 256 MiB memory cap plus a fixed overhead.

use std::path::{Path, PathBuf};
use std::process::Command;

use sluice_tests::{
    Extra, Measured, PipelineFiles, deals_table, kafka_bootstrap, run_measured, sluice_binary,
    unique_topic, wasip2_component,
};

/// Most memory the host may hold while a module with the default 256 MiB memory cap
/// (and 256 MiB output cap) misbehaves: both caps plus the host itself.
const PEAK_BOUND: u64 = 1024 * 1024 * 1024;

/// Where a child is killed if the bounds do not hold, so a regression fails the test
/// instead of exhausting the machine.
const GUARD: u64 = 3 * 1024 * 1024 * 1024;

/// Each behavior and what the error must say.
const HOSTILE: &[(&str, &[&str])] = &[
    (
        "columns-repeat",
        &[
            "host limit exceeded",
            "host call columns was given 20000 column names",
        ],
    ),
    (
        "encode-rows",
        &[
            "host limit exceeded",
            "host call emit-encoded was given 5000000 row indexes; at most 4000",
        ],
    ),
    (
        "encode-headers",
        &[
            "host limit exceeded",
            "host call emit-encoded was given 20000 headers",
        ],
    ),
    (
        "encode-wide",
        &[
            "host limit exceeded",
            "host call emit-encoded: the module emitted more than 256 MiB of records",
        ],
    ),
    (
        "emit-flood",
        &[
            "host limit exceeded",
            "host call emit: the module emitted more than 256 MiB of records",
        ],
    ),
    (
        "packed-names",
        &[
            "host limit exceeded",
            "host call emit-packed: the module emitted more than 256 MiB of records",
        ],
    ),
    (
        "select-within",
        &[
            "host limit exceeded",
            "host call select-where was given 5000000 row indexes",
        ],
    ),
    (
        "reject-flood",
        &[
            "host limit exceeded",
            "host call reject was given row 0 a second time",
        ],
    ),
    ("random", &["host limit exceeded", "exceeds limit 65536"]),
    ("handles", &["host limit exceeded"]),
    ("sleep", &["deadline exceeded"]),
    (
        "stderr-flood",
        &["deadline exceeded", "The module wrote to stderr"],
    ),
];

/// A 4,000-deal table: one batch at the default batch size.
fn table(dir: &Path) -> PathBuf {
    let table = dir.join("deals");
    deals_table(&table, &["create", "--rows", "4000"]);
    table
}

fn assert_stopped_cleanly(how: &str, behavior: &str, expected: &[&str], run: &Measured) {
    assert_eq!(
        run.signal, None,
        "{how} {behavior} was killed: {}",
        run.stderr
    );
    assert_eq!(run.code, Some(1), "{how} {behavior}: {}", run.stderr);
    for part in expected {
        assert!(
            run.stderr.contains(part),
            "{how} {behavior} should say `{part}`: {}",
            run.stderr
        );
    }
    assert!(
        run.peak_rss < PEAK_BOUND,
        "{how} {behavior}: the host held {} MiB at its peak",
        run.peak_rss / (1024 * 1024)
    );
    eprintln!(
        "{how} {behavior}: stopped, peak RSS {} MiB",
        run.peak_rss / (1024 * 1024)
    );
}

#[test]
fn sluice_preview_stops_every_hostile_module_within_its_budgets() {
    let work = tempfile::tempdir().unwrap();
    let table = table(work.path());
    let module = wasip2_component("misbehaving/host-hogs");
    for (behavior, expected) in HOSTILE {
        let mut preview = Command::new(sluice_binary());
        preview
            .args(["preview", "--table"])
            .arg(&table)
            .arg("--module")
            .arg(&module)
            .arg("--param")
            .arg(format!("behavior={behavior}"));
        assert_stopped_cleanly("preview", behavior, expected, &run_measured(preview, GUARD));
    }

    let mut behaved = Command::new(sluice_binary());
    behaved
        .args(["preview", "--table"])
        .arg(&table)
        .arg("--module")
        .arg(&module);
    let output = behaved.output().unwrap();
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).lines().count(),
        4000
    );
}

#[test]
fn sluice_run_stops_every_hostile_module_within_its_budgets() {
    let work = tempfile::tempdir().unwrap();
    let table = table(work.path());
    let module = wasip2_component("misbehaving/host-hogs");
    for (behavior, expected) in HOSTILE {
        let topic = unique_topic(&format!("hostile-{behavior}"));
        let files = PipelineFiles::new(
            &table,
            &module,
            &topic,
            &kafka_bootstrap(),
            Extra {
                params: &format!("behavior = \"{behavior}\""),
                transform: "batch_timeout = \"2s\"",
                ..Extra::default()
            },
        );
        let mut run = Command::new(sluice_binary());
        run.args(["run", "--stop-at-latest", "--config"])
            .arg(&files.config);
        assert_stopped_cleanly("run", behavior, expected, &run_measured(run, GUARD));
    }
}

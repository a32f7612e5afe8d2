//! A hostile module cannot make the host spend memory or time beyond its own budgets:
//! every way `transforms/misbehaving/host-hogs` asks the host to work or hold memory
//! on its behalf (the contract's host functions and WASI) ends `sluice preview` and
//! `sluice run` with a clear error, exit status 1 and no signal, while the host's peak
//! memory stays below the module's 256 MiB memory cap plus a fixed overhead; in
//! `sluice serve` each fails alone beside three tenants streaming gold-deals, which
//! deliver every record exactly once.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sluice_tests::service::{Serve, TenantSpec, pipeline_config};
use sluice_tests::{
    Extra, Measured, PipelineFiles, consume_all, deals_table, kafka_bootstrap, run_measured,
    sluice_binary, transform_component, unique_topic, wasip2_component,
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

/// `sluice preview` of `table` through `module`, with `behavior` when one is given.
fn preview(table: &Path, module: &Path, behavior: Option<&str>) -> Command {
    let mut preview = Command::new(sluice_binary());
    preview
        .args(["preview", "--table"])
        .arg(table)
        .arg("--module")
        .arg(module);
    if let Some(behavior) = behavior {
        preview.arg("--param").arg(format!("behavior={behavior}"));
    }
    preview
}

fn assert_stopped_cleanly(how: &str, behavior: &str, expected: &[&str], run: &Measured) {
    run.assert_stopped_cleanly(&format!("{how} {behavior}"), expected, PEAK_BOUND);
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
        let preview = preview(&table, &module, Some(behavior));
        assert_stopped_cleanly("preview", behavior, expected, &run_measured(preview, GUARD));
    }

    let output = preview(&table, &module, None).output().unwrap();
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).lines().count(),
        4000
    );
}

/// 250,000 rejections of a 4,000-row batch with 4 KiB reasons (1 GiB): the host keeps one
/// per row, its reason cut to 1,024 bytes, and its memory stays flat.
#[test]
fn a_flood_of_rejections_keeps_one_short_reason_per_row() {
    let work = tempfile::tempdir().unwrap();
    let table = table(work.path());
    let module = wasip2_component("misbehaving/host-hogs");
    let output = preview(&table, &module, Some("reject-flood"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rejected: Vec<serde_json::Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(rejected.len(), 4000, "one rejection per row");
    for line in &rejected {
        assert_eq!(line["rejected"].as_str().unwrap().len(), 1024, "{line}");
    }
    let run = run_measured(preview(&table, &module, Some("reject-flood")), GUARD);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.peak_rss < PEAK_BOUND,
        "peak RSS {} MiB",
        run.peak_rss / (1024 * 1024)
    );
    eprintln!(
        "preview reject-flood: peak RSS {} MiB",
        run.peak_rss / (1024 * 1024)
    );

    let topic = unique_topic("hostile-reject-flood");
    let files = PipelineFiles::new(
        &table,
        &module,
        &topic,
        &kafka_bootstrap(),
        Extra {
            params: "behavior = \"reject-flood\"",
            ..Extra::default()
        },
    );
    let run = run_measured(files.run_to_latest_command(), GUARD);
    assert_stopped_cleanly("run", "reject-flood", &["failed on batch row 0"], &run);
}

/// A module putting state without end stops at the state's budget, in a preview (in
/// memory, `[state]`'s defaults) and in a run (the pipeline's `max_mib`); the host
/// holds at most the budget, never what the module asks for.
#[test]
fn a_module_hoarding_state_stops_at_its_budget() {
    let work = tempfile::tempdir().unwrap();
    let table = table(work.path());
    let module = wasip2_component("misbehaving/host-hogs");
    let expected = ["state limit exceeded", "[state] max_mib"];
    let preview = preview(&table, &module, Some("state-hoard"));
    assert_stopped_cleanly(
        "preview",
        "state-hoard",
        &expected,
        &run_measured(preview, GUARD),
    );
    let state = format!(
        "dir = \"{}\"\nmax_mib = 64",
        work.path().join("state").display()
    );
    let files = PipelineFiles::new(
        &table,
        &module,
        &unique_topic("hostile-state-hoard"),
        &kafka_bootstrap(),
        Extra {
            params: "behavior = \"state-hoard\"",
            state: Some(&state),
            ..Extra::default()
        },
    );
    let run = run_measured(files.run_to_latest_command(), GUARD);
    assert_stopped_cleanly("run", "state-hoard", &expected, &run);
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
        let run = run_measured(files.run_to_latest_command(), GUARD);
        assert_stopped_cleanly("run", behavior, expected, &run);
    }
}

/// Each hostile behavior under `sluice serve` and what its pipeline's
/// error must say (smaller caps than above: 64 MiB of memory, 32 MiB of output).
const HOST_HOGS: &[(&str, &str)] = &[
    ("columns-repeat", "host limit exceeded"),
    ("encode-rows", "host limit exceeded"),
    ("encode-headers", "host limit exceeded"),
    (
        "encode-wide",
        "the module emitted more than 32 MiB of records",
    ),
    (
        "emit-flood",
        "the module emitted more than 32 MiB of records",
    ),
    (
        "packed-names",
        "the module emitted more than 32 MiB of records",
    ),
    ("select-within", "host limit exceeded"),
    ("reject-flood", "failed on batch row 0"),
    ("random", "host limit exceeded"),
    ("handles", "host limit exceeded"),
    ("sleep", "deadline exceeded"),
    ("stderr-flood", "deadline exceeded"),
];

#[test]
fn modules_that_make_the_host_spend_fail_alone() {
    const GOOD_TENANTS: usize = 3;
    const DEALS: usize = 20_000;
    let gold_deals = transform_component("gold-deals");
    let hogs = wasip2_component("misbehaving/host-hogs");
    let tables = tempfile::tempdir().unwrap();
    let big = tables.path().join("big");
    deals_table(&big, &["bulk", "--rows", &DEALS.to_string()]);
    let small = tables.path().join("small");
    deals_table(&small, &["create", "--rows", "4000"]);

    let kafka = format!("\"bootstrap.servers\" = \"{}\"", kafka_bootstrap());
    let good: Vec<String> = (0..GOOD_TENANTS).map(|i| format!("gold{i}")).collect();
    let mut tenants: Vec<TenantSpec<'_>> = good
        .iter()
        .map(|name| TenantSpec {
            name,
            limits: "max_batch_timeout = \"2s\"\nmax_memory_mib = 64",
            kafka: &kafka,
        })
        .collect();
    tenants.push(TenantSpec {
        name: "mallory",
        limits: "max_batch_timeout = \"2s\"\nmax_memory_mib = 1024\nmax_pipelines = 20",
        kafka: &kafka,
    });
    let serve = Serve::start(&tenants, "", "");
    let run = unique_topic("hogs");

    let hog_digest = serve.upload("mallory", &hogs, "host-hogs");
    for (behavior, _) in HOST_HOGS {
        let config = pipeline_config(
            &small,
            &unique_topic(&format!("hog-{behavior}")),
            None,
            Extra {
                transform: "memory_limit_mib = 64\nmax_output_mib = 32",
                params: &format!("behavior = \"{behavior}\""),
                ..Extra::default()
            },
        );
        serve.create(
            "mallory",
            &format!("{run}-{behavior}"),
            &config,
            &hog_digest,
        );
    }
    let topics: Vec<String> = good
        .iter()
        .map(|tenant| {
            let digest = serve.upload(tenant, &gold_deals, "gold-deals");
            let topic = unique_topic(&format!("{tenant}-gold"));
            let config = pipeline_config(&big, &topic, None, Extra::default());
            serve.create(tenant, &run, &config, &digest);
            topic
        })
        .collect();

    for (behavior, expected) in HOST_HOGS {
        let status = serve.wait_for(
            "mallory",
            &format!("{run}-{behavior}"),
            Duration::from_secs(120),
            |s| s["state"] == "failed",
        );
        let error = status["error"].as_str().unwrap();
        assert!(error.contains(expected), "{behavior}: {error}");
        // A flood of rejections is not a host limit: the host keeps one per row and
        // the policy fails the first; waits end at the deadline.
        if !["deadline exceeded", "failed on batch row"]
            .iter()
            .any(|other| expected.starts_with(other))
        {
            assert!(
                status["counters"]["host_limits"].as_u64().unwrap() >= 1,
                "{behavior}: {status}"
            );
        }
    }
    for (tenant, topic) in good.iter().zip(&topics) {
        serve.wait_caught_up(tenant, &run, 0, Duration::from_secs(300));
        let keys: Vec<String> = consume_all(topic)
            .into_iter()
            .map(|r| r.key.expect("gold records are keyed"))
            .collect();
        let distinct: BTreeSet<&String> = keys.iter().collect();
        assert_eq!(keys.len(), DEALS, "{tenant}: every deal once");
        assert_eq!(distinct.len(), DEALS, "{tenant}: no deal twice");
    }
    let mut serve = serve;
    assert!(serve.is_running(), "the host survived:\n{}", serve.log());
    let (_, metrics) = serve.call("GET", "/metrics", Some(&serve.operator.clone()), None);
    let metrics = metrics.as_str().unwrap_or_default().to_string();
    assert!(
        metrics.contains("kind=\"host_limit\"}"),
        "the host-limit traps are counted: {metrics}"
    );
    if let Some(peak) = serve.peak_rss() {
        eprintln!(
            "{} hostile pipelines beside {GOOD_TENANTS} gold-deals tenants: service peak RSS {} MiB",
            HOST_HOGS.len(),
            peak / (1024 * 1024)
        );
    }
    assert!(serve.stop(), "the service stops cleanly");
}

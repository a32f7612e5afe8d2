//! One tenant's module cannot take the host down at deploy time: compile bombs are
//! refused before compiling (nested loops, a long function, locals, globals) by
//! `sluice preview`, `sluice run` and uploads to `sluice serve`, real modules past their
//! compile budget are stopped in their worker process, and instances past their memory
//! cap in tables are refused at instantiation; each with a clear error, exit status 1
//! and no signal, the host's peak memory below 1 GiB. In `sluice serve`, a good
//! tenant's upload and pipeline finish within 10 s while a hostile one's compiles run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sluice_tests::hostile;
use sluice_tests::service::{Serve, TenantSpec, pipeline_config};
use sluice_tests::{
    Extra, Measured, PipelineFiles, consume_all, deals_table, kafka_bootstrap, run_measured,
    sluice_binary, transform_component, unique_topic,
};

/// Most memory the host may hold while refusing a hostile module.
const PEAK_BOUND: u64 = 1024 * 1024 * 1024;

/// Where a child is killed if the bound does not hold.
const GUARD: u64 = 3 * 1024 * 1024 * 1024;

fn table(dir: &Path) -> PathBuf {
    let table = dir.join("deals");
    deals_table(&table, &["create", "--rows", "20"]);
    table
}

fn write_module(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(format!("{name}.wasm"));
    std::fs::write(&path, bytes).unwrap();
    path
}

fn preview(table: &Path, module: &Path) -> Command {
    let mut preview = Command::new(sluice_binary());
    preview
        .args(["preview", "--table"])
        .arg(table)
        .arg("--module")
        .arg(module);
    preview
}

fn assert_refused(how: &str, run: &Measured, expected: &[&str], within: Duration) {
    run.assert_stopped_cleanly(how, expected, PEAK_BOUND);
    assert!(run.elapsed < within, "{how} took {:?}", run.elapsed);
    eprintln!(
        "{how}: refused in {:.1} s, peak RSS {} MiB",
        run.elapsed.as_secs_f64(),
        run.peak_rss / (1024 * 1024)
    );
}

#[test]
fn compile_bombs_are_refused_before_compiling() {
    let work = tempfile::tempdir().unwrap();
    let table = table(work.path());
    let bombs = [
        (
            "nested-loops",
            hostile::nested_loops(250_000),
            "250000 nested blocks, loops and ifs in one function, more than the 4000",
        ),
        (
            "long-function",
            hostile::nested_loops(2_500_000),
            "7500002 bytes of one function body, more than the 2097152",
        ),
        (
            "locals",
            hostile::many_locals(50_000),
            "50000 locals of one function, more than the 10000",
        ),
        (
            "globals",
            hostile::many_globals(1_000_000),
            "1000000 globals of one core module, more than the 10000",
        ),
    ];
    for (name, bytes, says) in bombs {
        let module = write_module(work.path(), name, &bytes);
        let refused = format!("Transform module {name} was refused");
        let run = run_measured(preview(&table, &module), GUARD);
        assert_refused(
            &format!("preview of {name}"),
            &run,
            &[&refused, says],
            Duration::from_secs(60),
        );
        let files = PipelineFiles::new(
            &table,
            &module,
            &unique_topic("compile-bomb"),
            &kafka_bootstrap(),
            Extra::default(),
        );
        assert_refused(
            &format!("run of {name}"),
            &run_measured(files.run_to_latest_command(), GUARD),
            &[&refused, says],
            Duration::from_secs(60),
        );
    }
}

#[test]
fn instances_past_their_memory_cap_in_tables_are_refused() {
    let work = tempfile::tempdir().unwrap();
    let table = table(work.path());
    // 40 instances of 8 tables of a million functions: 2.5 GiB of tables against a
    // 256 MiB cap, each table within the shape limits.
    let bomb = hostile::with_instances_of(
        &std::fs::read(transform_component("passthrough")).unwrap(),
        &hostile::tables_module(8, 1_000_000),
        40,
    );
    let module = write_module(work.path(), "tables", &bomb);
    let run = run_measured(preview(&table, &module), GUARD);
    assert_refused(
        "preview of tables",
        &run,
        &[
            "Cannot start transform module tables",
            "table growth failure",
        ],
        Duration::from_secs(60),
    );
}

#[test]
fn a_real_module_past_its_compile_budget_is_stopped() {
    let work = tempfile::tempdir().unwrap();
    let table = table(work.path());
    // componentize-py's CPython: ~11 s and ~370 MiB to compile on a quiet machine.
    let python = transform_component("gold-deals-python");
    for (budget, says) in [
        (
            "compile_timeout = \"1s\"",
            "compile deadline of 1 s (max_compile_seconds)",
        ),
        (
            "compile_memory_mib = 64",
            "compile memory limit of 64 MiB (max_compile_mib",
        ),
    ] {
        let transform = format!("module_cache_dir = \"\"\n{budget}");
        let files = PipelineFiles::new(
            &table,
            &python,
            &unique_topic("compile-budget"),
            &kafka_bootstrap(),
            Extra {
                transform: &transform,
                ..Extra::default()
            },
        );
        assert_refused(
            &format!("run with {budget}"),
            &run_measured(files.run_to_latest_command(), GUARD),
            &["was refused", says],
            Duration::from_secs(60),
        );
    }
}

#[test]
fn a_good_tenant_deploys_while_a_hostile_one_compiles() {
    let work = tempfile::tempdir().unwrap();
    let table = table(work.path());
    let python = transform_component("gold-deals-python");
    let passthrough = transform_component("passthrough");
    // The good tenant's module is C's passthrough: small, so the time measured is the
    // wait the hostile tenant causes, not a compile of its own on a slow machine.
    let good_module = transform_component("passthrough-c");
    let kafka = format!("\"bootstrap.servers\" = \"{}\"", kafka_bootstrap());
    let serve = Serve::start(
        &[
            TenantSpec {
                name: "evil",
                limits: "max_compile_seconds = 4",
                kafka: &kafka,
            },
            TenantSpec {
                name: "good",
                limits: "",
                kafka: &kafka,
            },
            TenantSpec {
                name: "sneaky",
                limits: "",
                kafka: &kafka,
            },
        ],
        "",
        "",
    );
    std::thread::scope(|scope| {
        // Two uploads that compile until their deadline, and two bombs.
        let hostile: Vec<_> = [
            ("slow-1", std::fs::read(&python).unwrap()),
            ("slow-2", std::fs::read(&python).unwrap()),
            ("loops", hostile::nested_loops(2_500_000)),
            ("locals", hostile::many_locals(50_000)),
        ]
        .into_iter()
        .map(|(name, bytes)| {
            let serve = &serve;
            scope.spawn(move || (name, serve.upload_bytes("evil", name, bytes)))
        })
        .collect();
        std::thread::sleep(Duration::from_millis(500));
        let started = Instant::now();
        let digest = serve.upload("good", &good_module, "passthrough");
        let topic = unique_topic("deploy-safety-good");
        let config = pipeline_config(&table, &topic, None, Extra::default());
        let pipeline = unique_topic("steady");
        serve.create("good", &pipeline, &config, &digest);
        let deployed = started.elapsed();
        eprintln!(
            "the good tenant uploaded and created in {:.1} s beside the hostile uploads",
            deployed.as_secs_f64()
        );
        assert!(deployed < Duration::from_secs(10), "took {deployed:?}");
        serve.wait_caught_up("good", &pipeline, 0, Duration::from_secs(120));
        assert_eq!(consume_all(&topic).len(), 20);
        for upload in hostile {
            let (name, (status, body)) = upload.join().unwrap();
            assert_eq!(status, 422, "{name}: {body}");
            assert!(
                body.to_string()
                    .contains(&format!("Transform module {name} was refused")),
                "{name}: {body}"
            );
        }
    });
    // The refusals are remembered: the same bytes are refused at once, not compiled.
    let started = Instant::now();
    let (status, body) = serve.upload_bytes("evil", "slow-3", std::fs::read(&python).unwrap());
    assert_eq!(status, 422, "{body}");
    assert!(body.to_string().contains("refused before"), "{body}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let (_, refused) = serve.call(
        "GET",
        "/v1/tenants/evil/modules/refused",
        Some(serve.token("evil")),
        None,
    );
    let mut names: Vec<&str> = refused
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    // Both slow uploads are one module, recorded under the name of the first refused.
    assert_eq!(names.len(), 3, "{refused}");
    assert!(
        names.contains(&"locals") && names.contains(&"loops"),
        "{refused}"
    );
    // An instantiation bomb compiles within its budgets, so it uploads; a pipeline of
    // it fails at its first instance, naming the memory cap, and stays failed.
    let tables = hostile::with_instances_of(
        &std::fs::read(&passthrough).unwrap(),
        &hostile::tables_module(8, 1_000_000),
        40,
    );
    let (status, entry) = serve.upload_bytes("sneaky", "tables", tables);
    assert_eq!(status, 201, "{entry}");
    let config = pipeline_config(
        &table,
        &unique_topic("sneaky-tables"),
        None,
        Extra::default(),
    );
    let pipeline = unique_topic("tables");
    serve.create(
        "sneaky",
        &pipeline,
        &config,
        entry["digest"].as_str().unwrap(),
    );
    let failed = serve.wait_for("sneaky", &pipeline, Duration::from_secs(60), |s| {
        s["state"] == "failed"
    });
    assert!(
        failed["error"]
            .as_str()
            .is_some_and(|e| e.contains("table growth failure")),
        "{failed}"
    );
    assert!(serve.log().contains("A transform module was compiled."));
    let peak = serve.peak_rss().unwrap_or(0);
    assert!(
        peak < PEAK_BOUND,
        "the service held {} MiB",
        peak / (1024 * 1024)
    );

    // A service told to stop does not wait for a compile: the upload is answered 503
    // and the service exits long before the module (~11 s to compile) would be done.
    let url = format!("{}/v1/tenants/good/modules?name=late", serve.url);
    let token = format!("Bearer {}", serve.token("good"));
    let late = hostile::variant(&std::fs::read(&python).unwrap(), "late");
    let upload = std::thread::spawn(move || {
        ureq::post(&url)
            .header("Authorization", &token)
            .send(&late[..])
            .map(|response| response.status().as_u16())
    });
    std::thread::sleep(Duration::from_secs(1));
    let stopping = Instant::now();
    let mut serve = serve;
    assert!(serve.stop(), "the service stops cleanly:\n{}", serve.log());
    let stopped = stopping.elapsed();
    eprintln!(
        "the service stopped {:.1} s into a compile",
        stopped.as_secs_f64()
    );
    assert!(
        stopped < Duration::from_secs(8),
        "stopping took {stopped:?}"
    );
    assert!(
        !matches!(upload.join().unwrap(), Ok(201)),
        "the late upload was not stored"
    );
}

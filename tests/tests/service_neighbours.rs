//! `sluice serve` with eleven tenants, three of them running a hostile module (an
//! endless loop, a memory hog, a panic) and one uploading modules that compile past its
//! compile deadline all the while: the host stays up, the hostile pipelines stop or
//! dead-letter as their policies say, the uploads are refused, and the others keep
//! their throughput.

use std::time::{Duration, Instant};

use sluice_tests::hostile;
use sluice_tests::service::{Serve, TenantSpec, pipeline_config};
use sluice_tests::{
    Extra, consume_all, deals_table, kafka_bootstrap, transform_component, unique_topic,
};

const GOOD: usize = 7;
const ROWS: u64 = 40_000;

/// Creates a gold-deals pipeline per good tenant named `<prefix>` and returns the rows
/// per second they delivered together, from creation to the last one done.
fn run_good(
    serve: &Serve,
    digests: &[String],
    table: &std::path::Path,
    prefix: &str,
    alongside: impl FnOnce(),
) -> f64 {
    let started = Instant::now();
    for (i, digest) in digests.iter().enumerate() {
        let config = pipeline_config(table, &unique_topic(prefix), None, Extra::default());
        serve.create(&format!("good{i}"), prefix, &config, digest);
    }
    alongside();
    for i in 0..GOOD {
        serve.wait_caught_up(&format!("good{i}"), prefix, 0, Duration::from_secs(300));
    }
    let rate = (GOOD as u64 * ROWS) as f64 / started.elapsed().as_secs_f64();
    for i in 0..GOOD {
        let status = serve.status(&format!("good{i}"), prefix);
        assert_eq!(status["counters"]["rows_in"], ROWS, "{status}");
        assert_eq!(status["state"], "running", "{status}");
    }
    rate
}

#[test]
fn hostile_modules_hurt_no_other_tenant() {
    let gold_deals = transform_component("gold-deals");
    let behaviors = transform_component("misbehaving/behaviors");
    let tables = tempfile::tempdir().unwrap();
    let big = tables.path().join("big");
    deals_table(&big, &["bulk", "--rows", &ROWS.to_string()]);
    let small = tables.path().join("small");
    deals_table(&small, &["create", "--rows", "20"]);

    let kafka = format!("\"bootstrap.servers\" = \"{}\"", kafka_bootstrap());
    let names: Vec<String> = (0..GOOD)
        .map(|i| format!("good{i}"))
        .chain(["looper", "hog", "crasher", "bomber"].map(String::from))
        .collect();
    let tenants: Vec<TenantSpec<'_>> = names
        .iter()
        .map(|name| TenantSpec {
            name,
            // Only the bomber's deadline is tight: gold-deals itself takes ~3.5 s of CPU
            // to compile in a debug build, more on a busy host.
            limits: if name == "bomber" {
                "max_batch_timeout = \"2s\"\nmax_memory_mib = 64\nmax_compile_seconds = 5"
            } else {
                "max_batch_timeout = \"2s\"\nmax_memory_mib = 64\nmax_compile_seconds = 60"
            },
            kafka: &kafka,
        })
        .collect();
    let mut serve = Serve::start(&tenants, "", "");
    let digests: Vec<String> = (0..GOOD)
        .map(|i| serve.upload(&format!("good{i}"), &gold_deals, "gold-deals"))
        .collect();

    // Pipeline names are unique per run: positions outlive the test in the broker.
    let alone_name = unique_topic("alone");
    let crowded_name = unique_topic("crowded");
    let hostile_name = unique_topic("hostile");
    let alone = run_good(&serve, &digests, &big, &alone_name, || {});

    let hostile = |tenant: &str, behavior: &str, policy: &str| {
        let digest = serve.upload(tenant, &behaviors, "behaviors");
        let params = format!("behavior = \"{behavior}\"\nbad_ids = \"deal-0007\"");
        let config = pipeline_config(
            &small,
            &unique_topic(tenant),
            None,
            Extra {
                transform: policy,
                params: &params,
                ..Extra::default()
            },
        );
        serve.create(tenant, &hostile_name, &config, &digest);
    };
    let dead_letters = unique_topic("hog-dead-letters");
    let hog_policy = format!("on_error = \"dead-letter\"\ndead_letter_topic = \"{dead_letters}\"");
    // componentize-py's module takes ~11 s to compile: each upload (a new variant, so
    // not refused from memory) holds a compile slot for the bomber's 5 s deadline.
    let python = std::fs::read(transform_component("gold-deals-python")).unwrap();
    let bombing = std::sync::atomic::AtomicBool::new(true);
    let (crowded, refused_uploads) = std::thread::scope(|scope| {
        let bomber = scope.spawn(|| {
            let mut refused = 0;
            while bombing.load(std::sync::atomic::Ordering::Relaxed) {
                let bytes = hostile::variant(&python, &refused.to_string());
                let (status, body) = serve.upload_bytes("bomber", "slow", bytes);
                assert_eq!(status, 422, "{body}");
                refused += 1;
            }
            refused
        });
        let crowded = run_good(&serve, &digests, &big, &crowded_name, || {
            hostile("looper", "loop", "batch_timeout = \"1s\"");
            hostile("hog", "hog", &hog_policy);
            hostile("crasher", "panic", "on_error = \"skip\"");
        });
        bombing.store(false, std::sync::atomic::Ordering::Relaxed);
        (crowded, bomber.join().unwrap())
    });
    assert!(refused_uploads > 0);

    assert!(serve.is_running(), "the host survived:\n{}", serve.log());
    let looper = serve.wait_for("looper", &hostile_name, Duration::from_secs(60), |s| {
        s["state"] == "failed"
    });
    let error = looper["error"].as_str().unwrap();
    assert!(error.contains("deadline exceeded"), "{error}");
    assert!(
        error.contains("version 0"),
        "the failing position is named: {error}"
    );
    let hog = serve.wait_caught_up("hog", &hostile_name, 0, Duration::from_secs(60));
    assert_eq!(hog["state"], "running", "{hog}");
    assert_eq!(hog["counters"]["failed_batches"], 20, "{hog}");
    assert!(hog["counters"]["traps"].as_u64().unwrap() >= 2, "{hog}");
    let letters = consume_all(&dead_letters);
    assert_eq!(
        letters.len(),
        20,
        "every row of the hog's batch is a dead letter"
    );
    assert!(
        letters[0]
            .value
            .as_deref()
            .unwrap()
            .contains("memory limit exceeded"),
        "{:?}",
        letters[0]
    );
    let crasher = serve.wait_caught_up("crasher", &hostile_name, 0, Duration::from_secs(60));
    assert_eq!(crasher["state"], "running", "{crasher}");
    assert_eq!(crasher["counters"]["failed_batches"], 20, "{crasher}");

    let drop = 100.0 * (1.0 - crowded / alone);
    eprintln!(
        "{GOOD} good pipelines of {ROWS} rows each: {alone:.0} rows/s alone, {crowded:.0} rows/s beside the hostile four ({drop:.1}% drop; {refused_uploads} uploads refused at their compile deadline meanwhile)"
    );
    // Loosely: the hostile modules' CPU is bounded by their deadlines and retries.
    assert!(
        crowded > alone * 0.5,
        "throughput fell from {alone:.0} to {crowded:.0} rows/s"
    );
    assert!(serve.stop(), "the service stops cleanly");
}

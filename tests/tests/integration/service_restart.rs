//! `sluice serve` restarted with fifty pipelines restores every one and resumes each
//! from its stored position: nothing lost, nothing repeated.

use std::time::{Duration, Instant};

use sluice_tests::service::{Serve, TenantSpec, pipeline_config};
use sluice_tests::{
    Extra, consume_all, deals_table, kafka_bootstrap, transform_component, unique_topic,
};

const PIPELINES: usize = 50;

#[test]
fn a_restarted_service_resumes_fifty_pipelines() {
    let passthrough = transform_component("passthrough");
    let tables = tempfile::tempdir().unwrap();
    let table = tables.path().join("deals");
    deals_table(&table, &["create", "--rows", "10"]);

    let kafka = format!("\"bootstrap.servers\" = \"{}\"", kafka_bootstrap());
    let mut serve = Serve::start(
        &[TenantSpec {
            name: "fleet",
            limits: "max_pipelines = 50",
            kafka: &kafka,
        }],
        "",
        "",
    );
    let digest = serve.upload("fleet", &passthrough, "passthrough");
    let topics: Vec<String> = (0..PIPELINES)
        .map(|i| unique_topic(&format!("fleet{i}")))
        .collect();
    // Pipeline names are unique per run: positions outlive the test in the broker.
    let name = |i: usize| format!("p{i}-{}", topics[0].rsplit('-').next().unwrap());
    for (i, topic) in topics.iter().enumerate() {
        let config = pipeline_config(
            &table,
            topic,
            None,
            Extra {
                transform: "memory_limit_mib = 32",
                ..Extra::default()
            },
        );
        serve.create("fleet", &name(i), &config, &digest);
    }
    for i in 0..PIPELINES {
        serve.wait_caught_up("fleet", &name(i), 0, Duration::from_secs(120));
    }
    // Pausing one shows that states survive the restart too.
    let (status, _) = serve.call(
        "POST",
        &format!("/v1/tenants/fleet/pipelines/{}/pause", name(0)),
        Some(&serve.operator),
        None,
    );
    assert_eq!(status, 200);

    assert!(serve.stop(), "the service stops cleanly:\n{}", serve.log());
    deals_table(&table, &["append", "--start", "10", "--rows", "10"]);
    let restarted = Instant::now();
    serve.restart();
    for i in 1..PIPELINES {
        serve.wait_caught_up("fleet", &name(i), 1, Duration::from_secs(180));
    }
    eprintln!(
        "{} pipelines resumed and delivered a new version {:.1} s after the restart",
        PIPELINES - 1,
        restarted.elapsed().as_secs_f64()
    );
    assert_eq!(serve.status("fleet", &name(0))["state"], "paused");
    assert!(
        serve.log().contains("pipelines=50"),
        "the log says how many were restored"
    );

    for (i, topic) in topics.iter().enumerate() {
        let records = consume_all(topic);
        let expected = if i == 0 { 10 } else { 20 };
        assert_eq!(
            records.len(),
            expected,
            "pipeline p{i}: every change row once"
        );
        let mut values: Vec<_> = records.iter().map(|r| r.value.clone()).collect();
        values.sort();
        values.dedup();
        assert_eq!(values.len(), expected, "pipeline p{i}: no row repeated");
    }
}

#[test]
fn a_pipeline_created_just_before_a_crash_is_still_there_after_it() {
    let passthrough = transform_component("passthrough");
    let tables = tempfile::tempdir().unwrap();
    let table = tables.path().join("deals");
    deals_table(&table, &["create", "--rows", "5"]);
    let kafka = format!("\"bootstrap.servers\" = \"{}\"", kafka_bootstrap());
    let mut serve = Serve::tenant("crashy", &kafka);
    let digest = serve.upload("crashy", &passthrough, "passthrough");
    let topic = unique_topic("crashy");
    let name = format!("p-{}", topic.rsplit('-').next().unwrap());
    let config = pipeline_config(&table, &topic, None, Extra::default());
    serve.create("crashy", &name, &config, &digest);
    // SIGKILL: nothing is written on the way down.
    serve.kill();
    serve.restart();
    assert_eq!(serve.status("crashy", &name)["state"], "running");
    serve.wait_caught_up("crashy", &name, 0, Duration::from_secs(120));
    assert_eq!(consume_all(&topic).len(), 5, "every change row once");
}

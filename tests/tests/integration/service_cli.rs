//! The author loop on `sluice serve` through the `sluice` CLI: push, create, list,
//! status, logs, deploy (refused when the module fails its checks), rollback, pause,
//! resume, delete; and the metrics and health endpoints.

use std::time::Duration;

use serde_json::Value;
use sluice_tests::service::{Serve, pipeline_config};
use sluice_tests::{
    Extra, deals_table, kafka_bootstrap, transform_component, unique_topic, wasip2_component,
};

/// Runs `sluice <args>` against the service as `tenant`; returns (success, stdout,
/// stderr).
fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[test]
fn the_author_loop_works_from_the_command_line() {
    let blue = transform_component("tagged/blue");
    let green = transform_component("tagged/green");
    let behaviors = transform_component("misbehaving/behaviors");
    let hungry = wasip2_component("misbehaving/wasi-hungry");
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["scenario"]);
    let kafka = format!("\"bootstrap.servers\" = \"{}\"", kafka_bootstrap());
    let serve = Serve::tenant("dev", &kafka);

    let name = unique_topic("cli");
    let config = work.path().join("pipeline.toml");
    // behaviors panics on deal-0001 with these parameters; the tagged modules ignore them.
    std::fs::write(
        &config,
        pipeline_config(
            &table,
            &name,
            None,
            Extra {
                params: "behavior = \"panic\"\nbad_ids = \"deal-0001\"",
                ..Extra::default()
            },
        ),
    )
    .unwrap();
    let blue_path = blue.display().to_string();
    let (ok, out, err) = serve.cli(
        "dev",
        &[
            "pipeline",
            "create",
            &name,
            "--config",
            config.to_str().unwrap(),
            "--module",
            &blue_path,
        ],
    );
    assert!(ok, "{err}");
    let blue_digest = json(&out)["module"]["digest"].as_str().unwrap().to_string();
    serve.wait_caught_up("dev", &name, 4, Duration::from_secs(60));

    let (ok, out, err) = serve.cli("dev", &["pipeline", "list"]);
    assert!(ok, "{err}");
    assert!(
        out.contains(&name) && out.contains("running") && out.contains("blue@"),
        "{out}"
    );
    let (ok, out, _) = serve.cli("dev", &["pipeline", "logs", &name]);
    assert!(ok);
    assert!(
        out.lines().any(|l| json(l)["message"]
            .as_str()
            .unwrap()
            .starts_with("blue got ")),
        "{out}"
    );

    // A module whose init fails is refused, and the old one keeps running.
    let (ok, _, err) = serve.cli(
        "dev",
        &[
            "pipeline",
            "deploy",
            &name,
            "--module",
            hungry.to_str().unwrap(),
        ],
    );
    assert!(!ok);
    assert!(
        err.contains("422") && err.contains("refused its parameters"),
        "{err}"
    );
    // So is one that traps on a sample of the table.
    let (ok, _, err) = serve.cli(
        "dev",
        &[
            "pipeline",
            "deploy",
            &name,
            "--module",
            behaviors.to_str().unwrap(),
            "--sample-rows",
            "100",
        ],
    );
    assert!(!ok);
    assert!(
        err.contains("on a sample of the table") && err.contains("panic"),
        "{err}"
    );
    let status = serve.status("dev", &name);
    assert_eq!(
        (
            status["module"]["digest"].as_str(),
            status["state"].as_str()
        ),
        (Some(blue_digest.as_str()), Some("running")),
        "{status}"
    );

    let (ok, out, err) = serve.cli(
        "dev",
        &[
            "pipeline",
            "deploy",
            &name,
            "--module",
            green.to_str().unwrap(),
            "--sample-rows",
            "100",
        ],
    );
    assert!(ok, "{err}");
    let report = json(&out);
    assert_eq!(report["outcome"], "switched", "{report}");
    let (ok, out, err) = serve.cli("dev", &["pipeline", "rollback", &name]);
    assert!(ok, "{err}");
    assert_eq!(json(&out)["to"].as_str(), Some(blue_digest.as_str()));

    let (ok, out, err) = serve.cli("dev", &["pipeline", "pause", &name]);
    assert!(ok, "{err}");
    assert_eq!(json(&out)["state"], "paused");
    assert_eq!(
        json(&out)["position"]["version"],
        5,
        "a paused pipeline shows where it stopped"
    );
    let (ok, out, err) = serve.cli("dev", &["pipeline", "resume", &name]);
    assert!(ok, "{err}");
    assert_eq!(json(&out)["state"], "running");

    let (status, metrics) = serve.call("GET", "/metrics", Some(&serve.operator), None);
    assert_eq!(status, 200);
    let metrics = metrics.as_str().unwrap().to_string();
    for family in [
        "sluice_pipeline_rows_in_total",
        "sluice_pipeline_records_out_total",
        "sluice_pipeline_bytes_out_total",
        "sluice_pipeline_errors_total",
        "sluice_pipeline_lag_versions",
        "sluice_pipeline_batch_seconds_bucket",
        "sluice_pipeline_guest_seconds_total",
        "sluice_pipeline_swaps_total",
        "sluice_pipeline_state",
    ] {
        assert!(
            metrics.contains(&format!("{family}{{tenant=\"dev\",pipeline=\"{name}\"")),
            "{family} missing:\n{metrics}"
        );
    }
    assert!(
        metrics.contains(&format!(
            "sluice_pipeline_swaps_total{{tenant=\"dev\",pipeline=\"{name}\"}} 2"
        )),
        "{metrics}"
    );
    assert_eq!(serve.call("GET", "/healthz", None, None).0, 200);
    assert_eq!(serve.call("GET", "/readyz", None, None).0, 200);

    let (ok, _, err) = serve.cli("dev", &["pipeline", "delete", &name]);
    assert!(ok, "{err}");
    let (ok, out, _) = serve.cli("dev", &["pipeline", "list"]);
    assert!(ok && !out.contains(&name), "{out}");
    let (ok, out, _) = serve.cli("dev", &["module", "list"]);
    assert!(ok);
    assert_eq!(
        json(&out).as_array().unwrap().len(),
        4,
        "every pushed module is kept, refused ones too: {out}"
    );
}

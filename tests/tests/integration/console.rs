//! The web console in a real browser: Debian's chromium, driven by Playwright from
//! `host/console/web/tests/console.mjs`, against `sluice serve` with two tenants whose
//! pipelines stream real Delta tables into Kafka. The script signs in, checks that a
//! tenant sees only its own pipelines, pauses and resumes, deploys a module it uploads
//! and sees the swap, reads dead letters with their Delta coordinates, follows logs,
//! watches the throughput chart move, and checks that HTML a module puts into its logs
//! and dead letters shows as text. Screenshots go to `SLUICE_CONSOLE_SCREENSHOTS` when
//! set (how `docs/console/` is made).

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest as _, Sha256};
use sluice_tests::service::{Serve, TenantSpec, pipeline_config};
use sluice_tests::{
    Extra, deals_table, kafka_bootstrap, repo_root, sluice_binary, transform_component,
    unique_topic,
};

/// Markup a module writes into its rejection reasons (so into its logs and dead
/// letters): the browser must show it as text, never run it.
const INJECTED: &str = r#"<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>"#;

/// Deals the rejecting module refuses.
const BAD_IDS: [&str; 2] = ["deal-0003", "deal-0007"];

/// A pipeline name of its own for this run (positions outlive the test in the broker),
/// short enough to read in the screenshots.
fn short_name(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{prefix}-{:06x}", (nanos ^ std::process::id()) & 0xff_ffff)
}

fn chromium() -> PathBuf {
    let path = std::env::var_os("SLUICE_CHROMIUM")
        .map_or_else(|| "/usr/bin/chromium".into(), PathBuf::from);
    assert!(
        path.exists(),
        "no browser at {}: scripts/stores.sh install puts Debian's chromium there (or set SLUICE_CHROMIUM)",
        path.display()
    );
    path
}

#[test]
fn a_tenant_watches_and_steers_its_pipelines_in_the_console() {
    let browser = chromium();
    let blue = transform_component("tagged/blue");
    let green = transform_component("tagged/green");
    let behaviors = transform_component("misbehaving/behaviors");
    let tables = tempfile::tempdir().unwrap();
    let streaming_table = tables.path().join("deals");
    deals_table(&streaming_table, &["create", "--rows", "2000"]);
    let rejected_table = tables.path().join("poisoned");
    deals_table(&rejected_table, &["create", "--rows", "10"]);

    let kafka = format!("\"bootstrap.servers\" = \"{}\"", kafka_bootstrap());
    let tenant = |name| TenantSpec {
        name,
        limits: "",
        kafka: &kafka,
    };
    let serve = Serve::start(&[tenant("acme"), tenant("globex")], "", "");
    let blue_digest = serve.upload("acme", &blue, "blue");
    let behaviors_digest = serve.upload("acme", &behaviors, "behaviors");
    let globex_digest = serve.upload("globex", &blue, "ledger");

    let streaming = &short_name("orders");
    let config = pipeline_config(
        &streaming_table,
        &unique_topic("console-stream"),
        None,
        Extra {
            source: "batch_rows = 100",
            // Keyed state: the module counts rows, and the page shows its state.
            params: r#"count = "true""#,
            ..Extra::default()
        },
    ) + "\n[state]\n";
    serve.create("acme", streaming, &config, &blue_digest);
    let rejecting = &short_name("poisoned");
    let params = format!(
        "behavior = \"reject\"\nbad_ids = \"{}\"\nnote = '{INJECTED}'",
        BAD_IDS.join(",")
    );
    let letters_topic = unique_topic("console-letters");
    let transform = format!("on_error = \"dead-letter\"\ndead_letter_topic = \"{letters_topic}\"");
    let config = pipeline_config(
        &rejected_table,
        &unique_topic("console-rejecting"),
        None,
        Extra {
            transform: &transform,
            params: &params,
            ..Extra::default()
        },
    );
    serve.create("acme", rejecting, &config, &behaviors_digest);
    let hidden = &short_name("ledger");
    let config = pipeline_config(
        &streaming_table,
        &unique_topic("console-globex"),
        None,
        Extra::default(),
    );
    serve.create("globex", hidden, &config, &globex_digest);
    serve.wait_caught_up("acme", rejecting, 0, Duration::from_secs(60));

    // The API the console reads: each bad deal's letter, with its Delta coordinates.
    let (status, letters) = serve.call(
        "GET",
        &format!("/v1/tenants/acme/pipelines/{rejecting}/dead-letters"),
        Some(serve.token("acme")),
        None,
    );
    assert_eq!(status, 200, "{letters}");
    assert_eq!(letters["topic"], letters_topic.as_str());
    let mut expected = Vec::new();
    let mut refused_ids = Vec::new();
    for letter in letters["letters"].as_array().unwrap() {
        let body = &letter["letter"];
        let (version, row) = (
            body["version"].as_u64().unwrap(),
            body["row"].as_u64().unwrap(),
        );
        assert!(
            letter["key"]
                .as_str()
                .unwrap()
                .ends_with(&format!("@{version}#{row}")),
            "{letter}"
        );
        assert!(
            body["error"].as_str().unwrap().ends_with(INJECTED),
            "{letter}"
        );
        refused_ids.push(body["data"]["documentId"].as_str().unwrap().to_string());
        expected.push(serde_json::json!({ "version": version, "row": row }));
    }
    refused_ids.sort();
    assert_eq!(refused_ids, BAD_IDS, "{letters}");
    let (status, _) = serve.call(
        "GET",
        &format!("/v1/tenants/acme/pipelines/{rejecting}/dead-letters"),
        Some(serve.token("globex")),
        None,
    );
    assert_eq!(
        status, 403,
        "another tenant may not read acme's dead letters"
    );
    // The CLI prints the same letters, one per line.
    let printed = Command::new(sluice_binary())
        .args(["pipeline", "dead-letters", rejecting.as_str()])
        .env("SLUICE_SERVER", &serve.url)
        .env("SLUICE_TENANT", "acme")
        .env("SLUICE_TOKEN", serve.token("acme"))
        .output()
        .expect("sluice runs");
    assert!(printed.status.success(), "{printed:?}");
    let printed: Vec<Value> = String::from_utf8_lossy(&printed.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(&printed, letters["letters"].as_array().unwrap());

    // New versions keep arriving while the browser watches, so the chart has to move.
    let appending = Arc::new(AtomicBool::new(true));
    let appender = {
        let (appending, table) = (appending.clone(), streaming_table.clone());
        std::thread::spawn(move || {
            let mut start = 2_000;
            while appending.load(Ordering::Relaxed) {
                deals_table(
                    &table,
                    &["appends", "--start", &start.to_string(), "--rows", "500"],
                );
                start += 500;
                std::thread::sleep(Duration::from_millis(500));
            }
        })
    };
    let screenshots = std::env::var_os("SLUICE_CONSOLE_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| tables.path().join("screenshots"));
    let replay_topic = unique_topic("console-replay");
    let script = repo_root().join("host/console/web/tests/console.mjs");
    let output = Command::new("node")
        .arg(&script)
        .env("SLUICE_CONSOLE_URL", format!("{}/console/", serve.url))
        .env("SLUICE_CHROMIUM", &browser)
        .env("SLUICE_TENANT", "acme")
        .env("SLUICE_TENANT_TOKEN", serve.token("acme"))
        .env("SLUICE_OTHER_TENANT", "globex")
        .env("SLUICE_OTHER_PIPELINE", hidden)
        .env("SLUICE_OPERATOR_TOKEN", &serve.operator)
        .env("SLUICE_STREAMING_PIPELINE", streaming)
        .env("SLUICE_REJECTING_PIPELINE", rejecting)
        .env("SLUICE_DEPLOY_MODULE_PATH", &green)
        .env("SLUICE_EXPECTED_LETTERS", Value::from(expected).to_string())
        .env("SLUICE_INJECTED", INJECTED)
        .env("SLUICE_SCREENSHOTS", &screenshots)
        .env("SLUICE_REPLAY_TOPIC", &replay_topic)
        .output()
        .expect("node runs");
    appending.store(false, Ordering::Relaxed);
    appender.join().unwrap();
    assert!(
        output.status.success(),
        // The browser's steps come last: a long failure is read from its end.
        "the browser test failed ({}); service log:\n{}\nbrowser steps:\n{}\n{}",
        output.status,
        serve.log(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("{}", String::from_utf8_lossy(&output.stdout));

    // What the browser did, as the API sees it: the module it uploaded runs.
    let green_digest = format!("{:x}", Sha256::digest(std::fs::read(&green).unwrap()));
    let status = serve.status("acme", streaming);
    assert_eq!(
        status["module"]["digest"],
        green_digest.as_str(),
        "{status:#}"
    );
    assert_eq!(
        status["last_swap"]["to"],
        green_digest.as_str(),
        "{status:#}"
    );
    assert_eq!(status["module"]["language"], "rust", "{status:#}");
    assert_eq!(status["state"], "running", "{status:#}");
    // The replay the browser started sent the streaming table's first versions again.
    assert!(
        !sluice_tests::consume_all(&replay_topic).is_empty(),
        "the replay sent nothing"
    );
    for page in [
        "sign-in",
        "pipelines",
        "pipeline",
        "dead-letters",
        "modules",
        "operator",
        "shadow",
        "replay",
    ] {
        assert!(
            screenshots.join(format!("{page}.png")).exists(),
            "no screenshot of the {page} page"
        );
    }
}

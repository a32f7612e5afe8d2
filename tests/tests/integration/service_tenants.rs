//! `sluice serve` with several tenants: a tenant's token reaches only its own modules
//! and pipelines, no endpoint or log shows a secret, limits refuse clearly, and a
//! module's records stay within the tenant's topics.

use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::producer::{BaseProducer, Producer};
use serde_json::Value;
use sluice_tests::service::{Serve, TenantSpec, pipeline_config};
use sluice_tests::{
    Extra, consume_all, deals_table, kafka_bootstrap, transform_component, unique_topic,
};

fn scram_bootstrap() -> String {
    std::env::var("SLUICE_TEST_KAFKA_SCRAM")
        .expect("SLUICE_TEST_KAFKA_SCRAM is set by scripts/test.sh")
}

fn scram_password_file() -> String {
    std::env::var("SLUICE_TEST_KAFKA_SCRAM_PASSWORD_FILE").expect("set by scripts/test.sh")
}

#[test]
fn tenants_reach_only_their_own_and_secrets_stay_hidden() {
    let passthrough = transform_component("passthrough");
    let blue = transform_component("tagged/blue");
    let tables = tempfile::tempdir().unwrap();
    let table = tables.path().join("deals");
    deals_table(&table, &["scenario"]);

    let password = std::fs::read_to_string(scram_password_file())
        .unwrap()
        .trim()
        .to_string();
    // acme's credentials live in the operator's config; acme's pipelines use them.
    let acme_kafka = format!(
        "\"bootstrap.servers\" = \"{}\"\n\"security.protocol\" = \"SASL_PLAINTEXT\"\n\"sasl.mechanism\" = \"SCRAM-SHA-256\"\n\"sasl.username\" = \"sluice\"\n\"sasl.password\" = \"${{file:{}}}\"\n",
        scram_bootstrap(),
        scram_password_file()
    );
    let globex_kafka = format!("\"bootstrap.servers\" = \"{}\"", kafka_bootstrap());
    let serve = Serve::start(
        &[
            TenantSpec {
                name: "acme",
                limits: "max_pipelines = 2\nmax_memory_mib = 128\nmax_module_mib = 3",
                kafka: &acme_kafka,
            },
            TenantSpec {
                name: "globex",
                limits: "",
                kafka: &globex_kafka,
            },
        ],
        "",
        "",
    );
    let acme = serve.token("acme").to_string();
    let globex = serve.token("globex").to_string();
    let mut seen = Vec::new();
    let mut call = |method: &str, path: &str, token: Option<&str>, body: Option<Value>| {
        let (status, answer) = serve.call(method, path, token, body);
        seen.push(answer.to_string());
        (status, answer)
    };

    let digest = serve.upload("acme", &passthrough, "passthrough");
    let blue_digest = serve.upload("acme", &blue, "blue");
    serve.upload("globex", &passthrough, "passthrough");
    let topic = unique_topic("tenant-acme");
    // Pipeline names are unique per run: positions outlive the test in the broker.
    let deals = topic.clone();
    let config = pipeline_config(&table, &topic, None, Extra::default());
    let (status, created) = call(
        "PUT",
        &format!("/v1/tenants/acme/pipelines/{deals}"),
        Some(&acme),
        Some(serde_json::json!({ "config": config, "module": digest })),
    );
    assert_eq!(status, 201, "{created}");
    let done = serve.wait_caught_up("acme", &deals, 4, Duration::from_secs(60));
    assert_eq!(done["state"], "running", "{done}");
    assert_eq!(
        consume_all(&topic).len(),
        39,
        "acme's pipeline delivered through SCRAM"
    );

    // globex's token reaches none of acme's things.
    let p = &format!("/v1/tenants/acme/pipelines/{deals}");
    let deploy = Some(serde_json::json!({ "module": blue_digest }));
    for (method, path, body) in [
        ("GET", "/v1/tenants/acme/modules".to_string(), None),
        ("GET", "/v1/tenants/acme/pipelines".to_string(), None),
        ("GET", p.to_string(), None),
        (
            "PUT",
            "/v1/tenants/acme/pipelines/other".to_string(),
            Some(serde_json::json!({ "config": config, "module": digest })),
        ),
        ("POST", format!("{p}/deploy"), deploy.clone()),
        ("POST", format!("{p}/rollback"), None),
        ("POST", format!("{p}/pause"), None),
        ("POST", format!("{p}/resume"), None),
        ("GET", format!("{p}/logs"), None),
        ("DELETE", p.to_string(), None),
    ] {
        let (status, answer) = call(method, &path, Some(&globex), body.clone());
        assert_eq!(status, 403, "{method} {path} as globex: {answer}");
        let (status, _) = call(method, &path, None, body.clone());
        assert_eq!(status, 401, "{method} {path} without a token");
        let (status, _) = call(method, &path, Some("not-a-token-at-all"), body);
        assert_eq!(status, 401, "{method} {path} with a wrong token");
    }
    let (status, answer) = call("GET", "/metrics", Some(&globex), None);
    assert_eq!(status, 403, "metrics are the operator's: {answer}");
    // Nor can globex use a module only acme uploaded.
    let globex_config = pipeline_config(
        &table,
        &unique_topic("tenant-globex"),
        None,
        Extra {
            kafka: "\"ssl.key.password\" = \"globex-own-secret\"",
            ..Extra::default()
        },
    );
    let (status, answer) = call(
        "PUT",
        "/v1/tenants/globex/pipelines/copy",
        Some(&globex),
        Some(serde_json::json!({ "config": globex_config, "module": blue_digest })),
    );
    assert_eq!(status, 404, "{answer}");
    let (status, answer) = call("GET", "/v1/tenants/globex/pipelines", Some(&globex), None);
    assert_eq!(
        (status, answer.as_array().map(Vec::len)),
        (200, Some(0)),
        "{answer}"
    );
    let (status, answer) = call(
        "GET",
        "/v1/tenants/acme/pipelines",
        Some(&serve.operator),
        None,
    );
    assert_eq!(
        (status, answer.as_array().map(Vec::len)),
        (200, Some(1)),
        "{answer}"
    );
    // A secret globex wrote into its own config is not shown back.
    let globex_digest = serve.upload("globex", &passthrough, "passthrough");
    let (status, answer) = call(
        "PUT",
        &format!("/v1/tenants/globex/pipelines/{}", unique_topic("own")),
        Some(&globex),
        Some(serde_json::json!({ "config": globex_config, "module": globex_digest })),
    );
    assert_eq!(status, 201, "{answer}");
    assert!(
        answer["config"].as_str().unwrap().contains("<redacted>"),
        "{answer}"
    );
    // A config may not read the host's files or environment.
    let sneaky = pipeline_config(
        &table,
        &unique_topic("sneaky"),
        None,
        Extra {
            kafka: "\"client.id\" = \"${file:/etc/hostname}\"",
            ..Extra::default()
        },
    );
    let (status, answer) = call(
        "PUT",
        "/v1/tenants/globex/pipelines/sneaky",
        Some(&globex),
        Some(serde_json::json!({ "config": sneaky, "module": globex_digest })),
    );
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("reference"),
        "{answer}"
    );

    // Limits refuse with the reason.
    let greedy = pipeline_config(
        &table,
        &unique_topic("greedy"),
        None,
        Extra {
            transform: "memory_limit_mib = 512",
            ..Extra::default()
        },
    );
    let (status, answer) = call(
        "PUT",
        "/v1/tenants/acme/pipelines/greedy",
        Some(&acme),
        Some(serde_json::json!({ "config": greedy, "module": digest })),
    );
    assert_eq!(status, 422, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("at most 128"),
        "{answer}"
    );
    let second = pipeline_config(&table, &unique_topic("second"), None, Extra::default());
    let (status, answer) = call(
        "PUT",
        &format!("/v1/tenants/acme/pipelines/{}", unique_topic("second")),
        Some(&acme),
        Some(serde_json::json!({ "config": second, "module": digest })),
    );
    assert_eq!(status, 201, "{answer}");
    let (status, answer) = call(
        "PUT",
        "/v1/tenants/acme/pipelines/third",
        Some(&acme),
        Some(serde_json::json!({ "config": second, "module": digest })),
    );
    assert_eq!(status, 422, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("2 pipelines, its limit"),
        "{answer}"
    );
    let big = tables.path().join("big.wasm");
    let mut bytes = std::fs::read(&passthrough).unwrap();
    bytes.resize(4 * 1024 * 1024, 0);
    std::fs::write(&big, bytes).unwrap();
    let response = ureq::post(format!("{}/v1/tenants/acme/modules?name=big", serve.url))
        .config()
        .http_status_as_error(false)
        .build()
        .header("Authorization", &format!("Bearer {acme}"))
        .send(&std::fs::read(&big).unwrap()[..])
        .unwrap();
    assert_eq!(response.status(), 422);
    let text = response.into_body().read_to_string().unwrap();
    assert!(text.contains("at most 3 MiB"), "{text}");

    // Every answer, the metrics and the service's log are free of secrets.
    let (_, metrics) = call("GET", "/metrics", Some(&serve.operator), None);
    assert!(
        metrics.as_str().unwrap().contains(&format!(
            "sluice_pipeline_rows_in_total{{tenant=\"acme\",pipeline=\"{deals}\"}} 39"
        )),
        "{metrics}"
    );
    call("GET", &format!("{p}/logs"), Some(&acme), None);
    for tenant in ["acme", "globex"] {
        call(
            "GET",
            &format!("/v1/tenants/{tenant}/pipelines"),
            Some(&serve.operator),
            None,
        );
    }
    let log = serve.log();
    for text in seen.iter().chain([&log]) {
        assert!(!text.contains(&password), "a secret leaked: {text}");
        assert!(
            !text.contains("globex-own-secret"),
            "a secret leaked: {text}"
        );
    }
}

/// Runs `sluice tenant ...` against `serve` with the operator's token.
fn tenant_cli(serve: &Serve, args: &[&str]) -> std::process::Output {
    std::process::Command::new(sluice_tests::sluice_binary())
        .arg("tenant")
        .args(args)
        .env("SLUICE_SERVER", &serve.url)
        .env("SLUICE_TOKEN", &serve.operator)
        .output()
        .expect("sluice runs")
}

#[test]
fn a_tenant_put_through_the_api_runs_pipelines_survives_a_restart_and_goes() {
    let passthrough = transform_component("passthrough");
    let tables = tempfile::tempdir().unwrap();
    let table = tables.path().join("deals");
    deals_table(&table, &["scenario"]);
    let mut serve = Serve::start(
        &[TenantSpec {
            name: "acme",
            limits: "",
            kafka: &format!("\"bootstrap.servers\" = \"{}\"", kafka_bootstrap()),
        }],
        "",
        "",
    );
    let operator = serve.operator.clone();
    let token = format!("initech-{}-secret-token", std::process::id());
    std::fs::write(serve.dir.path().join("initech.token"), &token).unwrap();
    std::fs::write(
        serve.dir.path().join("initech.toml"),
        format!(
            "max_pipelines = 1\n[kafka]\n\"bootstrap.servers\" = \"{}\"\n",
            kafka_bootstrap()
        ),
    )
    .unwrap();
    let dir = serve.dir.path().to_path_buf();
    let put = |serve: &Serve, name: &str| {
        tenant_cli(
            serve,
            &[
                "put",
                name,
                "--config",
                dir.join("initech.toml").to_str().unwrap(),
                "--tenant-token-file",
                dir.join("initech.token").to_str().unwrap(),
            ],
        )
    };
    let out = put(&serve, "initech");
    assert!(out.status.success(), "{out:?}");
    serve.tokens.insert("initech".into(), token.clone());
    // The same token for a second tenant, or over a tenant of the config file, is refused.
    let out = put(&serve, "initech-two");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("another caller's"),
        "{out:?}"
    );
    let out = put(&serve, "acme");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("config file"),
        "{out:?}"
    );
    let (status, body) = serve.call(
        "PUT",
        "/v1/tenants/initech-two",
        Some(&operator),
        Some(serde_json::json!({ "token_file": "/etc/passwd" })),
    );
    assert_eq!(status, 400, "{body}");
    // Only the operator manages tenants; a tenant sees its own settings.
    let (status, _) = serve.call(
        "PUT",
        "/v1/tenants/initech-two",
        Some(&token),
        Some(serde_json::json!({ "token_sha256": "00".repeat(32) })),
    );
    assert_eq!(status, 403);
    let (status, own) = serve.call("GET", "/v1/tenants/initech", Some(&token), None);
    assert_eq!(status, 200, "{own}");
    assert_eq!(own["source"], "api");
    assert_eq!(own["settings"]["max_pipelines"], 1);
    assert!(own["settings"].get("token_sha256").is_none(), "{own}");

    let digest = serve.upload("initech", &passthrough, "passthrough");
    let topic = unique_topic("tenant-initech");
    let config = pipeline_config(&table, &topic, None, Extra::default());
    serve.create("initech", &topic, &config, &digest);
    serve.wait_caught_up("initech", &topic, 4, Duration::from_secs(60));
    assert_eq!(consume_all(&topic).len(), 39);

    // The tenant and its pipeline come back after a restart.
    assert!(serve.stop());
    serve.restart();
    let list = tenant_cli(&serve, &["list"]);
    let listed = String::from_utf8_lossy(&list.stdout);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("initech ") && l.contains("api")),
        "{listed}"
    );
    let status = serve.status("initech", &topic);
    assert_eq!(status["state"], "running", "{status}");

    // A tenant with pipelines stays; without, it goes and its token with it.
    let out = tenant_cli(&serve, &["delete", "initech"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("delete them first"),
        "{out:?}"
    );
    let (status, _) = serve.call(
        "DELETE",
        &format!("/v1/tenants/initech/pipelines/{topic}"),
        Some(&token),
        None,
    );
    assert_eq!(status, 204);
    let out = tenant_cli(&serve, &["delete", "initech"]);
    assert!(out.status.success(), "{out:?}");
    let (status, _) = serve.call("GET", "/v1/tenants/initech/pipelines", Some(&token), None);
    assert_eq!(status, 401);
    assert_eq!(consume_all(&topic).len(), 39, "nothing was delivered twice");
}

/// A module may name a topic per record, and those topics are held to the tenant's
/// `topic_prefix` record by record (issue 35: a tenant whose prefix was `evil.` wrote to
/// 3,000 topics named `acme.from-evil-N`, which the broker created inside another
/// tenant's prefix). The rows whose records name a foreign topic become dead letters
/// that name the topic and the rule; the topic is never created; the other rows arrive.
#[test]
fn records_naming_another_tenants_topic_fail_their_rows_and_create_no_topic() {
    let behaviors = transform_component("misbehaving/behaviors");
    let tables = tempfile::tempdir().unwrap();
    let table = tables.path().join("deals");
    deals_table(&table, &["create", "--rows", "30"]);
    let serve = Serve::start(
        &[TenantSpec {
            name: "evil",
            limits: "topic_prefix = \"evil.\"",
            kafka: &format!("\"bootstrap.servers\" = \"{}\"", kafka_bootstrap()),
        }],
        "",
        "",
    );
    let digest = serve.upload("evil", &behaviors, "behaviors");
    let topic = unique_topic("evil.deals");
    let dead = format!("{topic}-dead");
    let foreign = unique_topic("acme.from-evil");
    let params = format!(
        "behavior = \"foreign-topic\"\nbad_ids = \"deal-0007,deal-0021\"\ntopic = \"{foreign}\""
    );
    let transform = format!("on_error = \"dead-letter\"\ndead_letter_topic = \"{dead}\"");
    let config = pipeline_config(
        &table,
        &topic,
        None,
        Extra {
            params: &params,
            transform: &transform,
            ..Extra::default()
        },
    );
    let name = unique_topic("steal");
    serve.create("evil", &name, &config, &digest);
    let done = serve.wait_caught_up("evil", &name, 0, Duration::from_secs(60));
    assert_eq!(done["state"], "running", "{done}");

    let keys: Vec<String> = consume_all(&topic)
        .into_iter()
        .map(|r| r.key.unwrap_or_default())
        .collect();
    let good: Vec<String> = (0..30)
        .filter(|i| *i != 7 && *i != 21)
        .map(|i| format!("deal-{i:04}"))
        .collect();
    assert_eq!(keys, good, "the other rows arrive, in order");
    let letters = consume_all(&dead);
    assert_eq!(letters.len(), 2, "one dead letter per row naming the topic");
    for letter in &letters {
        let value: Value = serde_json::from_str(letter.value.as_deref().unwrap()).unwrap();
        let error = value["error"].as_str().unwrap();
        assert!(
            error.contains(&format!("`{foreign}`")) && error.contains("topic_prefix `evil.`"),
            "{value}"
        );
    }
    // Listing every topic asks the broker to create none.
    let client: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", kafka_bootstrap())
        .create()
        .unwrap();
    let metadata = client
        .client()
        .fetch_metadata(None, Duration::from_secs(10))
        .unwrap();
    let names: Vec<&str> = metadata.topics().iter().map(|t| t.name()).collect();
    assert!(names.contains(&topic.as_str()), "{names:?}");
    assert!(
        !names.contains(&foreign.as_str()),
        "the foreign topic was created"
    );
}

//! Kafka security as users run it, against the local broker's listeners
//! (scripts/kafka.sh): the motivating scenario delivers exactly once over SASL/SCRAM,
//! TLS, SASL_SSL with PLAIN (spelled as a Databricks notebook has it) and SCRAM-SHA-512,
//! mutual TLS, and OAUTHBEARER with tokens from a real OIDC provider that expire during
//! the run; each way it goes wrong ends at once with its own message. A topic the
//! principal may not write stops the pipeline with what to grant.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sluice_tests::service::{Serve, pipeline_config};
use sluice_tests::{
    Consumed, Extra, PipelineFiles, consume_all, create_topic, deals_table, kafka_bootstrap,
    kafka_listener, kafka_run_file, oidc_url, run_expecting_failure, run_to_latest, sluice_check,
    spawn_sluice_logged, transform_component, unique_topic,
};

fn scram_bootstrap() -> String {
    std::env::var("SLUICE_TEST_KAFKA_SCRAM")
        .expect("SLUICE_TEST_KAFKA_SCRAM is set by scripts/test.sh")
}

fn scram_properties(password_file: &str) -> String {
    format!(
        "\"security.protocol\" = \"SASL_PLAINTEXT\"\n\"sasl.mechanism\" = \"SCRAM-SHA-256\"\n\"sasl.username\" = \"sluice\"\n\"sasl.password\" = \"${{file:{password_file}}}\"\n"
    )
}

#[test]
fn scram_authenticated_pipeline_delivers_every_change() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["scenario"]);
    let password_file =
        std::env::var("SLUICE_TEST_KAFKA_SCRAM_PASSWORD_FILE").expect("set by scripts/test.sh");
    let kafka = scram_properties(&password_file);
    let topic = unique_topic("scram");
    let module = transform_component("gold-deals");
    let files = PipelineFiles::new(
        &table,
        &module,
        &topic,
        &scram_bootstrap(),
        Extra {
            kafka: &kafka,
            ..Extra::default()
        },
    );
    let stderr = run_to_latest(&files.config);
    assert!(
        !stderr.contains(
            &std::fs::read_to_string(&password_file)
                .unwrap()
                .trim()
                .to_string()
        ),
        "the password was logged"
    );
    let records = consume_all(&topic);
    assert_eq!(
        records.len(),
        36,
        "{:?}",
        records.iter().map(Consumed::line).collect::<Vec<_>>()
    );
}

fn tls_bootstrap() -> String {
    std::env::var("SLUICE_TEST_KAFKA_TLS").expect("SLUICE_TEST_KAFKA_TLS is set by scripts/test.sh")
}

#[test]
fn tls_pipeline_trusting_the_test_ca_delivers_every_change() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["scenario"]);
    let ca = std::env::var("SLUICE_TEST_KAFKA_TLS_CA").expect("set by scripts/test.sh");
    let kafka = format!("\"security.protocol\" = \"SSL\"\n\"ssl.ca.location\" = \"{ca}\"\n");
    let topic = unique_topic("tls");
    let files = PipelineFiles::new(
        &table,
        &transform_component("gold-deals"),
        &topic,
        &tls_bootstrap(),
        Extra {
            kafka: &kafka,
            ..Extra::default()
        },
    );
    run_to_latest(&files.config);
    assert_eq!(consume_all(&topic).len(), 36);
}

fn scram_password_file() -> String {
    std::env::var("SLUICE_TEST_KAFKA_SCRAM_PASSWORD_FILE").expect("set by scripts/test.sh")
}

/// A three-deal table streamed through `passthrough` into `topic` at the SASL listener
/// with these `[sink.kafka]` lines.
fn sasl_pipeline(topic: &str, kafka: &str) -> (tempfile::TempDir, PipelineFiles) {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "3"]);
    let files = PipelineFiles::new(
        &table,
        &transform_component("passthrough"),
        topic,
        &scram_bootstrap(),
        Extra {
            kafka,
            ..Extra::default()
        },
    );
    (work, files)
}

#[test]
fn a_topic_the_principal_may_not_write_is_named_with_what_to_grant() {
    // scripts/kafka.sh lets the SCRAM user see but not write topics named `denied-*`.
    let topic = unique_topic("denied");
    create_topic(&kafka_bootstrap(), &topic, 1);
    let (_work, files) = sasl_pipeline(&topic, &scram_properties(&scram_password_file()));
    let stderr = run_expecting_failure(&files.config);
    for text in [
        &format!("for topic `{topic}`"),
        "change row 0 of table version 0",
        "Topic authorization failed",
        "Grant the pipeline's principal WRITE",
    ] {
        assert!(stderr.contains(text), "stderr lacks {text:?}: {stderr}");
    }
    assert_eq!(
        files.position(),
        Some((0, 0)),
        "the position stays at the start"
    );
}

#[test]
fn a_topic_the_principal_may_not_see_is_named_at_start() {
    // scripts/kafka.sh denies the SCRAM user everything on topics named `hidden-*`.
    let topic = unique_topic("hidden");
    create_topic(&kafka_bootstrap(), &topic, 1);
    let (_work, files) = sasl_pipeline(&topic, &scram_properties(&scram_password_file()));
    let started = std::time::Instant::now();
    let stderr = run_expecting_failure(&files.config);
    for text in [
        &format!("see topic `{topic}`"),
        "Grant the principal DESCRIBE and WRITE",
    ] {
        assert!(stderr.contains(text), "stderr lacks {text:?}: {stderr}");
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "the refusal is reported without waiting for connect_timeout"
    );
}

#[test]
fn a_spark_style_jaas_login_delivers_without_logging_the_password() {
    let password = std::fs::read_to_string(scram_password_file())
        .unwrap()
        .trim()
        .to_string();
    // The motivating case's settings, as a Spark job has them (PLAIN over plaintext here).
    let kafka = format!(
        "\"security.protocol\" = \"SASL_PLAINTEXT\"\n\"sasl.mechanism\" = \"PLAIN\"\n\"sasl.jaas.config\" = 'org.apache.kafka.common.security.plain.PlainLoginModule required username=\"sluice\" password=\"{password}\";'\n"
    );
    let topic = unique_topic("jaas");
    let (_work, files) = sasl_pipeline(&topic, &kafka);
    let stderr = run_to_latest(&files.config);
    assert!(!stderr.contains(&password), "the password was logged");
    assert_eq!(consume_all(&topic).len(), 3);
}

/// The motivating scenario (appends, UPDATE, DELETE, MERGE) through gold-deals into a new
/// topic at `bootstrap` with these `[sink.kafka]` lines: exactly the 36 records it makes,
/// and no `secret` in the log. Returns the table's directory and the pipeline's files.
fn scenario_delivers_exactly_once(
    prefix: &str,
    bootstrap: &str,
    kafka: &str,
    secret: &str,
) -> (tempfile::TempDir, PipelineFiles) {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["scenario"]);
    let topic = unique_topic(prefix);
    let files = PipelineFiles::new(
        &table,
        &transform_component("gold-deals"),
        &topic,
        bootstrap,
        Extra {
            kafka,
            ..Extra::default()
        },
    );
    let stderr = run_to_latest(&files.config);
    assert!(!stderr.contains(secret), "the secret was logged: {stderr}");
    let records = consume_all(&topic);
    let lines: Vec<String> = records.iter().map(Consumed::line).collect();
    assert_eq!(records.len(), 36, "{lines:?}");
    let distinct: std::collections::BTreeSet<&String> = lines.iter().collect();
    assert_eq!(distinct.len(), 36, "no record twice: {lines:?}");
    (work, files)
}

fn scram_password() -> String {
    std::fs::read_to_string(scram_password_file())
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn sasl_ssl_plain_spelled_as_a_databricks_notebook_delivers_exactly_once() {
    // The motivating case's settings as pasted from the Spark job, with the JAAS login
    // (and so the API secret) in a file.
    let secrets = tempfile::tempdir().unwrap();
    let jaas = secrets.path().join("jaas");
    std::fs::write(
        &jaas,
        format!(
            "kafkashaded.org.apache.kafka.common.security.plain.PlainLoginModule required username=\"sluice\" password=\"{}\";\n",
            scram_password()
        ),
    )
    .unwrap();
    let kafka = format!(
        "\"kafka.security.protocol\" = \"SASL_SSL\"\n\"kafka.sasl.mechanism\" = \"PLAIN\"\n\"kafka.sasl.jaas.config\" = \"${{file:{}}}\"\n\"kafka.ssl.truststore.location\" = \"{}\"\n\"kafka.ssl.truststore.type\" = \"PEM\"\n",
        jaas.display(),
        kafka_run_file("tls/ca.crt")
    );
    let (_work, files) = scenario_delivers_exactly_once(
        "sasl-ssl-plain",
        &kafka_listener("SASL_SSL"),
        &kafka,
        &scram_password(),
    );
    let (ok, out) = sluice_check(&files.config);
    assert!(ok, "{out}");
    for text in [
        "`kafka.sasl.jaas.config` is Spark's spelling of `sasl.jaas.config`",
        "`sasl.jaas.config` (PlainLoginModule) became librdkafka's sasl.* properties",
        &format!(
            "Kafka at {} over SASL_SSL with PLAIN as `sluice` answers",
            kafka_listener("SASL_SSL")
        ),
    ] {
        assert!(out.contains(text), "check lacks {text:?}: {out}");
    }
    assert!(!out.contains(&scram_password()), "{out}");
}

#[test]
fn sasl_ssl_scram_sha_512_delivers_exactly_once() {
    let kafka = format!(
        "\"security.protocol\" = \"SASL_SSL\"\n\"sasl.mechanism\" = \"SCRAM-SHA-512\"\n\"sasl.username\" = \"sluice\"\n\"sasl.password\" = \"${{file:{}}}\"\n\"ssl.ca.location\" = \"{}\"\n",
        scram_password_file(),
        kafka_run_file("tls/ca.crt")
    );
    scenario_delivers_exactly_once(
        "sasl-ssl-scram",
        &kafka_listener("SASL_SSL"),
        &kafka,
        &scram_password(),
    );
}

#[test]
fn mutual_tls_with_a_client_certificate_delivers_exactly_once() {
    let kafka = format!(
        "\"security.protocol\" = \"SSL\"\n\"ssl.ca.location\" = \"{}\"\n\"ssl.certificate.location\" = \"{}\"\n\"ssl.key.location\" = \"{}\"\n",
        kafka_run_file("tls/ca.crt"),
        kafka_run_file("tls/client.crt"),
        kafka_run_file("tls/client.key"),
    );
    let key = std::fs::read_to_string(kafka_run_file("tls/client.key")).unwrap();
    let key_body = key.lines().nth(1).unwrap().to_string();
    scenario_delivers_exactly_once("mtls", &kafka_listener("MTLS"), &kafka, &key_body);
}

/// `[sink.kafka]` lines for the OAUTHBEARER listener with tokens from `issuer`.
fn oauth_properties(issuer: &str, secret_file: &str, scope: &str) -> String {
    format!(
        "\"security.protocol\" = \"SASL_SSL\"\n\"sasl.mechanism\" = \"OAUTHBEARER\"\n\"sasl.oauthbearer.method\" = \"oidc\"\n\"sasl.oauthbearer.token.endpoint.url\" = \"{}/{issuer}/token\"\n\"sasl.oauthbearer.client.id\" = \"sluice\"\n\"sasl.oauthbearer.client.secret\" = \"${{file:{secret_file}}}\"\n\"sasl.oauthbearer.scope\" = \"{scope}\"\n\"ssl.ca.location\" = \"{}\"\n",
        oidc_url(),
        kafka_run_file("tls/ca.crt")
    )
}

/// Token requests the OIDC server logged for issuer `kafka` with `scope` in their body.
fn token_requests(scope: &str) -> usize {
    let url = format!("originalUrl={}/kafka/token", oidc_url());
    std::fs::read_to_string(kafka_run_file("oidc.log"))
        .unwrap()
        .lines()
        .filter(|line| line.contains(&url) && line.contains(&format!("scope={scope}")))
        .count()
}

#[test]
fn a_tenant_on_oauthbearer_delivers_exactly_once_across_token_refreshes() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create"]);
    let secret = format!("oidc-client-secret-{}", std::process::id());
    let secret_file = work.path().join("client-secret");
    std::fs::write(&secret_file, &secret).unwrap();
    // The token server hands out 12-second tokens and the broker makes sessions end
    // with them, so delivering for half a minute needs fresh tokens again and again.
    let scope = format!("refresh-{}", std::process::id());
    let kafka = format!(
        "\"bootstrap.servers\" = \"{}\"\n{}",
        kafka_listener("OAUTH"),
        oauth_properties("kafka", secret_file.to_str().unwrap(), &scope)
    );
    let serve = Serve::tenant("acme", &kafka);
    let module = serve.upload("acme", &transform_component("gold-deals"), "gold-deals");
    let topic = unique_topic("oauth");
    let name = topic.clone();
    serve.create(
        "acme",
        &name,
        &pipeline_config(&table, &topic, None, Extra::default()),
        &module,
    );
    serve.wait_caught_up("acme", &name, 0, Duration::from_secs(60));
    let fetched_at_start = token_requests(&scope);
    let started = Instant::now();
    for (version, step) in [(1, "append"), (2, "update"), (3, "delete"), (4, "merge")] {
        std::thread::sleep(Duration::from_secs(8));
        deals_table(&table, &[step, "--start", "20", "--rows", "10"]);
        serve.wait_caught_up("acme", &name, version, Duration::from_secs(60));
    }
    assert!(started.elapsed() > Duration::from_secs(30));
    let refreshes = token_requests(&scope) - fetched_at_start;
    assert!(
        refreshes >= 2,
        "tokens were fetched {refreshes} times while the pipeline ran for {:?}",
        started.elapsed()
    );
    let records = consume_all(&topic);
    let lines: Vec<String> = records.iter().map(Consumed::line).collect();
    assert_eq!(records.len(), 36, "{lines:?}");
    let distinct: std::collections::BTreeSet<&String> = lines.iter().collect();
    assert_eq!(distinct.len(), 36, "no record twice: {lines:?}");

    // The client secret is nowhere: not in the log, the API's answers or the metrics.
    let mut seen = vec![serve.log()];
    for path in [
        "/v1/tenants/acme".to_string(),
        format!("/v1/tenants/acme/pipelines/{name}"),
        format!("/v1/tenants/acme/pipelines/{name}/logs"),
        "/metrics".to_string(),
    ] {
        let (status, answer) = serve.call("GET", &path, Some(&serve.operator), None);
        assert_eq!(status, 200, "{path}: {answer}");
        seen.push(answer.to_string());
    }
    for text in seen {
        assert!(!text.contains(&secret), "the client secret leaked: {text}");
    }
}

#[test]
fn each_security_failure_ends_at_once_with_its_own_message() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "3"]);
    let wrong_password = work.path().join("wrong-password");
    std::fs::write(&wrong_password, "not-the-password").unwrap();
    let secret_file = work.path().join("client-secret");
    std::fs::write(&secret_file, "oidc-secret-never-shown").unwrap();
    let secret_file = secret_file.to_str().unwrap();
    let ca = kafka_run_file("tls/ca.crt");
    let cases = [
        (
            "wrong password",
            kafka_listener("SASL_SSL"),
            format!(
                "\"security.protocol\" = \"SASL_SSL\"\n\"sasl.mechanism\" = \"SCRAM-SHA-512\"\n\"sasl.username\" = \"sluice\"\n\"sasl.password\" = \"${{file:{}}}\"\n\"ssl.ca.location\" = \"{ca}\"\n",
                wrong_password.display()
            ),
            vec![
                "(SASL_SSL with SCRAM-SHA-512): the broker rejected the password of user `sluice`",
                "Check sasl.username and sasl.password",
            ],
        ),
        (
            "expired token",
            kafka_listener("OAUTH"),
            oauth_properties("expired", secret_file, "kafka"),
            vec![
                "(SASL_SSL with OAUTHBEARER): the token from",
                "/expired/token had already expired when it arrived",
            ],
        ),
        (
            "token from an issuer the broker does not trust",
            kafka_listener("OAUTH"),
            oauth_properties("stranger", secret_file, "kafka"),
            vec![
                "the broker rejected the OAUTHBEARER token from",
                "expected.issuer",
            ],
        ),
        (
            "token endpoint down",
            kafka_listener("OAUTH"),
            oauth_properties("kafka", secret_file, "kafka")
                .replace(&oidc_url(), "http://127.0.0.1:9"),
            vec!["no OAUTHBEARER token could be fetched from http://127.0.0.1:9/kafka/token"],
        ),
        (
            "untrusted CA",
            tls_bootstrap(),
            "\"security.protocol\" = \"SSL\"\n".to_string(),
            vec![
                "the broker's TLS certificate (issued by `Sluice test CA`) is not signed by a CA this pipeline trusts",
                "Set ssl.ca.location",
            ],
        ),
        (
            "client certificate from another CA",
            kafka_listener("MTLS"),
            format!(
                "\"security.protocol\" = \"SSL\"\n\"ssl.ca.location\" = \"{ca}\"\n\"ssl.certificate.location\" = \"{}\"\n\"ssl.key.location\" = \"{}\"\n",
                kafka_run_file("tls/stranger.crt"),
                kafka_run_file("tls/stranger.key")
            ),
            vec![
                "the broker refused the client certificate `",
                "stranger.crt`",
            ],
        ),
        (
            "no client certificate",
            kafka_listener("MTLS"),
            format!("\"security.protocol\" = \"SSL\"\n\"ssl.ca.location\" = \"{ca}\"\n"),
            vec!["the listener requires a client certificate (mutual TLS) and none is configured"],
        ),
        (
            "hostname mismatch",
            kafka_listener("ELSEWHERE"),
            format!("\"security.protocol\" = \"SSL\"\n\"ssl.ca.location\" = \"{ca}\"\n"),
            vec![
                "the broker's TLS certificate is for `kafka.elsewhere.invalid`, not for `127.0.0.1`",
            ],
        ),
    ];
    for (case, bootstrap, kafka, expected) in cases {
        let files = PipelineFiles::new(
            &table,
            &transform_component("passthrough"),
            &unique_topic("refused"),
            &bootstrap,
            Extra {
                kafka: &kafka,
                ..Extra::default()
            },
        );
        let config = std::fs::read_to_string(&files.config).unwrap();
        std::fs::write(
            &files.config,
            config.replace("connect_timeout = \"10s\"", "connect_timeout = \"120s\""),
        )
        .unwrap();
        let started = Instant::now();
        let stderr = run_expecting_failure(&files.config);
        let took = started.elapsed();
        for text in expected {
            assert!(
                stderr.contains(text),
                "{case}: the log lacks {text:?}: {stderr}"
            );
        }
        assert!(stderr.contains(&bootstrap), "{case}: {stderr}");
        for secret in ["not-the-password", "oidc-secret-never-shown"] {
            assert!(
                !stderr.contains(secret),
                "{case}: a secret was logged: {stderr}"
            );
        }
        // Not a speed test: without telling the failure apart, the run would wait out
        // its two-minute connect_timeout.
        assert!(
            took < Duration::from_secs(60),
            "{case}: it took {took:?} to fail: {stderr}"
        );
        if case == "wrong password" {
            let (ok, out) = sluice_check(&files.config);
            assert!(!ok, "{out}");
            assert!(
                out.contains("the broker rejected the password of user `sluice`"),
                "sluice check names the failure: {out}"
            );
        }
    }
}

/// A TCP forwarder to the OIDC server that can be shut: the token endpoint going away
/// while a pipeline runs (fault injection; the tokens still come from the real server).
/// It rewrites the request's Host header, so the tokens name the issuer the broker trusts.
struct TokenEndpointGate {
    port: u16,
    open: Arc<AtomicBool>,
}

impl TokenEndpointGate {
    fn start() -> TokenEndpointGate {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let open = Arc::new(AtomicBool::new(true));
        let target = oidc_url()
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let gate = open.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if gate.load(Ordering::SeqCst) {
                    let target = target.clone();
                    std::thread::spawn(move || forward(client, &target, port));
                }
            }
        });
        TokenEndpointGate { port, open }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn set_open(&self, open: bool) {
        self.open.store(open, Ordering::SeqCst);
    }
}

fn forward(mut client: TcpStream, target: &str, own_port: u16) {
    let Ok(mut server) = TcpStream::connect(target) else {
        return;
    };
    let mut head = vec![0; 64 * 1024];
    let Ok(read) = client.read(&mut head) else {
        return;
    };
    let head =
        String::from_utf8_lossy(&head[..read]).replace(&format!("127.0.0.1:{own_port}"), target);
    if server.write_all(head.as_bytes()).is_err() {
        return;
    }
    // Each direction ends the other's writing when it ends: a response delimited by the
    // end of the connection must reach the client as an end.
    let (mut from_server, mut to_client) =
        (server.try_clone().unwrap(), client.try_clone().unwrap());
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from_server, &mut to_client);
        let _ = to_client.shutdown(std::net::Shutdown::Write);
    });
    let _ = std::io::copy(&mut client, &mut server);
    let _ = server.shutdown(std::net::Shutdown::Write);
}

#[test]
fn a_token_endpoint_gone_mid_run_stalls_delivery_then_stops_it_with_nothing_lost() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "3"]);
    let gate = TokenEndpointGate::start();
    let secret_file = work.path().join("client-secret");
    std::fs::write(&secret_file, "oidc-secret").unwrap();
    let scope = format!("gate-{}", std::process::id());
    let kafka = oauth_properties("kafka", secret_file.to_str().unwrap(), &scope)
        .replace(&oidc_url(), &gate.url());
    let topic = unique_topic("token-gone");
    let files = PipelineFiles::new(
        &table,
        &transform_component("passthrough"),
        &topic,
        &kafka_listener("OAUTH"),
        Extra {
            kafka: &kafka,
            // Short commit waits, so the pipeline's ten redos run out within a minute.
            sink: "transaction_timeout = \"3s\"",
            ..Extra::default()
        },
    );
    let log = work.path().join("sluice.log");
    let mut sluice = spawn_sluice_logged(&files.config, &log);
    files.wait_for_position(&mut sluice, 1, Duration::from_secs(60));
    let stalled = format!(
        "Delivery to Kafka stalled. Could not connect to Kafka at {} (SASL_SSL with OAUTHBEARER): no OAUTHBEARER token could be fetched from {}/kafka/token",
        kafka_listener("OAUTH"),
        gate.url()
    );

    // An outage that outlasts the 12-second token stalls delivery; once the endpoint is
    // back, the pipeline delivers what waited, without a restart.
    gate.set_open(false);
    std::thread::sleep(Duration::from_secs(15));
    deals_table(&table, &["append", "--start", "3", "--rows", "2"]);
    std::thread::sleep(Duration::from_secs(10));
    gate.set_open(true);
    files.wait_for_position(&mut sluice, 2, Duration::from_secs(90));
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(stderr.contains(&stalled), "{stderr}");
    assert_eq!(consume_all(&topic).len(), 5);

    // An outage that lasts stops the pipeline, naming why, with nothing of the stalled
    // version visible.
    gate.set_open(false);
    std::thread::sleep(Duration::from_secs(15));
    deals_table(&table, &["append", "--start", "5", "--rows", "2"]);
    let deadline = Instant::now() + Duration::from_secs(180);
    let status = loop {
        if let Some(status) = sluice.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the pipeline kept running without tokens: {}",
            std::fs::read_to_string(&log).unwrap()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(!status.success(), "{stderr}");
    let error = stderr
        .lines()
        .find(|line| line.starts_with("Error: "))
        .unwrap_or_default();
    assert!(error.contains(&stalled), "it stops with why: {stderr}");
    assert!(!stderr.contains("oidc-secret"), "{stderr}");
    assert_eq!(
        consume_all(&topic).len(),
        5,
        "nothing of version 2 is visible"
    );

    // With the endpoint back, the position is still before version 2, and the pipeline
    // delivers it, once.
    gate.set_open(true);
    assert_eq!(files.position(), Some((2, 0)), "version 2 is not committed");
    run_to_latest(&files.config);
    let records = consume_all(&topic);
    assert_eq!(
        records.len(),
        7,
        "{:?}",
        records.iter().map(Consumed::line).collect::<Vec<_>>()
    );
}

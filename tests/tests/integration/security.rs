//! Kafka security settings pass through: a pipeline delivers exactly once over a
//! SASL/SCRAM listener with the password read from a file, and a wrong password stops it
//! with an error that names the address; the same over TLS with a CA made when the
//! broker starts. A topic the principal may not write stops the pipeline with what to
//! grant.

use sluice_tests::{
    Consumed, Extra, PipelineFiles, consume_all, create_topic, deals_table, kafka_bootstrap,
    run_expecting_failure, run_to_latest, transform_component, unique_topic,
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

#[test]
fn a_wrong_scram_password_stops_the_pipeline_with_the_address() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "3"]);
    let wrong = work.path().join("wrong-password");
    std::fs::write(&wrong, "not-the-password").unwrap();
    let kafka = scram_properties(wrong.to_str().unwrap());
    let files = PipelineFiles::new(
        &table,
        &transform_component("passthrough"),
        &unique_topic("scram-denied"),
        &scram_bootstrap(),
        Extra {
            kafka: &kafka,
            ..Extra::default()
        },
    );
    let stderr = run_expecting_failure(&files.config);
    assert!(stderr.contains(&scram_bootstrap()), "{stderr}");
    assert!(
        !stderr.contains("not-the-password"),
        "the password was logged: {stderr}"
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

#[test]
fn tls_without_trusting_the_ca_stops_with_the_address() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "3"]);
    let files = PipelineFiles::new(
        &table,
        &transform_component("passthrough"),
        &unique_topic("tls-untrusted"),
        &tls_bootstrap(),
        Extra {
            kafka: "\"security.protocol\" = \"SSL\"\n",
            ..Extra::default()
        },
    );
    let stderr = run_expecting_failure(&files.config);
    assert!(stderr.contains(&tls_bootstrap()), "{stderr}");
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

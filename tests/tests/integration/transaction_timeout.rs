//! A transaction left open past Kafka's transaction timeout is aborted by the broker;
//! the sink says so (not "fenced"), and a new connection delivers the next one.

use std::time::Duration;

use sluice_sink::{DeliveryMode, KafkaSink, SinkConfig, SinkRecord, SourcePosition};
use sluice_source::Position;
use sluice_tests::{consume_all, kafka_bootstrap, unique_topic};

fn record(value: &str) -> SinkRecord {
    SinkRecord {
        key: Some(b"k".to_vec()),
        value: Some(value.as_bytes().to_vec()),
        ..SinkRecord::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transaction_open_past_the_timeout_is_aborted_and_the_next_one_delivers() {
    let topic = unique_topic("txn-timeout");
    let config = SinkConfig {
        pipeline: topic.clone(),
        properties: [("bootstrap.servers".to_string(), kafka_bootstrap())].into(),
        topic: topic.clone(),
        position_topic: format!("sluice-position-{topic}"),
        changelog_topic: None,
        delivery: DeliveryMode::ExactlyOnce,
        connect_timeout: Duration::from_secs(10),
        transaction_timeout: Duration::from_secs(1),
    };
    let position = |version| SourcePosition {
        table: "t".into(),
        position: Position::at_version(version),
        module_digest: String::new(),
        starts_fresh: false,
    };
    let mut sink = KafkaSink::connect(config.clone()).await.unwrap();
    sink.send(vec![record("stalled")]).await.unwrap();
    tokio::time::sleep(Duration::from_secs(8)).await;
    let error = sink.commit(&position(1)).await.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("longer than Kafka's transaction timeout (2s)"),
        "{error}"
    );
    assert!(error.is_retriable() && error.needs_reconnect(), "{error}");
    let mut sink = KafkaSink::connect(config).await.unwrap();
    sink.send(vec![record("next")]).await.unwrap();
    sink.commit(&position(1)).await.unwrap();
    let values: Vec<_> = consume_all(&topic).into_iter().map(|c| c.value).collect();
    assert_eq!(values, [Some("next".to_string())]);
}

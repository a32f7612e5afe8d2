//! Where the pipelines a supervisor starts deliver, chosen once for all of them: Kafka
//! in production, memory in the supervisor's unit tests. The supervisor holds it as a
//! trait object, so it names neither the sink nor the source crate.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use sluice_sink::{KafkaSink, SinkConfig, SinkError, TopicRecord};
use tokio::sync::watch;

use crate::config::PipelineConfig;
use crate::error::PipelineError;
use crate::keyed::remove_store;
use crate::run::{RunControls, RunMode, RunSummary, run_with};
use crate::start::StartFrom;

/// A pipeline's run, as a supervisor awaits it.
pub type Running<'a> = Pin<Box<dyn Future<Output = Result<RunSummary, PipelineError>> + Send + 'a>>;

/// Deleting a pipeline's state, as a supervisor awaits it.
pub type Forgetting<'a> = Pin<Box<dyn Future<Output = Result<(), PipelineError>> + Send + 'a>>;

/// How long deleting a changelog topic waits for the cluster.
const DELETE_WAIT: Duration = Duration::from_secs(30);

/// The Kafka settings of a pipeline.
pub fn sink_config(config: &PipelineConfig) -> SinkConfig {
    SinkConfig {
        pipeline: config.pipeline.name.clone(),
        properties: config.kafka_properties(),
        topic: config.sink.topic.clone(),
        position_topic: config.position_topic(),
        changelog_topic: config.changelog_topic(),
        delivery: config.sink.delivery,
        connect_timeout: config.sink.connect_timeout,
        transaction_timeout: config.sink.transaction_timeout,
    }
}

/// Runs a pipeline until it fails, `shutdown` becomes true, or (in
/// [`RunMode::StopAtLatest`]) it has caught up.
pub async fn run(
    config: &PipelineConfig,
    mode: RunMode,
    start_from: StartFrom,
    shutdown: watch::Receiver<bool>,
) -> Result<RunSummary, PipelineError> {
    run_controlled(config, mode, start_from, shutdown, RunControls::default()).await
}

/// [`run`], with a module, swaps and metrics from a supervisor.
pub async fn run_controlled(
    config: &PipelineConfig,
    mode: RunMode,
    start_from: StartFrom,
    shutdown: watch::Receiver<bool>,
    controls: RunControls,
) -> Result<RunSummary, PipelineError> {
    KafkaDestination
        .run(config, mode, start_from, shutdown, controls)
        .await
}

/// Where pipelines deliver their records and keep their positions.
pub trait Destination: Send + Sync {
    /// Runs a pipeline until it fails, `shutdown` becomes true, or (in
    /// [`RunMode::StopAtLatest`]) it has caught up.
    fn run<'a>(
        &'a self,
        config: &'a PipelineConfig,
        mode: RunMode,
        start_from: StartFrom,
        shutdown: watch::Receiver<bool>,
        controls: RunControls,
    ) -> Running<'a>;

    /// Up to `limit` of the latest committed records of `topic`, newest first, read
    /// with the pipeline's client settings within `wait`. Blocking.
    fn latest_records(
        &self,
        config: &PipelineConfig,
        topic: &str,
        limit: usize,
        wait: Duration,
    ) -> Result<Vec<TopicRecord>, SinkError>;

    /// Deletes a stateful pipeline's state: its changelog topic and this node's copy
    /// (a pipeline deleted, or its state reset). Nothing for a pipeline without
    /// `[state]`; the pipeline must not run.
    fn forget_state<'a>(&'a self, config: &'a PipelineConfig) -> Forgetting<'a>;
}

/// Kafka, through each pipeline's own `[kafka]` settings.
#[derive(Clone, Copy, Debug, Default)]
pub struct KafkaDestination;

impl Destination for KafkaDestination {
    fn run<'a>(
        &'a self,
        config: &'a PipelineConfig,
        mode: RunMode,
        start_from: StartFrom,
        shutdown: watch::Receiver<bool>,
        controls: RunControls,
    ) -> Running<'a> {
        let sink = sink_config(config);
        let connect = move || KafkaSink::connect(sink.clone());
        Box::pin(run_with(
            config, mode, start_from, shutdown, controls, connect,
        ))
    }

    fn latest_records(
        &self,
        config: &PipelineConfig,
        topic: &str,
        limit: usize,
        wait: Duration,
    ) -> Result<Vec<TopicRecord>, SinkError> {
        sluice_sink::read_latest(&config.kafka_properties(), topic, limit, wait)
    }

    fn forget_state<'a>(&'a self, config: &'a PipelineConfig) -> Forgetting<'a> {
        Box::pin(async move {
            let Some(topic) = config.changelog_topic() else {
                return Ok(());
            };
            sluice_sink::delete_changelog_topic(&config.kafka_properties(), &topic, DELETE_WAIT)
                .await?;
            remove_store(config)
        })
    }
}

#[cfg(any(test, feature = "memory"))]
impl Destination for crate::memory_sink::MemorySink {
    fn run<'a>(
        &'a self,
        config: &'a PipelineConfig,
        mode: RunMode,
        start_from: StartFrom,
        shutdown: watch::Receiver<bool>,
        controls: RunControls,
    ) -> Running<'a> {
        Box::pin(run_with(
            config,
            mode,
            start_from,
            shutdown,
            controls,
            || self.connect(),
        ))
    }

    fn latest_records(
        &self,
        config: &PipelineConfig,
        topic: &str,
        limit: usize,
        _wait: Duration,
    ) -> Result<Vec<TopicRecord>, SinkError> {
        Ok(self.latest_records(&config.sink.topic, topic, limit))
    }

    fn forget_state<'a>(&'a self, config: &'a PipelineConfig) -> Forgetting<'a> {
        Box::pin(async move {
            let Some(topic) = config.changelog_topic() else {
                return Ok(());
            };
            self.delete_topic(&topic);
            remove_store(config)
        })
    }
}

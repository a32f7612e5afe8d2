//! One pipeline: a Delta table's change feed, through a Wasm transform, into Kafka.
//!
//! The pipeline reads change batches in commit order, calls the transform once per
//! batch, and delivers the records together with the position after the batch: in one
//! Kafka transaction (exactly-once) or position after records (at-least-once). A
//! restart resumes from the stored position.

mod check;
mod config;
mod delivery;
mod error;
#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod memory;
mod metrics;
mod module;
mod outage;
mod preview;
mod progress;
mod queue;
mod range;
mod records;
mod run;
mod schema_ids;
mod stage;
mod start;
mod topics;
mod work;

pub use check::{Finding, check};
pub use config::{
    ConfigError, DeliveryMode, ErrorPolicy, PipelineConfig, ScalarValue, StartingVersion,
    resolve_reference,
};
pub use error::PipelineError;
pub use metrics::{
    BATCH_SECONDS_BUCKETS, MetricsSnapshot, PipelineMetrics, ProgressSnapshot, StageSeconds,
};
pub use module::{Instance, Module};
pub use outage::{Waiting, WaitingFor};
pub use preview::{PreviewEncoding, PreviewOptions, PreviewSummary, preview};
pub use run::{
    RunControls, RunMode, RunSummary, StartFrom, SwapReport, SwapRequest, run, run_controlled,
    sink_config,
};
pub use sluice_sink::{
    KafkaSink, SourcePosition, client_properties, is_secret_property, load_position,
};
pub use sluice_source::{Position, SourceOptions};
pub use stage::instance_limits;
pub use topics::TopicRule;

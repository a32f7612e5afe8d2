//! One pipeline: a Delta table's change feed, through a Wasm transform, into Kafka.
//!
//! The pipeline reads change batches in commit order, calls the transform once per
//! batch, and delivers the records together with the position after the batch: in one
//! Kafka transaction (exactly-once) or position after records (at-least-once). A
//! restart resumes from the stored position.

mod check;
mod config;
mod dead_letters;
mod destination;
mod error;
#[cfg(test)]
mod fuzz;
mod keyed;
mod lookups;
#[cfg(any(test, feature = "memory"))]
mod memory_sink;
mod metrics;
mod module;
mod outage;
mod preview;
mod progress;
mod queue;
mod range;
mod records;
mod run;
mod sample;
mod schema_ids;
mod shadow;
mod sink;
mod stage;
mod stage_output;
mod start;
mod state_view;
mod topics;
mod work;

pub use check::{Finding, check};
pub use config::{
    ConfigError, Consistency, ErrorPolicy, LookupSection, PipelineConfig, ScalarValue,
    StartingVersion, StateSection, resolve_reference,
};
pub use dead_letters::{DeadLetter, DeadLetters, MAX_LETTERS, read_dead_letters};
pub use destination::{Destination, KafkaDestination, Running, run, run_controlled, sink_config};
pub use error::PipelineError;
pub use lookups::LookupTables;
#[cfg(any(test, feature = "memory"))]
pub use memory_sink::{Call, Failure, MemorySink, Seen, Transaction};
pub use metrics::{
    BATCH_SECONDS_BUCKETS, MetricsSnapshot, PipelineMetrics, ProgressSnapshot, StageSeconds,
    StateSnapshot,
};
pub use module::{Instance, Module};
pub use outage::{Waiting, WaitingFor};
pub use preview::{PreviewEncoding, PreviewOptions, PreviewSummary, preview};
pub use run::{RunControls, RunMode, RunSummary, SwapReport, SwapRequest};
pub use sample::{SampleRefusal, try_on_sample};
pub use shadow::{
    CandidateError, Difference, DifferenceKind, MAX_FAILED_IN_A_ROW, ModuleCost, RecordCounts,
    RecordView, RejectionCounts, Shadow, ShadowLimits, ShadowPhase, ShadowReport, ShadowSlot,
    ShadowState,
};
pub use sink::{ConnectSink, KafkaChangelog, Sink};
pub use sluice_sink::{
    DeliveryMode, KafkaSink, SourcePosition, client_properties, is_secret_property, load_position,
};
pub use sluice_source::{Position, SourceOptions};
pub use sluice_state::{
    LiveState, StateStore, StoreError, bytes_from_text_or_hex, entry_from_json, entry_to_json,
    named_bytes,
};
pub use stage::instance_limits;
pub use start::{StartFrom, versions_at_times};
pub use state_view::{StateView, reset_state};
pub use topics::TopicRule;

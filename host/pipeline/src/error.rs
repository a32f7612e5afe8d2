//! Errors that stop a pipeline.

use std::time::Duration;

use sluice_engine::{EngineError, TransformError};
use sluice_sink::SinkError;
use sluice_source::{Position, SourceError};

use crate::config::ConfigError;

/// Why a pipeline stopped.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The config is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The table could not be read.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The module could not be loaded or started.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The module failed on a batch.
    #[error(
        "Pipeline {pipeline} stopped at table {table} version {version}, change row {row_in_version} of that version: {source}"
    )]
    Transform {
        /// The pipeline's name.
        pipeline: String,
        /// The table.
        table: String,
        /// The Delta version of the batch.
        version: u64,
        /// Index of the failing row within the version's change rows (the batch's first
        /// row when the failure is not about one row).
        row_in_version: u64,
        /// The module's error.
        source: TransformError,
    },
    /// A lookup table could not be kept or read.
    #[error("Pipeline {pipeline} stopped: lookup {lookup}: {source}")]
    Lookup {
        /// The pipeline's name.
        pipeline: String,
        /// The lookup's name.
        lookup: String,
        /// What failed.
        source: sluice_lookup::LookupError,
    },
    /// The schema registry's client could not be made (its certificate authority).
    #[error(transparent)]
    RegistryClient(Box<sluice_registry::RegistryError>),
    /// The schema registry did not give a schema's id.
    #[error("Pipeline {pipeline} stopped at table {table} version {version}: {source}")]
    Registry {
        /// The pipeline's name.
        pipeline: String,
        /// The table.
        table: String,
        /// The Delta version of the batch whose records waited for the id.
        version: u64,
        /// The registry's error.
        source: Box<sluice_registry::RegistryError>,
    },
    /// The schema registry gave no ids for longer than `[sink.schema_registry]
    /// max_outage`.
    #[error(
        "Pipeline {pipeline} stopped at table {table} {position} after waiting {} for the schema registry, the longest [sink.schema_registry] max_outage allows. The last failure: {source} Nothing is lost: once the registry answers, start the pipeline again and it resumes at {position} (or raise max_outage to wait longer).",
        humantime::format_duration(Duration::from_secs(waited.as_secs()))
    )]
    RegistryOutage {
        /// The pipeline's name.
        pipeline: String,
        /// The table.
        table: String,
        /// The last committed position, where a restart resumes.
        position: Position,
        /// How long the pipeline waited since the registry's first failure.
        waited: Duration,
        /// The registry's last error.
        source: Box<sluice_registry::RegistryError>,
    },
    /// The module framed records with its own schema and the pipeline has no registry.
    #[error(
        "Pipeline {pipeline} stopped at table {table} version {version}: the module framed records with its own schema (emit-framed), and the pipeline has no schema registry to register it in. Add [sink.schema_registry] with its url to the pipeline's config and start it again: it resumes at that version."
    )]
    NoRegistry {
        /// The pipeline's name.
        pipeline: String,
        /// The table.
        table: String,
        /// The Delta version of the batch whose records were framed.
        version: u64,
    },
    /// The module wrote a key or value as its own bytes where the pipeline's encoding
    /// writes them through the schema registry.
    #[error(
        "Pipeline {pipeline} stopped at table {table} version {version}, change row {row_in_version} of that version: the module wrote a record's {part} as bytes of its own (emit, emit-bytes or emit-packed), but [sink.encoding] {part} = \"{format}\" writes {part}s in the schema registry's wire format, so consumers would meet bytes without a schema id; the records before it were delivered. Have the module build the {part} with the host helpers (`out.encode` in every SDK, as transforms/gold-deals-helpers does) or frame its own encoding with emit-framed; or, if its own bytes are what consumers expect, remove `{part} = \"{format}\"` from [sink.encoding]."
    )]
    Unframed {
        /// The pipeline's name.
        pipeline: String,
        /// The table.
        table: String,
        /// The Delta version of the batch.
        version: u64,
        /// The record's change row within that version.
        row_in_version: u64,
        /// `key` or `value`.
        part: &'static str,
        /// The format asked for (`avro`, `json-schema`, `protobuf`).
        format: &'static str,
    },
    /// Kafka refused or lost records.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// A state operation on a pipeline that keeps no state.
    #[error(
        "Pipeline {pipeline} keeps no state: its config has no [state] section, so there is nothing to show or reset."
    )]
    NoState {
        /// The pipeline.
        pipeline: String,
    },
    /// The pipeline's state could not be kept on this node or restored.
    #[error("The state of pipeline {pipeline} could not be used: {source}")]
    State {
        /// The pipeline.
        pipeline: String,
        /// What failed.
        source: sluice_state::StoreError,
    },
    /// The stored position is past the table's latest version: the table was recreated.
    #[error(
        "The stored position of pipeline {pipeline} is at version {version}, past table {table}'s latest version {latest}: the table was recreated or replaced by a new one at the same location. Nothing was read. Start again from the configured start with `sluice run --restart`, or move the position with `sluice position reset`."
    )]
    PositionAhead {
        /// The pipeline.
        pipeline: String,
        /// The table.
        table: String,
        /// The stored position's version.
        version: u64,
        /// The table's latest version.
        latest: u64,
    },
    /// The stored position belongs to a different table.
    #[error(
        "The stored position of pipeline {pipeline} belongs to table {stored}, not {configured}. Give this pipeline another name, or reset its position with `sluice position reset`."
    )]
    OtherTable {
        /// The pipeline.
        pipeline: String,
        /// The table the position was stored for.
        stored: String,
        /// The configured table.
        configured: String,
    },
}

/// What becomes of the work sent before an error that stops a range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EarlierWork {
    /// Rolled back: the sink failed, or the error is retried from the last commit.
    RolledBack,
    /// Committed: the module or the table stopped the pipeline, and the batches before
    /// are good, so a restart after the fix goes on from the failure.
    Kept,
    /// Committed with the start of this version as the position: the read stopped
    /// exactly there.
    KeptUpTo(u64),
}

impl PipelineError {
    /// What becomes of the work sent before this error.
    pub(crate) fn earlier_work(&self) -> EarlierWork {
        match self {
            PipelineError::Transform { .. }
            | PipelineError::Unframed { .. }
            | PipelineError::Lookup { .. } => EarlierWork::Kept,
            PipelineError::Source(SourceError::SchemaChanged { version, .. }) => {
                EarlierWork::KeptUpTo(*version)
            }
            PipelineError::Source(e) if !e.is_transient() => EarlierWork::Kept,
            _ => EarlierWork::RolledBack,
        }
    }

    /// Whether another instance of the pipeline took over and fenced this one: in a
    /// cluster, the pipeline moved to another node.
    pub fn is_fenced(&self) -> bool {
        matches!(self, PipelineError::Sink(SinkError::Fenced { .. }))
    }

    /// Whether redoing the work from the last committed position may succeed: Kafka,
    /// the schema registry or the table's storage was away for a moment.
    pub fn is_retriable(&self) -> bool {
        match self {
            PipelineError::Source(e) => e.is_transient(),
            PipelineError::Sink(e) => e.is_retriable(),
            PipelineError::Registry { source, .. } => source.is_transient(),
            PipelineError::Lookup { source, .. } => source.is_transient(),
            _ => false,
        }
    }
}

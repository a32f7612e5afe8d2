//! One pipeline: a Delta table's change feed, through a Wasm transform, into Kafka.
//!
//! The pipeline reads change batches in commit order, calls the transform once per
//! batch, produces the records, waits for Kafka's acknowledgements, and then stores
//! the position after the batch. A restart resumes from the stored position, so no
//! record is lost; records of a batch in flight at a crash may be produced again
//! (at-least-once).

mod config;
mod error;
mod position_store;
mod run;

pub use config::{ConfigError, PipelineConfig, ScalarValue, StartingVersion};
pub use error::PipelineError;
pub use position_store::{PositionError, PositionStore};
pub use run::{RunMode, RunSummary, run};

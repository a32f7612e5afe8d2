//! Schema ids from a registry speaking Confluent's Schema Registry API.
//!
//! The pipeline needs three things of a registry: the id of a schema under a subject
//! (registering it when it is new, which is where the registry's compatibility rules
//! refuse a change), the compatibility level that applies to a subject (to say why a
//! change was refused), and, for `sluice check`, what registering a schema would do. They sit
//! behind [`SchemaRegistry`]: [`HttpRegistry`] talks to a real one, [`MemoryRegistry`]
//! keeps schemas in memory for unit tests (feature `memory`).

mod error;
mod http;
#[cfg(feature = "memory")]
mod memory;

use sluice_encoding::WriterSchema;

pub use error::RegistryError;
pub use http::{HttpRegistry, RegistryAuth, RegistrySettings};
#[cfg(feature = "memory")]
pub use memory::MemoryRegistry;

/// A schema registry.
pub trait SchemaRegistry: Send + Sync {
    /// The id of `schema` under `subject`, registering it as the subject's next version
    /// when it is new there.
    fn register(&self, subject: &str, schema: &WriterSchema) -> Result<u32, RegistryError>;

    /// The compatibility level that applies to `subject`: its own, or the registry's
    /// default.
    fn compatibility(&self, subject: &str) -> Result<String, RegistryError>;

    /// What registering `schema` under `subject` would do, without registering it.
    fn preview(&self, subject: &str, schema: &WriterSchema) -> Result<Registration, RegistryError>;
}

/// What registering a schema under a subject would do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Registration {
    /// The subject has the schema already, under this id.
    Known(u32),
    /// The subject would take it as its next version (or its first).
    Accepted,
    /// The subject's compatibility level would refuse it, with the registry's reasons.
    Refused(String),
}

//! What the Sluice host and its Rust SDK share.
//!
//! Both read the same Arrow batches of change rows and must agree on every byte they
//! make from them: typed values and struct paths ([`Column`]), Spark-style JSON
//! ([`JsonObject`]), the packed record form that crosses the Wasm boundary
//! ([`PackedRecords`]) and the batch helpers ([`helpers`]). The host runs the helpers
//! for guests; the SDK runs the same code natively so transforms unit-test without
//! Wasm. Nothing here depends on more than Arrow's core crates.

mod column;
#[cfg(test)]
mod conformance_tests;
pub mod helpers;
mod json;
mod number;
mod packed;
mod text;
mod time;
mod value;

pub use column::{Column, ColumnError, LeafColumn, leaf_columns};
pub use json::{JsonKey, JsonObject, write_json_string, write_json_value};
pub use packed::{PackedError, PackedRecords, Record};
pub use text::spark_substring;
pub use time::{format_date, format_timestamp_micros, format_timestamp_ntz_micros};
pub use value::{ChangeType, Value};

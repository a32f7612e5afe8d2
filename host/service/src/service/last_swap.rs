//! The last module swap done through this node, kept with the pipeline's entry and
//! shown in its status.

use serde::Serialize;

/// A module swap, as the pipeline's status shows it.
#[derive(Clone, Debug, Serialize)]
pub struct LastSwap {
    /// When, in milliseconds since the epoch.
    pub at_ms: u64,
    /// Digest of the module before.
    pub from: String,
    /// Digest of the module after.
    pub to: String,
    /// How the deploy ended (`switched`, `started` or `stored`).
    pub outcome: &'static str,
}

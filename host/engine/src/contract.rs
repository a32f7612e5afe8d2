//! Generated bindings for each supported version of the WIT contract.

/// The interface a `sluice:transform@0.1.0` module exports.
pub const V0_1_EXPORT: &str = "sluice:transform/transformer@0.1.0";

/// The prefix every version of the transformer interface shares.
pub const TRANSFORMER_PREFIX: &str = "sluice:transform/transformer@";

/// Bindings for `sluice:transform@0.1.0`.
pub mod v0_1 {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "transform",
    });
}

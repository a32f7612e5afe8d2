//! Generated bindings for each supported version of the WIT contract.

/// The interface a `sluice:transform@1.3.0` module exports.
pub const V1_3_EXPORT: &str = "sluice:transform/transformer@1.3.0";

/// The interface a `sluice:transform@1.2.0` module exports.
pub const V1_2_EXPORT: &str = "sluice:transform/transformer@1.2.0";

/// The interface a `sluice:transform@1.1.0` module exports.
pub const V1_1_EXPORT: &str = "sluice:transform/transformer@1.1.0";

/// The interface a `sluice:transform@1.0.0` module exports.
pub const V1_0_EXPORT: &str = "sluice:transform/transformer@1.0.0";

/// The interface a `sluice:transform@0.1.0` module exports.
pub const V0_1_EXPORT: &str = "sluice:transform/transformer@0.1.0";

/// The prefix every version of the transformer interface shares.
pub const TRANSFORMER_PREFIX: &str = "sluice:transform/transformer@";

/// Bindings for `sluice:transform@1.3.0`, the batch resource backed by
/// [`crate::state::BatchState`]. They run 1.0.0 to 1.2.0 modules too: wasmtime
/// resolves names semver-compatibly, so an older module's imports link to the 1.3.0
/// host (a superset) and its `transformer@1.x.0` export is found as 1.3.0's.
pub mod v1 {
    wasmtime::component::bindgen!({
        path: "../../wit/transform.wit",
        world: "transform",
        with: {
            "sluice:transform/host.batch": crate::state::BatchState,
        },
        imports: { default: trappable },
    });
}

/// Bindings for `sluice:transform@0.1.0`, the skeleton's contract.
pub mod v0_1 {
    wasmtime::component::bindgen!({
        path: "../../wit/v0.1/transform.wit",
        world: "transform",
    });
}

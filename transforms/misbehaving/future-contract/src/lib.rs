//! A transform for `sluice:transform@9.0.0`, a version this host does not run.

wit_bindgen::generate!({
    path: "wit/future.wit",
    world: "transform",
});

/// The fixture's transformer, exported on Wasm targets.
pub struct Future;

impl exports::sluice::transform::transformer::Guest for Future {
    fn init(_params: Vec<(String, String)>) -> Result<(), String> {
        Ok(())
    }

    fn transform_everything(batch: Vec<u8>) -> Vec<u8> {
        batch
    }
}

#[cfg(target_arch = "wasm32")]
export!(Future);

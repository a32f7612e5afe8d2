//! A transform whose `init` asks an `example:vault/secrets` import for a password.

wit_bindgen::generate!({
    path: "wit",
    world: "hungry",
    generate_all,
});

use exports::sluice::transform::transformer::Guest;
use sluice::transform::host::Batch;
use sluice::transform::types::TransformError;

/// The fixture's transformer, exported on Wasm targets.
pub struct Hungry;

impl Guest for Hungry {
    fn init(_params: Vec<(String, String)>) -> Result<(), String> {
        let password = example::vault::secrets::get("kafka-password");
        Err(format!("got a password of {} bytes", password.len()))
    }

    fn transform(_batch: &Batch) -> Result<(), TransformError> {
        Ok(())
    }
}

#[cfg(target_arch = "wasm32")]
export!(Hungry);

//! A transform that wants ambient authority: in `init` it reads a file, an environment
//! variable, and connects a socket. Built for `wasm32-wasip2`, so it imports WASI; the
//! host must refuse to load it rather than let any of this happen.

use sluice_transform_sys::exports::sluice::transform::transformer::Guest;
use sluice_transform_sys::sluice::transform::host::Batch;
use sluice_transform_sys::sluice::transform::types::TransformError;

/// The fixture's transformer, exported on Wasm targets.
pub struct Hungry;

impl Guest for Hungry {
    fn init(_params: Vec<(String, String)>) -> Result<(), String> {
        let secret = std::fs::read_to_string("/etc/passwd").map_err(|e| e.to_string())?;
        let home = std::env::var("HOME").map_err(|e| e.to_string())?;
        std::net::TcpStream::connect("127.0.0.1:19092").map_err(|e| e.to_string())?;
        Err(format!("read {} bytes and HOME={home}", secret.len()))
    }

    fn transform(_batch: &Batch) -> Result<(), TransformError> {
        Ok(())
    }
}

#[cfg(target_arch = "wasm32")]
sluice_transform_sys::export_transformer!(Hungry with_types_in sluice_transform_sys);

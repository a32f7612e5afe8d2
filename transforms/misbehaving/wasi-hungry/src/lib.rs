//! A transform that wants ambient authority: in `init` it reads a file, an environment
//! variable and the clock, and connects a socket. Built for `wasm32-wasip2`, so it
//! imports WASI; the host links a WASI that reaches nothing, so `init` fails and says
//! what each attempt got.

use sluice_transform_sys::exports::sluice::transform::transformer::Guest;
use sluice_transform_sys::sluice::transform::host::Batch;
use sluice_transform_sys::sluice::transform::types::TransformError;

/// The fixture's transformer, exported on Wasm targets.
pub struct Hungry;

impl Guest for Hungry {
    fn init(_params: Vec<(String, String)>) -> Result<(), String> {
        let file = std::fs::read_to_string("/etc/passwd").map(|s| format!("{} bytes", s.len()));
        let env = std::env::var("HOME");
        let socket = std::net::TcpStream::connect("127.0.0.1:19092").map(|_| "connected");
        let clock = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs());
        Err(format!(
            "file: {file:?}; env: {env:?}; socket: {socket:?}; clock: {clock:?}"
        ))
    }

    fn transform(_batch: &Batch) -> Result<(), TransformError> {
        Ok(())
    }
}

#[cfg(target_arch = "wasm32")]
sluice_transform_sys::export_transformer!(Hungry with_types_in sluice_transform_sys);

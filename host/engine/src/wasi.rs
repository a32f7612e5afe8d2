//! The WASI a module sees: every interface present, no authority behind any of them.
//!
//! Interpreted guests (CPython from componentize-py, JavaScript engines) import WASI
//! whether or not the transform uses it, so the interfaces must link. What they reach:
//! no files (no preopened directories), no environment, arguments or stdin, no network
//! (every address refused, no name lookup), stdout discarded, stderr kept to explain a
//! trap (an interpreter prints its traceback there), a wall
//! clock stuck at 1970-01-01, and a fixed sequence of "random" bytes, so a module run
//! twice on the same batch makes the same records. The monotonic clock is real:
//! runtimes wait on it, and a stuck one would hang them.

use std::time::Duration;

use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{Deterministic, HostWallClock, WasiCtx, WasiCtxBuilder};

/// How much of a module's stderr is kept (per instance) to explain its traps.
const STDERR_BYTES: usize = 4 * 1024 * 1024;

/// How much of the end of stderr a trap's message quotes.
const STDERR_TAIL: usize = 2000;

/// A wall clock that always reads the Unix epoch.
struct EpochClock;

impl HostWallClock for EpochClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }

    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

/// A fixed byte sequence for the random interfaces (xorshift from a constant seed).
fn fixed_bytes() -> Vec<u8> {
    let mut state: u64 = 0x5EED_5EED_5EED_5EED;
    (0..4096)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// A WASI context that grants nothing, and the pipe its stderr goes to.
pub(crate) fn sealed() -> (WasiCtx, MemoryOutputPipe) {
    let stderr = MemoryOutputPipe::new(STDERR_BYTES);
    let context = WasiCtxBuilder::new()
        .stderr(stderr.clone())
        .wall_clock(EpochClock)
        .secure_random(Deterministic::new(fixed_bytes()))
        .insecure_random(Deterministic::new(fixed_bytes()))
        .insecure_random_seed(0)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .build();
    (context, stderr)
}

/// The end of what the module wrote to stderr, if anything.
pub(crate) fn stderr_tail(stderr: &MemoryOutputPipe) -> Option<String> {
    let bytes = stderr.contents();
    let tail = &bytes[bytes.len().saturating_sub(STDERR_TAIL)..];
    let text = String::from_utf8_lossy(tail).trim().to_string();
    (!text.is_empty()).then_some(text)
}

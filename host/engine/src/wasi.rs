//! The WASI a module sees: every interface present, no authority behind any of them.
//!
//! Interpreted guests (CPython from componentize-py, JavaScript engines) import WASI
//! whether or not the transform uses it, so the interfaces must link. What they reach:
//! no files (no preopened directories), no environment, arguments or stdin, no network
//! (every address refused, no name lookup), output to stdout and stderr discarded, a wall
//! clock stuck at 1970-01-01, and a fixed sequence of "random" bytes, so a module run
//! twice on the same batch makes the same records. The monotonic clock is real:
//! runtimes wait on it, and a stuck one would hang them.

use std::time::Duration;

use wasmtime_wasi::{Deterministic, HostWallClock, WasiCtx, WasiCtxBuilder};

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

/// A WASI context that grants nothing.
pub(crate) fn sealed() -> WasiCtx {
    WasiCtxBuilder::new()
        .wall_clock(EpochClock)
        .secure_random(Deterministic::new(fixed_bytes()))
        .insecure_random(Deterministic::new(fixed_bytes()))
        .insecure_random_seed(0)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .build()
}

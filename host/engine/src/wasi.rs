//! The WASI a module sees: every interface present, no authority behind any of them,
//! and nothing in it that lets a module make the host spend more than its budgets.
//!
//! Interpreted guests (CPython from componentize-py, JavaScript engines) import WASI
//! whether or not the transform uses it, so the interfaces must link. What they reach:
//! no files (no preopened directories), no environment, arguments or stdin, no network
//! (every address refused, no name lookup), stdout discarded, the last few KiB of stderr
//! kept to explain a trap (an interpreter prints its traceback there), a wall clock stuck
//! at 1970-01-01, and a fixed sequence of "random" bytes, so a module run twice on the
//! same batch makes the same records. The monotonic clock is real (runtimes wait on it,
//! and a stuck one would hang them), but every wait on it ends at the call's deadline:
//! the epoch deadline cannot interrupt a host thread parked in `poll`.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{DynPollable, OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{Deterministic, HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder};

/// How much of the end of a module's stderr is kept (per instance) and quoted when it
/// traps.
const STDERR_TAIL: usize = 2000;

/// Most bytes one `get-random-bytes` call may ask for (the host builds them before the
/// module receives them).
const MAX_RANDOM_BYTES: u64 = 64 * 1024;

/// The monotonic clock's interface, whose waits are capped.
const MONOTONIC_CLOCK: &str = "wasi:clocks/monotonic-clock@0.2.12";

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

/// The real monotonic clock, counted from the instance's start, so a wait for an
/// instant can be turned into a wait for a duration.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SinceStart(Instant);

impl SinceStart {
    fn nanos(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

impl HostMonotonicClock for SinceStart {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        self.nanos()
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

/// The last [`STDERR_TAIL`] bytes a module wrote to stderr: whatever it writes, the
/// host holds no more, and writing never fails (a full pipe would close the stream and
/// lose the traceback that explains a crash).
#[derive(Clone, Default)]
pub(crate) struct StderrTail(Arc<Mutex<VecDeque<u8>>>);

impl StderrTail {
    fn keep(&self, bytes: &[u8]) {
        let mut tail = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let bytes = &bytes[bytes.len().saturating_sub(STDERR_TAIL)..];
        let overflow = (tail.len() + bytes.len()).saturating_sub(STDERR_TAIL);
        tail.drain(..overflow);
        tail.extend(bytes);
    }

    /// The end of what the module wrote, if anything.
    pub(crate) fn text(&self) -> Option<String> {
        let tail = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let bytes: Vec<u8> = tail.iter().copied().collect();
        let text = String::from_utf8_lossy(&bytes).trim().to_string();
        (!text.is_empty()).then_some(text)
    }
}

impl IsTerminal for StderrTail {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for StderrTail {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

impl tokio::io::AsyncWrite for StderrTail {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.keep(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for StderrTail {
    async fn ready(&mut self) {}
}

#[wasmtime_wasi::async_trait]
impl OutputStream for StderrTail {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.keep(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

/// A WASI context that grants nothing, the stderr it keeps, and its monotonic clock.
pub(crate) fn sealed() -> (WasiCtx, StderrTail, SinceStart) {
    let stderr = StderrTail::default();
    let clock = SinceStart(Instant::now());
    let context = WasiCtxBuilder::new()
        .stderr(stderr.clone())
        .wall_clock(EpochClock)
        .monotonic_clock(clock)
        .secure_random(Deterministic::new(fixed_bytes()))
        .insecure_random(Deterministic::new(fixed_bytes()))
        .insecure_random_seed(0)
        .max_random_size(MAX_RANDOM_BYTES)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .build();
    (context, stderr, clock)
}

/// When the current call must end, shared with the waits a module made, so a wait
/// made during one call (`init`, an earlier batch) ends at the deadline of the call it
/// is waited on in.
#[derive(Clone, Debug)]
pub(crate) struct WaitLimit(Arc<Mutex<Instant>>);

impl WaitLimit {
    pub(crate) fn new(at: Instant) -> WaitLimit {
        WaitLimit(Arc::new(Mutex::new(at)))
    }

    /// Moves the limit to `at` (when a call is armed).
    pub(crate) fn set(&self, at: Instant) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = at;
    }

    fn get(&self) -> Instant {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What a capped wait needs from the store's state.
pub(crate) trait Waits: Send + 'static {
    /// The resource table, the call's wait limit, and the module's clock.
    fn waits(&mut self) -> (&mut ResourceTable, WaitLimit, SinceStart);
}

/// A wait that ends at the earlier of what the module asked and the current call's
/// deadline.
struct Until {
    asked: tokio::time::Instant,
    limit: WaitLimit,
}

#[wasmtime_wasi::async_trait]
impl Pollable for Until {
    async fn ready(&mut self) {
        let limit = tokio::time::Instant::from_std(self.limit.get());
        let wake = self.asked.min(limit);
        if tokio::time::Instant::now() >= wake {
            // Ready at once, as wasmtime-wasi's own past deadlines are, after letting
            // other tasks run (a zero-length wait is how a guest polls without blocking).
            tokio::task::yield_now().await;
            return;
        }
        tokio::time::sleep_until(wake).await;
    }
}

fn capped_wait(
    state: &mut impl Waits,
    nanos_from_now: u64,
) -> wasmtime::Result<Resource<DynPollable>> {
    let (table, limit, _) = state.waits();
    let now = tokio::time::Instant::now();
    // A wait too long to represent lasts until the call's deadline.
    let asked = now
        .checked_add(Duration::from_nanos(nanos_from_now))
        .unwrap_or_else(|| tokio::time::Instant::from_std(limit.get()));
    let wait = table.push(Until { asked, limit })?;
    wasmtime_wasi::p2::subscribe(table, wait)
}

/// Replaces the monotonic clock's `subscribe-duration` and `subscribe-instant` (after
/// WASI is linked) with versions whose waits end at the call's deadline, so a module
/// that sleeps or polls for an hour holds a host thread no longer than its budget.
/// When the wait ends the module is back in its own code past its deadline, and the
/// epoch interrupt stops it as it would stop a loop.
pub(crate) fn cap_waits<T: Waits>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut clock = linker.instance(MONOTONIC_CLOCK)?;
    clock.func_wrap(
        "subscribe-duration",
        |mut store: StoreContextMut<'_, T>, (nanos,): (u64,)| {
            Ok((capped_wait(store.data_mut(), nanos)?,))
        },
    )?;
    clock.func_wrap(
        "subscribe-instant",
        |mut store: StoreContextMut<'_, T>, (when,): (u64,)| {
            let state = store.data_mut();
            let now = state.waits().2.nanos();
            Ok((capped_wait(state, when.saturating_sub(now))?,))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_keeps_only_its_tail() {
        let stderr = StderrTail::default();
        assert_eq!(stderr.text(), None);
        stderr.keep(&vec![b'a'; 10 * STDERR_TAIL]);
        stderr.keep(b"Traceback: the end");
        let text = stderr.text().unwrap();
        assert_eq!(text.len(), STDERR_TAIL);
        assert!(text.ends_with("Traceback: the end"));
        stderr.keep(&vec![b'b'; 3 * STDERR_TAIL]);
        assert_eq!(stderr.text().unwrap(), "b".repeat(STDERR_TAIL));
    }
}

//! The pipelines' blocking work (reading the table, running modules) as short steps on
//! tokio's blocking pool, at most a few at once across all pipelines of a process.
//!
//! A step never waits on another pipeline stage: a reader that finds the next stage's
//! queue full gives its thread back first. So however many pipelines are busy, the pool
//! has threads for the sink's commits and aborts, and every pipeline moves on.

use std::sync::OnceLock;

use tokio::sync::Semaphore;

/// Blocking steps running at once across the process: enough to keep every core busy
/// while some steps wait on storage.
fn steps() -> &'static Semaphore {
    static STEPS: OnceLock<Semaphore> = OnceLock::new();
    STEPS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        Semaphore::new((cores * 2).max(4))
    })
}

/// Runs `work` on the blocking pool once a step is free.
pub(crate) async fn blocking_step<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> T {
    let _step = steps()
        .acquire()
        .await
        .expect("the step semaphore is never closed");
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(error) => std::panic::resume_unwind(error.into_panic()),
    }
}

//! What one instance may use: memory (with its peak recorded, to recycle instances
//! that grew) and table elements.

use wasmtime::ResourceLimiter;

/// Most table elements one instance may grow to.
const MAX_TABLE_ELEMENTS: usize = 1_000_000;

/// The error a memory growth past the cap traps with.
#[derive(Debug, thiserror::Error)]
#[error("memory growth failure: the module asked for {desired} bytes, its cap is {limit} bytes")]
pub(crate) struct MemoryCapExceeded {
    desired: usize,
    limit: usize,
}

/// Caps memory per instance and remembers the largest memory seen.
pub(crate) struct Limiter {
    memory_limit: usize,
    pub(crate) memory_peak: usize,
}

impl Limiter {
    pub(crate) fn new(memory_limit: usize) -> Limiter {
        Limiter {
            memory_limit,
            memory_peak: 0,
        }
    }
}

impl Limiter {
    /// Most linear memory the instance may have, in bytes.
    pub(crate) fn memory_limit(&self) -> usize {
        self.memory_limit
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_limit {
            return Err(wasmtime::Error::new(MemoryCapExceeded {
                desired,
                limit: self.memory_limit,
            }));
        }
        self.memory_peak = self.memory_peak.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

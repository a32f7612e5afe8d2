//! What one instance may use: memory (with its peak recorded, to recycle instances
//! that grew) and table elements.

use wasmtime::ResourceLimiter;

/// Most table elements one instance may grow to.
const MAX_TABLE_ELEMENTS: usize = 1_000_000;

/// The error a memory growth past the cap traps with.
#[derive(Debug, thiserror::Error)]
#[error(
    "memory growth failure: the module asked for {desired} bytes in all, its cap is {limit} bytes"
)]
pub(crate) struct MemoryCapExceeded {
    desired: usize,
    limit: usize,
}

/// Caps the memory of an instance, all its memories together (a component may hold
/// several), and remembers the largest total seen.
pub(crate) struct Limiter {
    memory_limit: usize,
    memory_total: usize,
    pub(crate) memory_peak: usize,
}

impl Limiter {
    pub(crate) fn new(memory_limit: usize) -> Limiter {
        Limiter {
            memory_limit,
            memory_total: 0,
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
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = (self.memory_total - current.min(self.memory_total)).saturating_add(desired);
        if total > self.memory_limit {
            return Err(wasmtime::Error::new(MemoryCapExceeded {
                desired: total,
                limit: self.memory_limit,
            }));
        }
        self.memory_total = total;
        self.memory_peak = self.memory_peak.max(total);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_holds_for_all_memories_together() {
        let mut limiter = Limiter::new(100);
        assert!(limiter.memory_growing(0, 60, None).unwrap());
        assert!(limiter.memory_growing(60, 80, None).unwrap());
        // A second memory may have only what the first left.
        assert!(limiter.memory_growing(0, 30, None).is_err());
        assert!(limiter.memory_growing(0, 20, None).unwrap());
        assert_eq!(limiter.memory_peak, 100);
    }
}

//! What one instance may use: the limits a module's instances run under, and the
//! store's limiter that holds it to them: memory (with its peak recorded, to recycle
//! instances that grew), tables counted as the bytes they take against the same cap,
//! and how many core instances, tables and memories it may create. Instantiation is
//! charged too: initial sizes pass through the same checks as growth.

use std::time::Duration;

use wasmtime::ResourceLimiter;

use crate::compile::CompileBudget;

/// How often the engine's epoch advances; deadlines are counted in these ticks.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Most resources (WASI streams, pollables) and component handles one instance may hold
/// at once: far above what a transform uses, far below what would cost the host much.
pub(crate) const MAX_HANDLES: usize = 10_000;

/// The limits one module's instances run under. Each module loaded into an engine
/// may have its own (a service hosts many tenants' modules in one engine).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceLimits {
    /// Most linear memory one instance may grow to, in bytes.
    pub memory_limit_bytes: usize,
    /// Longest one `init` or `transform` call may run before it is interrupted.
    pub batch_deadline: Duration,
    /// Fuel (roughly, Wasm instructions) one call may use; unlimited when `None`.
    /// Deterministic, unlike the deadline, at a cost of about 10-15% speed; needs an
    /// engine with [`EngineConfig::fuel_metering`](crate::EngineConfig::fuel_metering).
    pub fuel_per_batch: Option<u64>,
    /// Most bytes of keys, values and headers one batch may produce.
    pub max_output_bytes: usize,
    /// An instance whose memory grew past this is replaced between batches.
    pub recycle_memory_bytes: usize,
    /// Log messages per second one instance may write before they are dropped.
    pub log_messages_per_second: u32,
    /// What compiling the module may use (when the engine compiles in a worker).
    pub compile: CompileBudget,
}

impl Default for InstanceLimits {
    fn default() -> InstanceLimits {
        InstanceLimits {
            memory_limit_bytes: 256 * 1024 * 1024,
            batch_deadline: Duration::from_secs(10),
            fuel_per_batch: None,
            max_output_bytes: 256 * 1024 * 1024,
            recycle_memory_bytes: 128 * 1024 * 1024,
            log_messages_per_second: 20,
            compile: CompileBudget::default(),
        }
    }
}

impl InstanceLimits {
    pub(crate) fn deadline_ticks(&self) -> u64 {
        (self.batch_deadline.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64
    }
}

/// Bytes one table element takes in the host (a pointer to a function or reference).
const TABLE_ELEMENT_BYTES: usize = 8;

/// Most core instances one transform instance may create (componentize-py's guests
/// create 14; `shape.rs` checks the same count before compiling).
const MAX_CORE_INSTANCES: usize = 64;

/// Most tables one transform instance may hold.
const MAX_TABLES: usize = 64;

/// Most linear memories one transform instance may hold (every SDK's module has one).
/// Each reserves address space for its guard regions (4 GiB and more), so this bounds
/// one instance's reservation, and a tenant's by its pipelines and instances.
const MAX_MEMORIES: usize = 4;

/// The error a memory growth past the cap traps with.
#[derive(Debug, thiserror::Error)]
#[error(
    "memory growth failure: the module asked for {desired} bytes in all (memories and tables), its cap is {limit} bytes"
)]
pub(crate) struct MemoryCapExceeded {
    desired: usize,
    limit: usize,
}

/// The error a table growth past the cap traps with.
#[derive(Debug, thiserror::Error)]
#[error(
    "table growth failure: the module's tables would take {desired} bytes with its memory, its cap is {limit} bytes"
)]
pub(crate) struct TableCapExceeded {
    desired: usize,
    limit: usize,
}

/// Caps the memory of an instance, all its memories and tables together (a component
/// may hold several of each), and remembers the largest memory total seen.
pub(crate) struct Limiter {
    memory_limit: usize,
    memory_total: usize,
    table_bytes: usize,
    pub(crate) memory_peak: usize,
}

impl Limiter {
    pub(crate) fn new(memory_limit: usize) -> Limiter {
        Limiter {
            memory_limit,
            memory_total: 0,
            table_bytes: 0,
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
        if total.saturating_add(self.table_bytes) > self.memory_limit {
            return Err(wasmtime::Error::new(MemoryCapExceeded {
                desired: total.saturating_add(self.table_bytes),
                limit: self.memory_limit,
            }));
        }
        self.memory_total = total;
        self.memory_peak = self.memory_peak.max(total);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let added = desired
            .saturating_sub(current)
            .saturating_mul(TABLE_ELEMENT_BYTES);
        let tables = self.table_bytes.saturating_add(added);
        if tables.saturating_add(self.memory_total) > self.memory_limit {
            return Err(wasmtime::Error::new(TableCapExceeded {
                desired: tables.saturating_add(self.memory_total),
                limit: self.memory_limit,
            }));
        }
        self.table_bytes = tables;
        Ok(true)
    }

    fn instances(&self) -> usize {
        MAX_CORE_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
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

    #[test]
    fn tables_count_as_bytes_against_the_same_cap() {
        let mut limiter = Limiter::new(1000);
        assert!(limiter.memory_growing(0, 600, None).unwrap());
        // 50 elements of 8 bytes fit beside 600 bytes of memory ...
        assert!(limiter.table_growing(0, 50, None).unwrap());
        // ... 51 more in another table do not.
        let error = limiter.table_growing(0, 51, None).unwrap_err();
        assert!(error.to_string().contains("cap is 1000 bytes"), "{error}");
        // And memory cannot take what the tables hold.
        assert!(limiter.memory_growing(600, 700, None).is_err());
    }
}

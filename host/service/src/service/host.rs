//! What the operator sees of the host as a whole.

use serde::Serialize;

use super::Service;
use crate::auth::Operator;
use crate::config::HostLimits;
use crate::store::PipelineState;

/// The host as the operator sees it.
#[derive(Clone, Debug, Serialize)]
pub struct HostView {
    /// Seconds since the service started.
    pub uptime_seconds: u64,
    /// The process's memory.
    pub memory: HostMemory,
    /// The caps over all tenants.
    pub limits: HostLimits,
    /// Each tenant's pipelines and the memory they reserve.
    pub tenants: Vec<TenantFigures>,
}

/// The process's memory and the guest memory pipelines reserve.
#[derive(Clone, Debug, Serialize)]
pub struct HostMemory {
    /// Resident memory of the service process (unset where `/proc` is not there).
    pub rss_bytes: Option<u64>,
    /// Guest memory all pipelines may use together (the sum of their limits), in MiB.
    pub reserved_guest_mib: usize,
    /// The host's cap on that sum (`[limits] max_memory_mib`).
    pub max_guest_mib: usize,
}

/// One tenant's pipelines by state and what they reserve, beside its limits.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TenantFigures {
    /// The tenant.
    pub tenant: String,
    /// Pipelines running.
    pub running: usize,
    /// Pipelines paused.
    pub paused: usize,
    /// Pipelines failed.
    pub failed: usize,
    /// Pipelines finished (past their `ending_version`).
    pub finished: usize,
    /// Guest memory its pipelines may use together, in MiB.
    pub reserved_guest_mib: usize,
    /// Its cap on pipelines.
    pub max_pipelines: usize,
    /// Its cap on one pipeline's guest memory, in MiB.
    pub max_memory_mib: usize,
    /// Keyed state its pipelines may keep together (`[state] max_mib`), in MiB.
    pub reserved_state_mib: u64,
    /// Its cap on that sum, in MiB.
    pub max_state_total_mib: u64,
    /// Bytes of keyed state its pipelines running on this node keep.
    pub state_bytes: u64,
}

impl Service {
    /// The host's memory, limits and pipelines per tenant (operator only).
    pub fn host_view(&self, _: &Operator) -> HostView {
        let mut tenants: Vec<TenantFigures> = {
            let known = self.tenants.read().unwrap_or_else(|e| e.into_inner());
            known
                .iter()
                .map(|(name, tenant)| TenantFigures {
                    tenant: name.clone(),
                    max_pipelines: tenant.config.max_pipelines,
                    max_memory_mib: tenant.config.max_memory_mib,
                    max_state_total_mib: tenant.config.max_state_total_mib,
                    ..TenantFigures::default()
                })
                .collect()
        };
        let mut reserved_guest_mib = 0;
        for entry in self.entries() {
            let definition = entry.definition();
            reserved_guest_mib += entry.reserved.memory_mib;
            let Some(figures) = tenants.iter_mut().find(|t| t.tenant == definition.tenant) else {
                continue;
            };
            figures.reserved_guest_mib += entry.reserved.memory_mib;
            figures.reserved_state_mib += entry.reserved.state_mib;
            figures.state_bytes += entry.metrics.snapshot().state.bytes;
            match definition.state {
                PipelineState::Running => figures.running += 1,
                PipelineState::Paused => figures.paused += 1,
                PipelineState::Failed => figures.failed += 1,
                PipelineState::Finished => figures.finished += 1,
            }
        }
        let limits = self.config.limits.clone();
        HostView {
            uptime_seconds: self.started.elapsed().as_secs(),
            memory: HostMemory {
                rss_bytes: resident_bytes(),
                reserved_guest_mib,
                max_guest_mib: limits.max_memory_mib,
            },
            limits,
            tenants,
        }
    }
}

/// The process's resident memory, from `/proc/self/status` (Linux).
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    rss_from_status(&status)
}

fn rss_from_status(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_memory_is_read_from_the_status_file() {
        let status = "Name:\tsluice\nVmPeak:\t  900 kB\nVmRSS:\t   12345 kB\nThreads:\t9\n";
        assert_eq!(rss_from_status(status), Some(12345 * 1024));
        assert_eq!(rss_from_status("Name:\tsluice\n"), None);
    }
}

//! What a store holds: the host's state for one instance, and the batch it lends the
//! module during a `transform` call. A leaf: the contract's bindings name
//! [`BatchState`] as their batch resource, and everything built on the bindings uses
//! both.

use std::sync::Arc;

use delta_kernel::arrow::record_batch::RecordBatch;
use sluice_encoding::{Format, Framed};
use sluice_model::Record;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::budget::{CallDeadline, HostLimitExceeded, OutputBudget, check_count};
use crate::keyed::KeyedSession;
use crate::limits::{InstanceLimits, Limiter, MAX_HANDLES};
use crate::log::{LogTap, ModuleLog};
use crate::lookups::{LookupAccess, LookupView};
use crate::own_schemas::OwnSchemas;
use crate::wasi::{SinceStart, StderrTail, WaitLimit, Waits, sealed};

/// What a store holds for its instance: its limits, its log, the resources it was
/// lent, and a WASI context that grants nothing.
pub(crate) struct HostState {
    pub(crate) limiter: Limiter,
    /// When the current call must end; host calls check it as they work.
    pub(crate) deadline: CallDeadline,
    pub(crate) table: ResourceTable,
    pub(crate) log: ModuleLog,
    /// How the helpers write records (`emit-encoded`).
    pub(crate) format: Arc<Format>,
    /// The schemas the module framed its own bytes with (`emit-framed`).
    pub(crate) own_schemas: OwnSchemas,
    wasi: WasiCtx,
    /// The end of what the module wrote to stderr, for trap messages.
    pub(crate) stderr: StderrTail,
    clock: SinceStart,
    /// The deadline, as the module's waits in WASI see it.
    wait_limit: WaitLimit,
    /// The keyed state the module's `state` calls reach.
    pub(crate) keyed: Keyed,
    /// Whether a `transform` call is running (lookups are there only then).
    pub(crate) in_batch: bool,
    /// The lookup tables the module's `lookup` calls reach during the batch.
    pub(crate) lookups: Option<Arc<dyn LookupView>>,
    /// How many keys the module looked up during the batch.
    pub(crate) lookup_access: LookupAccess,
}

/// What the module's `state` calls reach.
pub(crate) enum Keyed {
    /// Nothing: the instance is in `init`.
    Init,
    /// Nothing: the batch is transformed without state.
    NotKept,
    /// The batch's state.
    Batch(KeyedSession),
}

impl HostState {
    /// The state of a new instance of `module` under `config`.
    pub(crate) fn new(
        config: &InstanceLimits,
        module: &str,
        log_tap: Option<LogTap>,
        format: Arc<Format>,
    ) -> HostState {
        let (wasi, stderr, clock) = sealed();
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_HANDLES);
        let deadline = CallDeadline::starting_now(config.batch_deadline);
        HostState {
            limiter: Limiter::new(config.memory_limit_bytes),
            deadline,
            table,
            log: ModuleLog::new(module, config.log_messages_per_second, log_tap),
            format,
            own_schemas: OwnSchemas::default(),
            wasi,
            stderr,
            clock,
            wait_limit: WaitLimit::new(deadline.at()),
            keyed: Keyed::Init,
            in_batch: false,
            lookups: None,
            lookup_access: LookupAccess::default(),
        }
    }

    /// Starts the deadline of a call.
    pub(crate) fn arm_deadline(&mut self, timeout: std::time::Duration) {
        self.deadline = CallDeadline::starting_now(timeout);
        self.wait_limit.set(self.deadline.at());
    }
}

impl Waits for HostState {
    fn waits(&mut self) -> (&mut ResourceTable, WaitLimit, SinceStart) {
        (&mut self.table, self.wait_limit.clone(), self.clock)
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// One batch during a `transform` call, and what the module made of it.
pub struct BatchState {
    pub(crate) batch: RecordBatch,
    pub(crate) records: Vec<Record>,
    pub(crate) rejected: Vec<(u32, String)>,
    /// Which rows were rejected (sized on the first rejection): one rejection per row.
    pub(crate) rejected_rows: Vec<bool>,
    /// The first contract violation in the module's output, reported after the call.
    pub(crate) bad_output: Option<String>,
    pub(crate) output: OutputBudget,
    /// Records of helper calls whose keys or values wait for a schema id.
    pub(crate) framed: Vec<Framed>,
}

impl BatchState {
    pub(crate) fn new(batch: RecordBatch, max_output_bytes: usize) -> BatchState {
        BatchState {
            batch,
            records: Vec::new(),
            rejected: Vec::new(),
            rejected_rows: Vec::new(),
            bad_output: None,
            output: OutputBudget::new(max_output_bytes),
            framed: Vec::new(),
        }
    }

    pub(crate) fn num_rows(&self) -> u32 {
        self.batch.num_rows() as u32
    }

    /// What the host holds for the module's records and rejections.
    #[cfg(test)]
    pub(crate) fn held_output_bytes(&self) -> usize {
        self.records
            .iter()
            .map(crate::budget::record_bytes)
            .sum::<usize>()
            + self
                .rejected
                .iter()
                .map(|(_, message)| crate::budget::rejection_bytes(message.len()))
                .sum::<usize>()
    }

    pub(crate) fn fail(&mut self, message: String) {
        self.bad_output.get_or_insert(message);
    }

    /// Refuses a list of row indexes longer than the batch.
    pub(crate) fn check_rows(
        &self,
        call: &'static str,
        rows: usize,
    ) -> Result<(), HostLimitExceeded> {
        let num_rows = self.batch.num_rows();
        check_count(call, "row indexes", rows, num_rows, || {
            format!("the batch has {num_rows} rows")
        })
    }
}

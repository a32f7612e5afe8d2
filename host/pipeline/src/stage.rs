//! The transform stage: one module instance per pipeline, the retry-once rule for
//! traps, instance recycling, and the error policy for rows and batches that fail.

use std::sync::Arc;
use std::time::Instant;

use sluice_engine::{
    BatchContext, BatchOutput, CompileBudget, EngineConfig, EngineError, Format, InstanceLimits,
    LookupView, StateChanges, TransformEngine, TransformError, TransformModule, TrapKind,
};
use sluice_source::arrow::array::{BooleanArray, RecordBatch};
use sluice_source::arrow::compute::filter_record_batch;

use crate::config::{ErrorPolicy, PipelineConfig, TransformSection};
use crate::keyed::StageState;
use crate::lookups::PipelineLookups;
use crate::metrics::PipelineMetrics;
use crate::module::{Instance, Module};
use crate::stage_output::{FailedRow, StageOutput};
use crate::topics::TopicRule;

/// Most row errors one batch may report one by one before the batch as a whole is
/// treated as failed.
const MAX_ROW_ERRORS_PER_BATCH: usize = 100;

/// The loaded module and its running instance.
pub(crate) struct TransformStage {
    module: Arc<dyn Module>,
    params: Vec<(String, String)>,
    format: Arc<Format>,
    instance: Option<Box<dyn Instance>>,
    pub(crate) policy: ErrorPolicy,
    /// The topics its records may name.
    topics: TopicRule,
    pipeline: String,
    metrics: Arc<PipelineMetrics>,
    /// The pipeline's state, if it keeps state.
    keyed: Option<StageState>,
    /// The pipeline's lookup tables, if it names some.
    lookups: Option<Arc<PipelineLookups>>,
}

/// The limits a `[transform]` section gives its module's instances.
pub fn instance_limits(transform: &TransformSection) -> InstanceLimits {
    let bytes = |mib: usize| mib.saturating_mul(1024 * 1024);
    let memory = bytes(transform.memory_limit_mib);
    InstanceLimits {
        memory_limit_bytes: memory,
        batch_deadline: transform.batch_timeout,
        fuel_per_batch: transform.fuel_per_batch,
        max_output_bytes: bytes(transform.max_output_mib),
        recycle_memory_bytes: transform.recycle_memory_mib.map_or(memory / 2, bytes),
        log_messages_per_second: transform.log_messages_per_second,
        compile: CompileBudget {
            memory_bytes: bytes(transform.compile_memory_mib),
            deadline: transform.compile_timeout,
        },
    }
}

/// Loads a pipeline's module from the path its config names, in an engine of its own.
pub(crate) fn load_module(config: &PipelineConfig) -> Result<TransformModule, EngineError> {
    let transform = &config.transform;
    let engine = TransformEngine::new(EngineConfig {
        limits: instance_limits(transform),
        cache_dir: transform.module_cache_dir.clone(),
        // One module: its compile may use every core.
        max_concurrent_compiles: 1,
        ..EngineConfig::default()
    })?;
    engine.load(&transform.module)
}

impl TransformStage {
    /// Starts the module's first instance, transforming with `keyed` state if the
    /// pipeline keeps state.
    pub(crate) fn start(
        config: &PipelineConfig,
        module: Arc<dyn Module>,
        metrics: Arc<PipelineMetrics>,
        keyed: Option<StageState>,
    ) -> Result<TransformStage, EngineError> {
        let instance = module.instantiate(&config.transform_params(), Arc::new(config.format()))?;
        tracing::info!(
            pipeline = config.pipeline.name,
            module = module.name(),
            contract = module.contract(),
            digest = module.digest(),
            "Transform module loaded."
        );
        let mut stage = TransformStage::with_instance(config, module, instance, metrics);
        if let Some(keyed) = keyed {
            stage.set_state(keyed);
        }
        Ok(stage)
    }

    /// Transforms with `keyed` state from the next batch on.
    pub(crate) fn set_state(&mut self, keyed: StageState) {
        self.keyed = Some(keyed);
    }

    /// A stage of `config`'s pipeline, without keyed state, that starts with
    /// `instance` (one of `module`'s, initialised with the pipeline's parameters).
    pub(crate) fn with_instance(
        config: &PipelineConfig,
        module: Arc<dyn Module>,
        instance: Box<dyn Instance>,
        metrics: Arc<PipelineMetrics>,
    ) -> TransformStage {
        TransformStage {
            module,
            params: config.transform_params(),
            format: Arc::new(config.format()),
            instance: Some(instance),
            policy: config.transform.on_error,
            topics: TopicRule::of(&config.sink),
            pipeline: config.pipeline.name.clone(),
            metrics,
            keyed: None,
            lookups: None,
        }
    }

    /// Reads `lookups` from the next batch on.
    pub(crate) fn set_lookups(&mut self, lookups: Arc<PipelineLookups>) {
        self.lookups = Some(lookups);
    }

    /// The pipeline's lookup tables, if it names some.
    pub(crate) fn lookups(&self) -> Option<&Arc<PipelineLookups>> {
        self.lookups.as_ref()
    }

    /// The largest linear memory the running instance reached, in bytes (0 between
    /// instances).
    pub(crate) fn memory_peak(&self) -> u64 {
        self.instance.as_ref().map_or(0, |i| i.memory_peak() as u64)
    }

    /// The pipeline's state, if it keeps state.
    pub(crate) fn keyed(&self) -> Option<&StageState> {
        self.keyed.as_ref()
    }

    /// Runs `module` from the next batch on, starting with `instance` (one of its own,
    /// already initialised with this pipeline's parameters) or, without one, with a
    /// fresh instance made when the next batch comes.
    pub(crate) fn swap(&mut self, module: Arc<dyn Module>, instance: Option<Box<dyn Instance>>) {
        self.module = module;
        self.instance = instance;
    }

    /// SHA-256 of the module, recorded with every committed position.
    pub(crate) fn digest(&self) -> &str {
        self.module.digest()
    }

    /// The module's name.
    pub(crate) fn name(&self) -> &str {
        self.module.name()
    }

    /// Runs a batch through the module, with the lookup tables as `lookups` has them
    /// for it. Under the `fail` policy the first failure is returned as an error (with
    /// the row it names); otherwise failed rows come back beside the good records.
    pub(crate) fn apply(
        &mut self,
        batch: &RecordBatch,
        lookups: Option<Arc<dyn LookupView>>,
    ) -> Result<StageOutput, (u32, TransformError)> {
        // The module's own log messages are shown under the pipeline they belong to.
        let _span = tracing::info_span!("pipeline", name = %self.pipeline).entered();
        let started = Instant::now();
        let context = BatchContext {
            state: self.keyed.as_ref().map(|keyed| keyed.scope.clone()),
            lookups,
        };
        let result = self.apply_rerunning(batch, &context);
        self.metrics.record_batch(started.elapsed(), &result);
        result
    }

    fn apply_rerunning(
        &mut self,
        batch: &RecordBatch,
        context: &BatchContext,
    ) -> Result<StageOutput, (u32, TransformError)> {
        let mut excluded: Vec<u32> = Vec::new();
        let mut failed: Vec<FailedRow> = Vec::new();
        loop {
            let (input, mapping) = without_rows(batch, &excluded);
            let output = match self.call(&input, context) {
                Ok(output) => output,
                Err(TransformError::Row {
                    row,
                    message,
                    module,
                }) if self.policy != ErrorPolicy::Fail
                    && excluded.len() < MAX_ROW_ERRORS_PER_BATCH =>
                {
                    // The module gave up on the whole batch because of one row: run the
                    // batch again without it.
                    let original = mapping.get(row as usize).copied().unwrap_or(row);
                    tracing::debug!(
                        module,
                        row = original,
                        "Rerunning a batch without the row the module failed on."
                    );
                    excluded.push(original);
                    excluded.sort_unstable();
                    failed.push(FailedRow {
                        row: original,
                        kind: "row",
                        error: message,
                    });
                    continue;
                }
                Err(error) => {
                    let row = match &error {
                        TransformError::Row { row, .. } => {
                            mapping.get(*row as usize).copied().unwrap_or(*row)
                        }
                        _ => 0,
                    };
                    if self.policy == ErrorPolicy::Fail
                        || matches!(
                            error,
                            TransformError::Input { .. }
                                | TransformError::State { .. }
                                | TransformError::Lookup { .. }
                        )
                    {
                        return Err((row, error));
                    }
                    let kind = match error {
                        TransformError::Trap { .. } => "trap",
                        _ => "batch",
                    };
                    let message = error.to_string();
                    return Ok(StageOutput {
                        records: Vec::new(),
                        framed: Vec::new(),
                        state: StateChanges::default(),
                        state_access: Default::default(),
                        failed: (0..batch.num_rows() as u32)
                            .map(|row| FailedRow {
                                row,
                                kind,
                                error: message.clone(),
                            })
                            .collect(),
                    });
                }
            };
            let mut records = output.records;
            for record in &mut records {
                record.source_row = mapping[record.source_row as usize];
            }
            let mut framed = output.framed;
            // A record on a topic the pipeline may not write to fails its row as the
            // module's own rejection would.
            let refused = self.topics.refuse(&mut records, &mut framed);
            let rejected = output
                .rejected
                .into_iter()
                .map(|rejected| (mapping[rejected.row as usize], rejected.message));
            for (row, message) in refused.into_iter().chain(rejected) {
                if self.policy == ErrorPolicy::Fail {
                    return Err((
                        row,
                        TransformError::Row {
                            module: self.module.name().to_string(),
                            row,
                            message,
                        },
                    ));
                }
                failed.push(FailedRow {
                    row,
                    kind: "row",
                    error: message,
                });
            }
            failed.sort_by_key(|f| f.row);
            // A row the module rejected and that also named a refused topic fails once.
            failed.dedup_by_key(|f| f.row);
            return Ok(StageOutput {
                records,
                framed,
                failed,
                state: output.state,
                state_access: output.state_access,
            });
        }
    }

    /// Calls the instance; a trap gets one retry on a fresh instance. A fresh instance
    /// also replaces one whose memory grew past the recycling threshold.
    fn call(
        &mut self,
        batch: &RecordBatch,
        context: &BatchContext,
    ) -> Result<BatchOutput, TransformError> {
        let mut retried = false;
        loop {
            let instance = match self.instance.as_mut() {
                Some(instance) => instance,
                None => self.instance.insert(self.fresh_instance()?),
            };
            let transformed = instance.transform_in(batch, context);
            match transformed {
                Ok(output) => {
                    if instance.wants_recycling() {
                        tracing::info!(
                            module = self.module.name(),
                            "Replacing a transform instance whose memory grew past the recycling threshold."
                        );
                        self.instance = None;
                    }
                    return Ok(output);
                }
                Err(error @ TransformError::Trap { kind, .. }) => {
                    // A trapped instance is never reused.
                    self.instance = None;
                    self.metrics.count_trap(kind);
                    // A host or state limit is the module's own doing, the same on a
                    // fresh instance: no retry.
                    if retried || matches!(kind, TrapKind::HostLimit | TrapKind::StateLimit) {
                        return Err(error);
                    }
                    tracing::warn!(module = self.module.name(), %error, "The transform module trapped; retrying the batch once on a fresh instance.");
                    retried = true;
                }
                Err(error) => return Err(error),
            }
        }
    }

    fn fresh_instance(&self) -> Result<Box<dyn Instance>, TransformError> {
        self.module
            .instantiate(&self.params, self.format.clone())
            .map_err(|e| TransformError::Batch {
                module: self.module.name().to_string(),
                message: format!("a fresh instance could not start: {e}"),
            })
    }
}

/// The batch without the `excluded` rows (sorted), and for each remaining row its index
/// in the original batch.
fn without_rows(batch: &RecordBatch, excluded: &[u32]) -> (RecordBatch, Vec<u32>) {
    let rows = batch.num_rows() as u32;
    if excluded.is_empty() {
        return (batch.clone(), (0..rows).collect());
    }
    let keep: Vec<bool> = (0..rows)
        .map(|r| excluded.binary_search(&r).is_err())
        .collect();
    let mapping = (0..rows).filter(|&r| keep[r as usize]).collect();
    let filtered = filter_record_batch(batch, &BooleanArray::from(keep))
        .expect("a mask of the batch's own length filters it");
    (filtered, mapping)
}

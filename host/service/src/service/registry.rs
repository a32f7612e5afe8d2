//! The registry's entries and each pipeline's task: started, restored after a restart,
//! stopped at a batch boundary, and how it ended (a panic included) recorded.

use std::any::Any;
use std::collections::VecDeque;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use sluice_pipeline::{
    LiveState, PipelineMetrics, RunControls, RunMode, ShadowSlot, StartFrom, SwapReport,
    SwapRequest,
};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::Service;
use super::history::MetricsHistory;
use super::last_swap::LastSwap;
use crate::error::ServiceError;
use crate::logs::PipelineLog;
use crate::store::{PipelineDefinition, PipelineState};

/// Longest a pause or shutdown waits for a pipeline to commit and stop.
const STOP_WAIT: Duration = Duration::from_secs(60);

/// A running pipeline's task and its controls.
pub(super) struct Running {
    /// The digest of the module it runs.
    pub(super) module: String,
    /// The generation of the state it runs with.
    pub(super) state_generation: u64,
    pub(super) shutdown: watch::Sender<bool>,
    pub(super) swaps: mpsc::Sender<SwapRequest>,
    pub(super) task: JoinHandle<()>,
}

/// What a pipeline may use, from its config: reserved when it is created, so the
/// pipelines of a tenant or a host never together pass its caps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Reserved {
    /// Guest memory (`[transform] memory_limit_mib`).
    pub(super) memory_mib: usize,
    /// Keyed state (`[state] max_mib`; 0 without `[state]`).
    pub(super) state_mib: u64,
}

impl Reserved {
    /// What a pipeline with `config` may use.
    pub(super) fn of(config: &sluice_pipeline::PipelineConfig) -> Reserved {
        Reserved {
            memory_mib: config.guest_memory_mib(),
            state_mib: config.state.as_ref().map_or(0, |s| s.max_mib),
        }
    }
}

/// One pipeline in the registry.
pub(super) struct Entry {
    pub(super) definition: Mutex<PipelineDefinition>,
    pub(super) metrics: Arc<PipelineMetrics>,
    // Its keyed state's store while it runs on this node, for the API's reads.
    pub(super) live_state: Arc<LiveState>,
    pub(super) log: Arc<PipelineLog>,
    pub(super) rates: Mutex<VecDeque<(Instant, u64)>>,
    // Serialises what is done to one pipeline (deploy, pause, ...).
    pub(super) control: tokio::sync::Mutex<Option<Running>>,
    // What it may use, counted against its tenant's and the host's caps.
    pub(super) reserved: Reserved,
    // The last switch this node made for a deploy through the cluster's state.
    pub(super) last_switch: Mutex<Option<SwapReport>>,
    // Its figures over the last hour.
    pub(super) history: Mutex<MetricsHistory>,
    // The last module swap done through this node.
    pub(super) last_swap: Mutex<Option<LastSwap>>,
    // Held while its dead letters are read, so reads of one pipeline do not pile up.
    pub(super) reading_letters: tokio::sync::Mutex<()>,
    // Its shadow deploy, if one was started on this node.
    pub(super) shadow: Arc<ShadowSlot>,
}

impl Entry {
    /// Change rows per second over the last rate samples.
    pub(super) fn rows_per_second(&self) -> f64 {
        let rates = self.rates.lock().unwrap_or_else(|e| e.into_inner());
        match (rates.front(), rates.back()) {
            (Some((t0, r0)), Some((t1, r1))) if t1 > t0 => {
                (r1 - r0) as f64 / t1.duration_since(*t0).as_secs_f64()
            }
            _ => 0.0,
        }
    }

    /// A new entry, not yet running.
    pub(super) fn new(definition: PipelineDefinition, reserved: Reserved) -> Arc<Entry> {
        Arc::new(Entry {
            definition: Mutex::new(definition),
            metrics: Arc::default(),
            live_state: Arc::default(),
            log: Arc::default(),
            rates: Mutex::default(),
            control: tokio::sync::Mutex::new(None),
            reserved,
            last_switch: Mutex::default(),
            history: Mutex::default(),
            last_swap: Mutex::default(),
            reading_letters: tokio::sync::Mutex::default(),
            shadow: Arc::default(),
        })
    }

    pub(super) fn definition(&self) -> PipelineDefinition {
        self.definition
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Takes a definition another node wrote, unless this node has a newer one (a
    /// change it made that the record has not caught up with). Returns whether it did.
    pub(super) fn replace(&self, written: PipelineDefinition) -> bool {
        let mut definition = self.definition.lock().unwrap_or_else(|e| e.into_inner());
        if written.revision < definition.revision {
            return false;
        }
        *definition = written;
        true
    }

    /// Whether its task runs.
    pub(super) fn is_running(control: &Option<Running>) -> bool {
        control.as_ref().is_some_and(|r| !r.task.is_finished())
    }
}

impl Service {
    /// Changes a pipeline's definition and stores it (in a cluster, writes it to the
    /// shared state too); a change that changes nothing is not stored.
    pub(super) fn update(
        &self,
        entry: &Entry,
        change: impl FnOnce(&mut PipelineDefinition),
    ) -> Result<(), ServiceError> {
        let changed = {
            let mut definition = entry.definition.lock().unwrap_or_else(|e| e.into_inner());
            let before = definition.clone();
            change(&mut definition);
            if *definition == before {
                return Ok(());
            }
            definition.revision = before.revision + 1;
            definition.clone()
        };
        self.state.save_pipeline(&changed)?;
        if let Some(cluster) = self.cluster.get() {
            cluster.publish_definition(&changed);
        }
        Ok(())
    }

    /// Puts a pipeline defined elsewhere (stored, or in the cluster's state) into the
    /// registry, not yet running.
    pub(super) fn register(&self, definition: PipelineDefinition) -> Arc<Entry> {
        let reserved = self
            .config_of(&definition)
            .map_or_else(|_| Reserved::default(), |c| Reserved::of(&c));
        let key = (definition.tenant.clone(), definition.name.clone());
        let entry = Entry::new(definition, reserved);
        self.pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, entry.clone());
        entry
    }

    /// Starts every stored pipeline that was running when the service last stopped.
    pub async fn restore(self: &Arc<Service>) -> Result<usize, ServiceError> {
        for (name, tenant) in self.state.tenants()? {
            if let Err(e) = self.install_tenant(&name, tenant) {
                tracing::error!(tenant = name, error = %e, "A tenant put through the API could not be restored; its calls are refused until it is put again.");
            }
        }
        let definitions = self.state.pipelines()?;
        let count = definitions.len();
        for definition in definitions {
            let entry = self.register(definition.clone());
            if definition.state == PipelineState::Running {
                let mut control = entry.control.lock().await;
                if let Err(e) = self.start(&entry, &mut control) {
                    tracing::error!(tenant = definition.tenant, pipeline = definition.name, error = %e, "A stored pipeline could not be restored; it is marked failed.");
                    self.update(&entry, |d| {
                        d.state = PipelineState::Failed;
                        d.error = Some(e.to_string());
                    })?;
                }
            }
        }
        self.ready.store(true, Ordering::Relaxed);
        tracing::info!(pipelines = count, "The service restored its pipelines.");
        Ok(count)
    }

    /// Starts a pipeline's task. The caller holds the pipeline's control lock.
    pub(super) fn start(
        self: &Arc<Service>,
        entry: &Arc<Entry>,
        control: &mut Option<Running>,
    ) -> Result<(), ServiceError> {
        let definition = entry.definition();
        let config = self.config_of(&definition)?;
        self.update(entry, |d| {
            d.state = PipelineState::Running;
            d.error = None;
        })?;
        let definition_module = definition.module.clone();
        let state_generation = definition.state_generation;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let (swaps, swaps_rx) = mpsc::channel(1);
        let service = self.clone();
        let task_entry = entry.clone();
        let task = tokio::spawn(async move {
            let entry = task_entry;
            let run = {
                let (service, entry) = (service.clone(), entry.clone());
                Guarded(Box::pin(async move {
                    let prepared = {
                        let (service, entry) = (service.clone(), entry.clone());
                        let config = config.clone();
                        let (tenant, digest) = (definition.tenant, definition.module);
                        tokio::task::spawn_blocking(move || {
                            service.prepare_module(&entry, &config, &digest, &tenant)
                        })
                        .await
                    };
                    let module = match prepared {
                        Ok(Ok((module, _))) => module,
                        // The service is stopping: the pipeline stops as it would at a
                        // batch boundary, keeping its state, and starts again next time.
                        Ok(Err(ServiceError::Unavailable(_))) => return Ok(false),
                        Ok(Err(e)) => return Err(e.to_string()),
                        Err(e) => return Err(format!("preparing the module failed: {e}")),
                    };
                    let controls = RunControls {
                        module: Some(Arc::new(module)),
                        swaps: Some(swaps_rx),
                        metrics: entry.metrics.clone(),
                        live_state: entry.live_state.clone(),
                        quiet_progress: false,
                        shadow: entry.shadow.clone(),
                        lookups: service.lookups.clone(),
                    };
                    service
                        .destination
                        .run(
                            &config,
                            RunMode::Follow,
                            StartFrom::StoredPosition,
                            shutdown_rx,
                            controls,
                        )
                        .await
                        .map(|summary| {
                            config
                                .source
                                .ending_version
                                .is_some_and(|end| summary.position.version > end)
                        })
                        .or_else(|e| {
                            match e.is_fenced() && service.cluster.get().is_some() {
                                // Another node holds the pipeline's slot now and took over.
                                true => Ok(false),
                                false => Err(e.to_string()),
                            }
                        })
                }))
            };
            let result = run.await.unwrap_or_else(|panic| {
                Err(format!(
                    "the pipeline's task panicked: {panic}; this is a bug in Sluice, please report it"
                ))
            });
            service.finished(&entry, result);
        });
        *control = Some(Running {
            module: definition_module,
            state_generation,
            shutdown,
            swaps,
            task,
        });
        Ok(())
    }

    /// Deletes the state of `generation` of a pipeline that does not run (its changelog
    /// topic and this node's copy), logging what fails.
    pub(super) async fn forget_state(&self, definition: &PipelineDefinition, generation: u64) {
        let (tenant, name) = (definition.tenant.as_str(), definition.name.as_str());
        let config = match self.pipeline_config(
            tenant,
            name,
            &definition.config,
            &definition.module,
            generation,
        ) {
            Ok(config) if config.state.is_some() => config,
            Ok(_) => return,
            Err(error) => {
                tracing::warn!(tenant, pipeline = name, %error, "A pipeline's state could not be deleted: its config no longer reads.");
                return;
            }
        };
        match self.destination.forget_state(&config).await {
            Ok(()) => tracing::info!(
                tenant,
                pipeline = name,
                generation,
                changelog = config.changelog_topic(),
                "Deleted a pipeline's state: its changelog topic and this node's copy."
            ),
            Err(error) => tracing::warn!(
                tenant,
                pipeline = name,
                generation,
                %error,
                "A pipeline's state could not be deleted; delete its changelog topic by hand, or a new pipeline of the same name starts with it."
            ),
        }
    }

    /// Records how a pipeline's task ended: `Ok(true)` when it delivered its ending
    /// version.
    fn finished(&self, entry: &Entry, result: Result<bool, String>) {
        let definition = entry.definition();
        let (tenant, name) = (definition.tenant.as_str(), definition.name.as_str());
        let at = entry.metrics.snapshot();
        let stopped_at = Some(at.position);
        let stored = match result {
            Ok(true) => {
                tracing::info!(tenant, pipeline = name, position = %at.position, "A pipeline delivered its ending version and finished.");
                self.update(entry, |d| {
                    d.state = PipelineState::Finished;
                    d.stopped_at = stopped_at;
                })
            }
            Ok(false) => {
                tracing::info!(tenant, pipeline = name, "A pipeline stopped.");
                self.update(entry, |d| d.stopped_at = stopped_at)
            }
            Err(error) => {
                tracing::error!(tenant, pipeline = name, %error, "A pipeline stopped with an error; it stays stopped until it is resumed or gets a new module.");
                self.update(entry, |d| {
                    d.state = PipelineState::Failed;
                    d.error = Some(error);
                    d.stopped_at = stopped_at;
                })
            }
        };
        if let Err(e) = stored {
            tracing::error!(tenant, pipeline = name, error = %e, "A pipeline's status could not be stored.");
        }
    }

    /// Stops every pipeline after it commits its work, keeping their states, so the
    /// next start resumes them.
    pub async fn shutdown(&self) {
        // In a cluster, nothing starts a pipeline here any more.
        self.stop_following();
        // A compile may take minutes; nothing waits for one once the service stops
        // (also when it stops before its API serves, which `begin_stop` covers).
        self.engine.cancel_compiles();
        let entries = self.entries();
        // All at once: each waits for its own batch boundary and commit.
        let stopping: Vec<_> = entries
            .into_iter()
            .map(|entry| {
                tokio::spawn(async move {
                    let mut control = entry.control.lock().await;
                    stop(control.take()).await;
                })
            })
            .collect();
        for stopped in stopping {
            let _ = stopped.await;
        }
    }
}

/// Asks a pipeline's task to stop and waits for it.
pub(super) async fn stop(running: Option<Running>) {
    if let Some(running) = running {
        let _ = running.shutdown.send(true);
        let mut task = running.task;
        if tokio::time::timeout(STOP_WAIT, &mut task).await.is_err() {
            tracing::warn!(
                "A pipeline did not stop within {STOP_WAIT:?}; it was cancelled, and resumes from its last committed position."
            );
            task.abort();
        }
    }
}

/// A future that turns a panic while it is polled into `Err` with the panic's message,
/// so a pipeline whose task panics is recorded as failed instead of running forever.
struct Guarded<F>(Pin<Box<F>>);

impl<F: Future> Future for Guarded<F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(panic) => Poll::Ready(Err(panic_message(panic.as_ref()))),
        }
    }
}

/// What a panic said, when it said it with text.
fn panic_message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_in_the_task_becomes_an_error_with_its_message() {
        let panics = Guarded(Box::pin(async {
            tokio::task::yield_now().await;
            if std::hint::black_box(true) {
                panic!("the loop broke");
            }
            7
        }));
        assert_eq!(panics.await, Err("the loop broke".to_string()));
        let formatted = Guarded(Box::pin(async { panic!("batch {} of {}", 3, 9) }));
        assert_eq!(formatted.await, Err::<(), _>("batch 3 of 9".to_string()));
        assert_eq!(Guarded(Box::pin(async { 7 })).await, Ok(7));
    }
}

//! Cluster mode: the shared state and the slots this node holds, through Kafka (or the
//! in-memory [`ClusterIo`] of the tests). The API's writes go to the state topic; every
//! node applies each record in topic order, and the node holding a pipeline's slot runs
//! it. Without `[cluster]` none of this runs and the node owns every pipeline.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use sluice_cluster::blob::{self, Assembler, ChunkKey};
use sluice_cluster::{
    ClusterConfig, ClusterError, ClusterIo, Member, SharedLog, SharedTopic, SlotChange,
    StateRecord, slot_of,
};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::Service;
use super::deploy::{Deploy, DeployReport, swapped};
use super::placement::{Change, Figures, Placement, running};
use super::refusals::{Refusal, refusal_key};
use super::registry::{Entry, stop};
use super::reports::Reports;
use crate::config::TenantConfig;
use crate::error::ServiceError;
use crate::store::{ModuleEntry, PipelineDefinition, PipelineState};

/// Longest a call waits for this node to apply what other nodes wrote before it.
const CATCH_UP_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A node's part in its cluster.
pub(super) struct ClusterPart {
    config: ClusterConfig,
    node: String,
    log: Arc<dyn SharedLog>,
    /// Definitions a pipeline's owner changed, written in order by a task of their own.
    publishes: mpsc::UnboundedSender<PipelineDefinition>,
    /// The offset of the next record to apply: the records before it are applied.
    applied: watch::Sender<i64>,
    held: Mutex<BTreeSet<u32>>,
    reports: Arc<Reports>,
    membership: Mutex<Option<Box<dyn Member>>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

/// What `GET /v1/cluster` shows of a node.
#[derive(Clone, Debug, Serialize)]
pub struct NodeView {
    /// The cluster's name.
    pub cluster: String,
    /// This node's name.
    pub node: String,
    /// The slots this node holds.
    pub slots: Vec<u32>,
    /// Of how many.
    pub slot_count: u32,
    /// The pipelines running on this node, as `tenant/name`.
    pub running: Vec<String>,
}

fn cluster_error(e: ClusterError) -> ServiceError {
    ServiceError::Cluster(e.to_string())
}

fn pipeline_key(tenant: &str, name: &str) -> String {
    format!("pipeline/{tenant}/{name}")
}

fn tenant_key(tenant: &str) -> String {
    format!("tenant/{tenant}")
}

fn module_key(tenant: &str, digest: &str) -> String {
    format!("module/{tenant}/{digest}")
}

impl ClusterPart {
    /// Queues a definition for the state topic (a change its owner made).
    pub(super) fn publish_definition(&self, definition: &PipelineDefinition) {
        let _ = self.publishes.send(definition.clone());
    }

    /// Writes a record and waits until this node has applied it, so what the caller
    /// reads next includes it.
    pub(super) async fn write_and_apply(
        &self,
        key: &str,
        value: Option<&[u8]>,
    ) -> Result<(), ServiceError> {
        let offset = self.log.write(key, value).await.map_err(cluster_error)?;
        let mut applied = self.applied.subscribe();
        let _ = applied.wait_for(|next| *next > offset).await;
        Ok(())
    }

    /// Writes a pipeline's changed definition to the shared state and waits until this
    /// node applied it (and, when it runs the pipeline, acted on it).
    async fn write_change(
        &self,
        entry: &Entry,
        change: impl FnOnce(&mut PipelineDefinition),
    ) -> Result<(), ServiceError> {
        let mut definition = entry.definition();
        change(&mut definition);
        definition.revision += 1;
        self.write_definition(&definition).await
    }

    /// Writes a definition to the shared state and waits until this node applied it.
    async fn write_definition(&self, definition: &PipelineDefinition) -> Result<(), ServiceError> {
        let json = serde_json::to_vec(definition).expect("a definition serialises");
        let key = pipeline_key(&definition.tenant, &definition.name);
        self.write_and_apply(&key, Some(&json)).await
    }
}

impl Placement for ClusterPart {
    fn save_module<'a>(
        &'a self,
        _: &'a Service,
        tenant: &'a str,
        entry: &'a ModuleEntry,
        bytes: &'a [u8],
    ) -> Change<'a, ()> {
        Box::pin(async move {
            for (key, chunk) in blob::chunks(&entry.digest, bytes) {
                self.log
                    .write(&key.key(), Some(chunk))
                    .await
                    .map_err(cluster_error)?;
            }
            let json = serde_json::to_vec(entry).expect("a module entry serialises");
            self.write_and_apply(&module_key(tenant, &entry.digest), Some(&json))
                .await
        })
    }

    fn save_tenant<'a>(
        &'a self,
        _: &'a Service,
        name: &'a str,
        settings: Option<&'a TenantConfig>,
    ) -> Change<'a, ()> {
        Box::pin(async move {
            let json = settings.map(|s| serde_json::to_vec(s).expect("a tenant serialises"));
            self.write_and_apply(&tenant_key(name), json.as_deref())
                .await
        })
    }

    fn keep_refusal<'a>(
        &'a self,
        service: &'a Service,
        tenant: &'a str,
        refusal: Refusal,
    ) -> Change<'a, ()> {
        Box::pin(async move {
            let json = serde_json::to_vec(&refusal).expect("a refusal serialises");
            let key = refusal_key(tenant, &refusal.digest);
            if let Err(e) = self.write_and_apply(&key, Some(&json)).await {
                tracing::warn!(
                    tenant,
                    module = refusal.name,
                    error = %e,
                    "A module's refusal could not be written to the cluster's state; this node keeps it alone."
                );
                service.refusals.insert(tenant, refusal);
            }
            Ok(())
        })
    }

    fn create<'a>(
        &'a self,
        service: &'a Arc<Service>,
        definition: PipelineDefinition,
        memory_mib: usize,
    ) -> Change<'a, Arc<Entry>> {
        Box::pin(async move {
            let (tenant, name) = (definition.tenant.as_str(), definition.name.as_str());
            {
                let pipelines = service.pipelines.lock().unwrap_or_else(|e| e.into_inner());
                service.check_new(&pipelines, tenant, name, memory_mib)?;
            }
            // The node holding the pipeline's slot makes the entry and starts it when
            // it reads the definition.
            self.write_definition(&definition).await?;
            service.found(|| service.entry(tenant, name)).await
        })
    }

    fn set_state<'a>(
        &'a self,
        _: &'a Arc<Service>,
        entry: &'a Arc<Entry>,
        state: PipelineState,
    ) -> Change<'a, ()> {
        Box::pin(async move {
            if state == PipelineState::Running && entry.definition().state == PipelineState::Running
            {
                return Err(running(entry));
            }
            // The node running it acts on this when it reads it.
            self.write_change(entry, |d| {
                d.state = state;
                d.error = None;
            })
            .await
        })
    }

    fn remove<'a>(&'a self, _: &'a Service, entry: &'a Arc<Entry>) -> Change<'a, ()> {
        Box::pin(async move {
            let definition = entry.definition();
            let (tenant, name) = (definition.tenant.as_str(), definition.name.as_str());
            self.write_and_apply(&pipeline_key(tenant, name), None)
                .await?;
            self.reports.forget(tenant, name).await;
            Ok(())
        })
    }

    fn deploy<'a>(
        &'a self,
        service: &'a Arc<Service>,
        entry: &'a Arc<Entry>,
        request: Deploy,
    ) -> Change<'a, DeployReport> {
        // Checked here, written to the shared state, switched by the node that runs
        // the pipeline when it reads it.
        Box::pin(async move {
            let definition = entry.definition();
            let (tenant, name) = (definition.tenant.as_str(), definition.name.as_str());
            let (_, _, prepare_ms) = service.prepare_checked(entry, &request).await?;
            let failed = definition.state == PipelineState::Failed;
            self.write_change(entry, |d| {
                d.previous_module = Some(d.module.clone());
                d.module = request.module.clone();
                if failed {
                    d.state = PipelineState::Running;
                    d.error = None;
                }
            })
            .await?;
            let mut report = DeployReport {
                from: definition.module.clone(),
                to: request.module.clone(),
                outcome: if failed { "started" } else { "stored" },
                position: None,
                pause_ms: None,
                committed_rows: None,
                prepare_ms,
            };
            // When this node runs the pipeline, reading the change switched it.
            let switched = entry
                .last_switch
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
                .filter(|done| done.to_digest == request.module);
            if let Some(done) = switched {
                report.switched(&done);
            }
            swapped(entry, tenant, name, &report);
            Ok(report)
        })
    }

    fn figures(
        &self,
        service: &Service,
        entry: &Entry,
        definition: &PipelineDefinition,
    ) -> Figures {
        let counters = entry.metrics.snapshot();
        let (tenant, name) = (&definition.tenant, &definition.name);
        if definition.state != PipelineState::Running {
            return (None, counters, entry.rows_per_second());
        }
        if service.owns(tenant, name) {
            return (Some(self.node.clone()), counters, entry.rows_per_second());
        }
        match self.reports.get(tenant, name) {
            Some(report) => (Some(report.node), report.counters, report.rows_per_second),
            None => (None, counters, entry.rows_per_second()),
        }
    }

    fn counts(&self, service: &Service, definition: &PipelineDefinition) -> bool {
        service.owns(&definition.tenant, &definition.name)
    }

    fn runs_elsewhere(&self, service: &Service, tenant: &str, name: &str) -> Option<String> {
        let definition = service.entry(tenant, name).ok()?.definition();
        if definition.state != PipelineState::Running || service.owns(tenant, name) {
            return None;
        }
        let report = self.reports.get(tenant, name)?;
        (report.node != self.node).then_some(report.api?)
    }
}

impl Service {
    /// Joins the cluster `[cluster]` names through its Kafka cluster: reads the shared
    /// state to its end, then takes part in the group that assigns slots. Call instead
    /// of [`Service::restore`].
    pub async fn join_cluster(self: &Arc<Service>) -> Result<(), ServiceError> {
        let io = ClusterIo::kafka(self.cluster_config()?);
        self.join_cluster_with(io).await
    }

    /// [`Service::join_cluster`], with the shared logs and the group reached through
    /// `io` (in memory, in tests).
    pub async fn join_cluster_with(self: &Arc<Service>, io: ClusterIo) -> Result<(), ServiceError> {
        let config = self.cluster_config()?.clone();
        let node = config
            .node
            .clone()
            .unwrap_or_else(|| self.config.server.listen.to_string());
        let (log, records) = io
            .logs
            .open(&node, SharedTopic::State)
            .await
            .map_err(cluster_error)?;
        let (status_log, status_records) = io
            .logs
            .open(&node, SharedTopic::Status)
            .await
            .map_err(cluster_error)?;
        let reports = Arc::new(Reports::new(status_log));
        let replay_end = log.replay_end();
        let log: Arc<dyn SharedLog> = Arc::from(log);
        let (publishes, to_publish) = mpsc::unbounded_channel();
        let part = Arc::new(ClusterPart {
            config: config.clone(),
            node: node.clone(),
            log: log.clone(),
            publishes,
            applied: watch::channel(0).0,
            held: Mutex::default(),
            reports: reports.clone(),
            membership: Mutex::default(),
            tasks: Mutex::default(),
        });
        if self.cluster.set(part.clone()).is_err() {
            return Err(ServiceError::Cluster(
                "the node joined its cluster twice".into(),
            ));
        }
        let publisher = tokio::spawn(publish(log, to_publish));
        let report_reader = tokio::spawn(Service::read_reports(reports.clone(), status_records));
        let api = config
            .advertised_url
            .clone()
            .unwrap_or_else(|| format!("http://{}", self.config.server.listen));
        let reporter = tokio::spawn(self.clone().report(reports, node.clone(), api));
        let applier = tokio::spawn(self.clone().apply_records(records));
        // Every definition is known before any slot is: a slot's pipelines start from
        // the whole state.
        let mut applied = part.applied.subscribe();
        let _ = applied.wait_for(|next| *next >= replay_end).await;
        tracing::info!(
            cluster = config.name,
            node,
            pipelines = self.entries().len(),
            "The node read the cluster's state."
        );
        // Compiled before taking any slot: a pipeline that moves here starts at once
        // instead of compiling its module on a busy node first.
        let modules: BTreeSet<(String, String)> = self
            .entries()
            .iter()
            .map(|entry| {
                let definition = entry.definition();
                (definition.tenant, definition.module)
            })
            .collect();
        for (tenant, digest) in modules {
            if let Ok(Some(module)) = self.state.module(&tenant, &digest) {
                self.clone().warm_module(tenant, module).await;
            }
        }
        let (changes, slot_changes) = mpsc::unbounded_channel();
        let membership = io.group.join(&node, changes).await.map_err(cluster_error)?;
        *part.membership.lock().unwrap_or_else(|e| e.into_inner()) = Some(membership);
        let follower = tokio::spawn(self.clone().follow_slots(slot_changes));
        part.tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend([publisher, applier, follower, report_reader, reporter]);
        self.ready.store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// The `[cluster]` section a node joins by.
    fn cluster_config(&self) -> Result<&ClusterConfig, ServiceError> {
        self.config.cluster.as_ref().ok_or_else(|| {
            ServiceError::Cluster(
                "the node was asked to join a cluster, but its config has no [cluster] section"
                    .into(),
            )
        })
    }

    /// Stops applying the shared state and following the slots: nothing starts a
    /// pipeline on this node any more.
    pub(super) fn stop_following(&self) {
        if let Some(part) = self.cluster.get() {
            for task in part
                .tasks
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .drain(..)
            {
                task.abort();
            }
        }
    }

    /// Leaves the cluster after this node's pipelines stopped: its slots go to the
    /// other nodes at once.
    pub async fn leave_cluster(&self) {
        let Some(part) = self.cluster.get() else {
            return;
        };
        let membership = part
            .membership
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(membership) = membership {
            let _ = tokio::task::spawn_blocking(move || membership.leave()).await;
        }
        tracing::info!(node = part.node, "The node left its cluster.");
    }

    /// Waits until this node has applied every record written to the state topic so
    /// far: what another node wrote and answered for is then seen here too (a module
    /// uploaded through one node and used through another a moment later). Alone, there
    /// is nothing to wait for.
    pub(super) async fn catch_up(&self) -> Result<(), ServiceError> {
        let Some(part) = self.cluster.get() else {
            return Ok(());
        };
        let end = part.log.end_offset().await.map_err(cluster_error)?;
        let mut applied = part.applied.subscribe();
        match tokio::time::timeout(CATCH_UP_WAIT, applied.wait_for(|next| *next >= end)).await {
            Ok(_) => Ok(()),
            Err(_) => Err(ServiceError::Cluster(format!(
                "node {} has not applied the cluster's state up to offset {end} within {CATCH_UP_WAIT:?}; try again, or see its log",
                part.node
            ))),
        }
    }

    /// Looks something up; in a cluster, when it is not found, looks again once this node
    /// has caught up with the state topic, as it may have been made through another node
    /// a moment ago.
    pub(crate) async fn found<T>(
        &self,
        lookup: impl Fn() -> Result<T, ServiceError>,
    ) -> Result<T, ServiceError> {
        match lookup() {
            Err(ServiceError::NotFound { .. } | ServiceError::Unauthenticated)
                if self.cluster.get().is_some() =>
            {
                self.catch_up().await?;
                lookup()
            }
            other => other,
        }
    }

    /// Whether this node runs pipeline `name` of `tenant`: always when alone, else
    /// when it holds the pipeline's slot.
    pub(super) fn owns(&self, tenant: &str, name: &str) -> bool {
        match self.cluster.get() {
            None => true,
            Some(part) => part
                .held
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&slot_of(tenant, name, part.config.slots)),
        }
    }

    /// What this node holds and runs.
    pub fn node_view(&self) -> Option<NodeView> {
        let part = self.cluster.get()?;
        let slots = part
            .held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .copied()
            .collect();
        let running = self
            .entries()
            .iter()
            .filter_map(|entry| {
                let definition = entry.definition();
                // A pipeline being started or stopped right now counts by what it should
                // be when that is done.
                let runs = entry.control.try_lock().map_or_else(
                    |_| {
                        definition.state == PipelineState::Running
                            && self.owns(&definition.tenant, &definition.name)
                    },
                    |control| Entry::is_running(&control),
                );
                runs.then(|| format!("{}/{}", definition.tenant, definition.name))
            })
            .collect();
        Some(NodeView {
            cluster: part.config.name.clone(),
            node: part.node.clone(),
            slots,
            slot_count: part.config.slots,
            running,
        })
    }

    /// Applies the shared state's records in order, for as long as they come.
    async fn apply_records(self: Arc<Service>, mut records: mpsc::UnboundedReceiver<StateRecord>) {
        let mut assembler = Assembler::default();
        let (warm, to_warm) = mpsc::unbounded_channel();
        let warmer = tokio::spawn(self.clone().warm_modules(to_warm));
        let _stop_warming = AbortOnDrop(warmer);
        while let Some(record) = records.recv().await {
            let offset = record.offset;
            if let Err(e) = self.apply(record, &mut assembler, &warm).await {
                tracing::error!(offset, error = %e, "A record of the cluster's state could not be applied; it is skipped.");
            }
            if let Some(part) = self.cluster.get() {
                part.applied.send_replace(offset + 1);
            }
        }
    }

    /// Compiles each module sent, one at a time, so that a pipeline of it that moves to
    /// this node later starts without compiling it first (seconds on a busy node).
    async fn warm_modules(
        self: Arc<Service>,
        mut modules: mpsc::UnboundedReceiver<(String, ModuleEntry)>,
    ) {
        while let Some((tenant, module)) = modules.recv().await {
            self.clone().warm_module(tenant, module).await;
        }
    }

    /// Compiles a module into the engine and its cache, unless it is there.
    async fn warm_module(self: Arc<Service>, tenant: String, module: ModuleEntry) {
        let warmed = tokio::task::spawn_blocking(move || {
            let bytes = self.state.read_module(&module.digest)?;
            let limits = sluice_engine::InstanceLimits {
                compile: self.tenant(&tenant)?.compile_budget(),
                ..sluice_engine::InstanceLimits::default()
            };
            self.engine
                .load_bytes(
                    &tenant,
                    &module.name,
                    &self.state.module_path(&module.digest),
                    &bytes,
                    limits,
                )
                .map(drop)
                .map_err(|e| ServiceError::InvalidModule(e.to_string()))
        })
        .await;
        if let Ok(Err(e)) = warmed {
            tracing::warn!(error = %e, "A module of the cluster's state could not be compiled ahead; a pipeline using it compiles it when it starts here.");
        }
    }

    async fn apply(
        self: &Arc<Service>,
        record: StateRecord,
        assembler: &mut Assembler,
        warm: &mpsc::UnboundedSender<(String, ModuleEntry)>,
    ) -> Result<(), ServiceError> {
        let bad = |what: &str, e: serde_json::Error| {
            ServiceError::Cluster(format!("{what} `{}` is unreadable: {e}", record.key))
        };
        if let Some(chunk) = ChunkKey::parse(&record.key) {
            if !self.state.has_module_bytes(&chunk.digest)
                && let Some(whole) = assembler.add(&chunk, record.value.unwrap_or_default())
            {
                let bytes = whole.map_err(cluster_error)?;
                self.state.save_module_bytes(&chunk.digest, &bytes)?;
            }
        } else if let Some(name) = record.key.strip_prefix("tenant/") {
            match &record.value {
                Some(json) => {
                    let settings: TenantConfig =
                        serde_json::from_slice(json).map_err(|e| bad("tenant", e))?;
                    self.state.save_tenant(name, &settings)?;
                    self.install_tenant(name, settings)?;
                }
                None => self.uninstall_tenant(name)?,
            }
        } else if let Some(rest) = record.key.strip_prefix("module/") {
            let Some((tenant, _)) = rest.split_once('/') else {
                return Ok(());
            };
            if let Some(json) = &record.value {
                let entry: ModuleEntry =
                    serde_json::from_slice(json).map_err(|e| bad("module", e))?;
                self.state.save_module_entry(tenant, &entry)?;
                let _ = warm.send((tenant.to_string(), entry));
            }
        } else if let Some(rest) = record.key.strip_prefix("refused/") {
            let (Some((tenant, _)), Some(json)) = (rest.split_once('/'), &record.value) else {
                return Ok(());
            };
            let refusal: Refusal = serde_json::from_slice(json).map_err(|e| bad("refusal", e))?;
            self.refusals.insert(tenant, refusal);
        } else if let Some(rest) = record.key.strip_prefix("pipeline/") {
            let Some((tenant, name)) = rest.split_once('/') else {
                return Ok(());
            };
            match &record.value {
                Some(json) => {
                    let definition: PipelineDefinition =
                        serde_json::from_slice(json).map_err(|e| bad("pipeline", e))?;
                    self.apply_definition(definition).await?;
                }
                None => self.apply_removal(tenant, name).await?,
            }
        }
        Ok(())
    }

    /// Takes a pipeline's definition from the shared state; the node holding its slot
    /// acts on it.
    async fn apply_definition(
        self: &Arc<Service>,
        definition: PipelineDefinition,
    ) -> Result<(), ServiceError> {
        let existing = self
            .pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(definition.tenant.clone(), definition.name.clone()))
            .cloned();
        let entry = match existing {
            Some(entry) => {
                if !entry.replace(definition.clone()) {
                    return Ok(());
                }
                entry
            }
            None => self.register(definition.clone()),
        };
        self.state.save_pipeline(&definition)?;
        self.reconcile(&entry).await;
        Ok(())
    }

    async fn apply_removal(&self, tenant: &str, name: &str) -> Result<(), ServiceError> {
        let removed = self
            .pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(tenant.to_string(), name.to_string()));
        if let Some(entry) = removed {
            let mut control = entry.control.lock().await;
            stop(control.take()).await;
        }
        self.state.remove_pipeline(tenant, name)
    }

    /// Brings a pipeline's task in line with its definition and this node's slots:
    /// started when it should run here, switched to its module, stopped when not.
    pub(super) async fn reconcile(self: &Arc<Service>, entry: &Arc<Entry>) {
        let mut control = entry.control.lock().await;
        let definition = entry.definition();
        let (tenant, name) = (definition.tenant.as_str(), definition.name.as_str());
        let should_run = definition.state == PipelineState::Running && self.owns(tenant, name);
        let runs = Entry::is_running(&control);
        if should_run && !runs {
            if let Err(e) = self.start(entry, &mut control) {
                tracing::error!(tenant, pipeline = name, error = %e, "A pipeline could not be started; it is marked failed.");
                let failed = self.update(entry, |d| {
                    d.state = PipelineState::Failed;
                    d.error = Some(e.to_string());
                });
                if let Err(e) = failed {
                    tracing::error!(tenant, pipeline = name, error = %e, "A pipeline's status could not be stored.");
                }
            }
        } else if should_run {
            let module = control
                .as_ref()
                .map(|r| r.module.clone())
                .unwrap_or_default();
            if module != definition.module
                && let Err(e) = self.switch_to(entry, &mut control, &definition).await
            {
                tracing::warn!(tenant, pipeline = name, module = definition.module, error = %e, "A module swap failed on the node that runs the pipeline.");
            }
        } else if runs {
            stop(control.take()).await;
        }
    }

    /// Follows the slots the group gives and takes from this node.
    async fn follow_slots(self: Arc<Service>, mut changes: mpsc::UnboundedReceiver<SlotChange>) {
        while let Some(change) = changes.recv().await {
            let Some(part) = self.cluster.get() else {
                return;
            };
            let slots = part.config.slots;
            match change {
                SlotChange::Assigned(assigned) => {
                    tracing::info!(node = part.node, slots = ?assigned, "The node holds more slots.");
                    let assigned: BTreeSet<u32> = assigned.into_iter().collect();
                    part.held
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .extend(assigned.iter().copied());
                    for entry in self.entries_in(&assigned, slots) {
                        self.reconcile(&entry).await;
                    }
                }
                SlotChange::Revoked {
                    slots: revoked,
                    lost,
                    done,
                } => {
                    tracing::info!(node = part.node, slots = ?revoked, lost, "The node gives up slots.");
                    let revoked: BTreeSet<u32> = revoked.into_iter().collect();
                    part.held
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .retain(|slot| !revoked.contains(slot));
                    for entry in self.entries_in(&revoked, slots) {
                        let mut control = entry.control.lock().await;
                        match (lost, control.take()) {
                            // Another node may run it already and has fenced this copy:
                            // nothing of it can be committed.
                            (true, Some(running)) => running.task.abort(),
                            (_, running) => stop(running).await,
                        }
                    }
                    drop(done);
                }
            }
        }
    }

    fn entries_in(&self, slots: &BTreeSet<u32>, count: u32) -> Vec<Arc<Entry>> {
        self.entries()
            .into_iter()
            .filter(|entry| {
                let definition = entry.definition();
                slots.contains(&slot_of(&definition.tenant, &definition.name, count))
            })
            .collect()
    }
}

/// Aborts a task when dropped: a helper task ends with the task that started it.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Writes the definitions owners changed, in the order they changed them.
async fn publish(
    log: Arc<dyn SharedLog>,
    mut definitions: mpsc::UnboundedReceiver<PipelineDefinition>,
) {
    while let Some(definition) = definitions.recv().await {
        let json = serde_json::to_vec(&definition).expect("a definition serialises");
        let key = pipeline_key(&definition.tenant, &definition.name);
        if let Err(e) = log.write(&key, Some(&json)).await {
            tracing::error!(error = %e, "A pipeline's status could not be written to the cluster's state.");
        }
    }
}

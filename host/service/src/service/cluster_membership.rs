//! A node's membership of its cluster: joining (reading the shared state to its end,
//! compiling its modules, then taking slots from the group), following the slots the
//! group moves, catching up before answering, and leaving.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use sluice_cluster::{ClusterConfig, ClusterIo, SharedLog, SharedTopic, SlotChange, slot_of};
use tokio::sync::{mpsc, watch};

use super::Service;
use super::cluster::{ClusterPart, cluster_error, publish};
use super::registry::{Entry, stop};
use super::reports::Reports;
use crate::error::ServiceError;
use crate::store::PipelineState;

/// Longest a call waits for this node to apply what other nodes wrote before it.
const CATCH_UP_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

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

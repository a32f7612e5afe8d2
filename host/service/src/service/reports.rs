//! Status reports in a cluster: every few seconds each node writes, for each pipeline it
//! runs, which node runs it, where it is and how fast it goes to the cluster's status
//! topic. Every node reads the reports, so a status asked of any node shows the figures
//! of the node that runs the pipeline.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sluice_cluster::{SharedLog, StateRecord};
use sluice_pipeline::MetricsSnapshot;
use tokio::sync::mpsc;

use super::Service;
use crate::store::PipelineState;

/// How often a node reports the pipelines it runs.
const REPORT_EVERY: Duration = Duration::from_secs(2);

/// What the node running a pipeline reports of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct Report {
    /// The node that runs it.
    pub node: String,
    /// Where that node's admin API is reached.
    #[serde(default)]
    pub api: Option<String>,
    /// Change rows per second over the last seconds.
    pub rows_per_second: f64,
    /// Its counters on that node.
    pub counters: MetricsSnapshot,
}

/// The reports of every node, as last read from the status topic.
pub(super) struct Reports {
    log: Box<dyn SharedLog>,
    latest: Mutex<HashMap<String, Report>>,
}

fn status_key(tenant: &str, name: &str) -> String {
    format!("status/{tenant}/{name}")
}

impl Reports {
    /// Reports written to `log`, read back through `records` by [`Service::read_reports`].
    pub(super) fn new(log: Box<dyn SharedLog>) -> Reports {
        Reports {
            log,
            latest: Mutex::default(),
        }
    }

    /// The last report of a pipeline, from whichever node ran it last.
    pub(super) fn get(&self, tenant: &str, name: &str) -> Option<Report> {
        self.latest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&status_key(tenant, name))
            .cloned()
    }

    /// Removes a deleted pipeline's report from the status topic.
    pub(super) async fn forget(&self, tenant: &str, name: &str) {
        if let Err(e) = self.log.write(&status_key(tenant, name), None).await {
            tracing::warn!(tenant, pipeline = name, error = %e, "A deleted pipeline's status report could not be removed; it is overwritten if the pipeline is created again.");
        }
    }

    fn apply(&self, record: StateRecord) {
        let mut latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        match record
            .value
            .map(|json| serde_json::from_slice::<Report>(&json))
        {
            Some(Ok(report)) => {
                latest.insert(record.key, report);
            }
            Some(Err(e)) => {
                tracing::warn!(key = record.key, error = %e, "A status report could not be read; it is skipped.");
            }
            None => {
                latest.remove(&record.key);
            }
        }
    }
}

impl Service {
    /// The admin API of the node that runs a pipeline, when that is another node of the
    /// cluster: its logs are there.
    pub fn runs_elsewhere(&self, tenant: &str, name: &str) -> Option<String> {
        self.placement().runs_elsewhere(self, tenant, name)
    }

    /// Keeps the latest report of every pipeline, for as long as they come.
    pub(super) async fn read_reports(
        reports: Arc<Reports>,
        mut records: mpsc::UnboundedReceiver<StateRecord>,
    ) {
        while let Some(record) = records.recv().await {
            reports.apply(record);
        }
    }

    /// Reports the pipelines this node runs, every [`REPORT_EVERY`], each when its
    /// figures changed.
    pub(super) async fn report(
        self: Arc<Service>,
        reports: Arc<Reports>,
        node: String,
        api: String,
    ) {
        let mut written: HashMap<String, Report> = HashMap::new();
        let mut every = tokio::time::interval(REPORT_EVERY);
        loop {
            every.tick().await;
            let mut here = HashSet::new();
            for entry in self.entries() {
                let definition = entry.definition();
                let (tenant, name) = (&definition.tenant, &definition.name);
                if definition.state != PipelineState::Running || !self.owns(tenant, name) {
                    continue;
                }
                let report = Report {
                    node: node.clone(),
                    api: Some(api.clone()),
                    rows_per_second: entry.rows_per_second(),
                    counters: entry.metrics.snapshot(),
                };
                let key = status_key(tenant, name);
                here.insert(key.clone());
                if written.get(&key) == Some(&report) {
                    continue;
                }
                let json = serde_json::to_vec(&report).expect("a report serialises");
                match reports.log.write(&key, Some(&json)).await {
                    Ok(_) => {
                        written.insert(key, report);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "A status report could not be written; the next one is tried in a moment.");
                        break;
                    }
                }
            }
            // Forgotten once it runs elsewhere: back here, it is reported again even
            // with the same figures, as another node's report came in between.
            written.retain(|key, _| here.contains(key));
        }
    }
}

//! A stateful pipeline's keyed state through the API: its size, its entries read from
//! the store the pipeline lends while it runs on this node, and a reset.

use std::sync::Arc;

use serde::Serialize;
use sluice_engine::StateEntry;
use sluice_pipeline::{StateSnapshot, StateStore, StoreError};

use super::Service;
use super::deploy::{Deploy, DeployReport};
use super::registry::Entry;
use super::tenancy::changelog_topic;
use crate::auth::TenantScope;
use crate::error::ServiceError;
use crate::store::PipelineState;

/// Most entries one page of a state listing holds.
pub const MAX_STATE_PAGE: usize = 1000;

/// A stateful pipeline's state at a glance.
#[derive(Clone, Debug, Serialize)]
pub struct StateSummary {
    /// The pipeline.
    pub pipeline: String,
    /// What the pipeline is doing; its entries can be read while it runs.
    pub state: PipelineState,
    /// In a cluster, the node that runs it and holds the state.
    pub node: Option<String>,
    /// The topic the state is committed to.
    pub changelog_topic: String,
    /// Its size and last restore, as the node that runs it last counted.
    #[serde(flatten)]
    pub figures: StateSnapshot,
}

impl Service {
    /// A stateful pipeline's state at a glance.
    pub async fn state_summary(
        &self,
        tenant: &TenantScope,
        name: &str,
    ) -> Result<StateSummary, ServiceError> {
        let entry = self.found(|| self.entry(tenant, name)).await?;
        let topic = self.changelog_of(&entry)?;
        let status = self.status_of(&entry)?;
        Ok(StateSummary {
            pipeline: name.to_string(),
            state: status.state,
            node: status.node,
            changelog_topic: topic,
            figures: status.counters.state,
        })
    }

    /// Up to `limit` (at most [`MAX_STATE_PAGE`]) committed entries whose keys start
    /// with `prefix`, after `after`, in key order.
    pub async fn state_page(
        &self,
        tenant: &TenantScope,
        name: &str,
        prefix: Vec<u8>,
        after: Option<Vec<u8>>,
        limit: usize,
    ) -> Result<Vec<StateEntry>, ServiceError> {
        let limit = limit.clamp(1, MAX_STATE_PAGE);
        self.read_state(tenant, name, move |store| {
            store.scan(&prefix, after.as_deref(), limit)
        })
        .await
    }

    /// The committed value under `key`.
    pub async fn state_value(
        &self,
        tenant: &TenantScope,
        name: &str,
        key: Vec<u8>,
    ) -> Result<Option<Vec<u8>>, ServiceError> {
        self.read_state(tenant, name, move |store| store.get(&key))
            .await
    }

    /// Deletes a pipeline's state: it stops at a batch boundary and starts again, with
    /// the same module, on a new changelog topic; the old state is deleted.
    pub async fn reset_state(
        self: &Arc<Service>,
        tenant: &TenantScope,
        name: &str,
    ) -> Result<DeployReport, ServiceError> {
        let entry = self.found(|| self.entry(tenant, name)).await?;
        let module = entry.definition().module;
        let request = Deploy {
            module,
            sample_rows: None,
            reset_state: true,
        };
        self.placement().deploy(self, &entry, request).await
    }

    /// Runs `read` on the store the pipeline lends while it runs here, restored.
    async fn read_state<T: Send + 'static>(
        &self,
        tenant: &TenantScope,
        name: &str,
        read: impl FnOnce(&dyn StateStore) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, ServiceError> {
        let entry = self.found(|| self.entry(tenant, name)).await?;
        self.changelog_of(&entry)?;
        let live = entry.live_state.clone();
        let read = tokio::task::spawn_blocking(move || live.read(read))
            .await
            .map_err(|e| ServiceError::Unavailable(format!("reading the state failed: {e}")))?;
        match read {
            Some(read) => read.map_err(|e| {
                ServiceError::Unavailable(format!(
                    "The state of pipeline {name} could not be read: {e}"
                ))
            }),
            None => Err(not_held(&entry, name)),
        }
    }

    /// The changelog topic of a stateful pipeline, or the error saying it keeps none.
    fn changelog_of(&self, entry: &Entry) -> Result<String, ServiceError> {
        let definition = entry.definition();
        let config = self.config_of(&definition)?;
        if config.state.is_none() {
            return Err(ServiceError::BadRequest(format!(
                "pipeline {} keeps no state: its config has no [state] section",
                definition.name
            )));
        }
        Ok(changelog_topic(
            &definition.tenant,
            &definition.name,
            definition.state_generation,
        ))
    }
}

/// Why a pipeline's state cannot be read on this node now.
fn not_held(entry: &Entry, name: &str) -> ServiceError {
    match entry.definition().state {
        PipelineState::Running => ServiceError::Unavailable(format!(
            "pipeline {name} is starting or restoring its state from the changelog; try again in a moment"
        )),
        PipelineState::Paused | PipelineState::Failed | PipelineState::Finished => {
            ServiceError::Conflict(format!(
                "pipeline {name} is not running: its state is read from the store of the node that runs it; resume the pipeline to read its state"
            ))
        }
    }
}

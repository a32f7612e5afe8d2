//! A stateful pipeline's state as operators look at it (`sluice state`): this node's
//! store brought up to the changelog by a read_committed reader, with no producer, so
//! an instance running elsewhere is not disturbed; and deleting it.

use std::path::PathBuf;

use sluice_engine::{StateEntry, StateUsage};
use sluice_state::{PipelineState, RedbStore, Restored, StoreError};

use crate::config::PipelineConfig;
use crate::destination::{Destination, KafkaDestination, sink_config};
use crate::error::PipelineError;
use crate::sink::KafkaChangelog;

/// A pipeline's state on this node, up to date with its changelog.
pub struct StateView {
    state: PipelineState,
    topic: String,
    dir: PathBuf,
    restored: Restored,
}

/// The `[state]` of `config`, or the error saying the pipeline keeps none.
fn stateful(config: &PipelineConfig) -> Result<(String, PathBuf), PipelineError> {
    match (config.changelog_topic(), config.state.as_ref()) {
        (Some(topic), Some(state)) => Ok((
            topic,
            state
                .dir
                .clone()
                .expect("the config sets [state] dir when it loads"),
        )),
        _ => Err(PipelineError::NoState {
            pipeline: config.pipeline.name.clone(),
        }),
    }
}

impl StateView {
    /// Opens this node's store of the pipeline and brings it up to the changelog,
    /// telling `progress` the offsets read and to read. Blocking. Fails while the
    /// pipeline runs on this node (it holds the store).
    pub fn open(
        config: &PipelineConfig,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<StateView, PipelineError> {
        let (topic, dir) = stateful(config)?;
        let failed = |source: StoreError| PipelineError::State {
            pipeline: config.pipeline.name.clone(),
            source,
        };
        let store = RedbStore::open(&dir).map_err(failed)?;
        let state = PipelineState::new(std::sync::Arc::new(store));
        let reader = sluice_sink::changelog_reader(&sink_config(config), &topic)?;
        let restored = state
            .restore(&KafkaChangelog(reader), progress)
            .map_err(failed)?;
        Ok(StateView {
            state,
            topic,
            dir,
            restored,
        })
    }

    /// Keys and bytes held.
    pub fn usage(&self) -> StateUsage {
        self.state.store().usage()
    }

    /// The changelog topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Where this node keeps the store.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// What bringing the store up to the changelog took.
    pub fn restored(&self) -> &Restored {
        &self.restored
    }

    /// The value under `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.state.store().get(key)
    }

    /// Up to `limit` entries after `after`, in key order.
    pub fn page(&self, after: Option<&[u8]>, limit: usize) -> Result<Vec<StateEntry>, StoreError> {
        self.state.store().scan(&[], after, limit)
    }
}

/// Deletes a stateful pipeline's state: its changelog topic and this node's store. An
/// instance running elsewhere is fenced first (it stops; started again, it continues
/// from its position with empty state).
pub async fn reset_state(config: &PipelineConfig) -> Result<(String, PathBuf), PipelineError> {
    let stateful = stateful(config)?;
    drop(sluice_sink::KafkaSink::connect(sink_config(config)).await?);
    KafkaDestination.forget_state(config).await?;
    Ok(stateful)
}

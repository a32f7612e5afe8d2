//! A pipeline's latest dead letters, read through its destination.

use sluice_pipeline::{DeadLetters, read_dead_letters};

use super::Service;
use crate::auth::TenantScope;
use crate::error::ServiceError;

impl Service {
    /// Up to `limit` (at most [`sluice_pipeline::MAX_LETTERS`]) of the pipeline's latest
    /// dead letters. One read per pipeline at a time: each opens a Kafka consumer.
    pub async fn dead_letters(
        &self,
        tenant: &TenantScope,
        name: &str,
        limit: usize,
    ) -> Result<DeadLetters, ServiceError> {
        let entry = self.found(|| self.entry(tenant, name)).await?;
        let _reading = entry.reading_letters.lock().await;
        let definition = entry.definition();
        let config = self.config_of(&definition)?;
        let destination = self.destination.clone();
        tokio::task::spawn_blocking(move || read_dead_letters(destination.as_ref(), &config, limit))
            .await
            .map_err(|e| e.to_string())
            .and_then(|read| read.map_err(|e| e.to_string()))
            .map_err(|detail| {
                ServiceError::KafkaUnavailable(format!(
                    "The dead letters of pipeline {name} could not be read: {detail}"
                ))
            })
    }
}

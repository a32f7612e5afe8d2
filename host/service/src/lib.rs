//! `sluice serve`: one process hosting many tenants' pipelines.
//!
//! Each pipeline belongs to a tenant and runs as its own task over one shared Wasm
//! engine. Tenants upload modules (stored by content digest), define pipelines and
//! swap modules live through the admin API; a swap happens at a batch boundary after
//! the old module's work is committed, so every record was made by exactly one module
//! and the position that follows it names that module. Definitions and last states
//! live in a state directory, positions in Kafka, so a restarted service resumes every
//! pipeline where it was.

mod api;
mod auth;
mod config;
mod console;
mod error;
#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod lifecycle_tests;
mod logs;
mod prometheus;
mod service;
mod store;

pub use api::router;
pub use auth::{Caller, Tokens, WhoAmI};
pub use config::{HostLimits, ServeConfig, ServerSection, TenantConfig};
pub use console::CONSOLE_PATH;
pub use error::ServiceError;
pub use logs::LogLine;
pub use service::{
    CreatePipeline, Deploy, DeployReport, HISTORY_EVERY, History, HistoryPoint, HostMemory,
    HostView, LastSwap, MAX_STATE_PAGE, ModuleListing, ModuleView, NodeView, PipelineStatus,
    Refusal, SAMPLE_EVERY, Service, StateSummary, TenantFigures, TenantHistory, TenantSource,
    TenantView, WaitingStatus,
};
pub use store::{ModuleEntry, PipelineDefinition, PipelineState, StateDir};

/// Runs the service until `shutdown` resolves: restores the stored pipelines, serves
/// the API, then stops every pipeline after it commits its work.
pub async fn serve(
    config: ServeConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServiceError> {
    let listen = config.server.listen;
    let service = Service::new(config)?;
    let listener =
        tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| ServiceError::Config {
                path: service.config().server.state_dir.clone(),
                message: format!("cannot listen on {listen}: {e}"),
            })?;
    // Stored pipelines are restored (or the cluster's state read) before the API
    // answers, so no request races them.
    let started = match service.config().cluster {
        Some(_) => service.join_cluster().await,
        None => service.restore().await.map(|_| ()),
    };
    if let Err(e) = started {
        service.shutdown().await;
        service.leave_cluster().await;
        return Err(e);
    }
    tracing::info!(%listen, "The service listens.");
    let app = router(service.clone());
    let stopping = service.clone();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                shutdown.await;
                // Followed log streams end, so the server can finish.
                stopping.begin_stop();
            })
            .await
    });
    let sampler = {
        let service = service.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(SAMPLE_EVERY);
            let per_point = (HISTORY_EVERY.as_secs() / SAMPLE_EVERY.as_secs()).max(1);
            for tick in 0u64.. {
                every.tick().await;
                service.sample_rates();
                if tick % per_point == 0 {
                    service.sample_history();
                }
            }
        })
    };
    let served = server.await.expect("the server task does not panic");
    sampler.abort();
    tracing::info!("The service is stopping its pipelines.");
    service.shutdown().await;
    service.leave_cluster().await;
    served.map_err(|e| ServiceError::Config {
        path: service.config().server.state_dir.clone(),
        message: format!("the API server failed: {e}"),
    })
}

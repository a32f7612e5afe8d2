//! Shadow deploys of a pipeline: start one, read its comparison (relayed to the node
//! that runs the pipeline), promote it or discard it.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use super::access::PipelineScope;
use super::relay::{relay, relay_target};
use super::{Reply, Shared};
use crate::service::{Service, ShadowDeploy};

/// The shadow routes under `pipeline`, the path of one pipeline.
pub(super) fn routes(pipeline: &str) -> Router<Arc<Service>> {
    Router::new()
        .route(&format!("{pipeline}/shadow"), post(start).get(report))
        .route(&format!("{pipeline}/shadow/promote"), post(promote))
        .route(&format!("{pipeline}/shadow/discard"), post(discard))
}

async fn start(
    State(service): Shared,
    pipeline: PipelineScope,
    Json(request): Json<ShadowDeploy>,
) -> Reply<Response> {
    let report = service
        .shadow(&pipeline.tenant, &pipeline.name, request)
        .await?;
    Ok(Json(report).into_response())
}

async fn report(
    State(service): Shared,
    PipelineScope { tenant, name }: PipelineScope,
    uri: Uri,
    headers: HeaderMap,
) -> Reply<Response> {
    if let Some(api) = relay_target(&service, &headers, &tenant, &name) {
        return relay(&api, &uri, &headers, "shadow").await;
    }
    Ok(Json(service.shadow_report(&tenant, &name).await?).into_response())
}

async fn promote(State(service): Shared, pipeline: PipelineScope) -> Reply<Response> {
    let report = service
        .promote_shadow(&pipeline.tenant, &pipeline.name)
        .await?;
    Ok(Json(report).into_response())
}

async fn discard(State(service): Shared, pipeline: PipelineScope) -> Reply<Response> {
    let report = service
        .discard_shadow(&pipeline.tenant, &pipeline.name)
        .await?;
    Ok(Json(report).into_response())
}

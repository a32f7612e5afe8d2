//! The admin HTTP API (described in `docs/api/openapi.yaml`), the Prometheus endpoint
//! and the health endpoints.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::{BroadcastStream, WatchStream};

mod access;
mod relay;
mod reply;
mod shadow;
mod state;

use access::PipelineScope;
use reply::ApiError;

use crate::auth::{Caller, Operator, TenantScope};
use crate::config::TenantConfig;
use crate::error::ServiceError;
use crate::service::{CreatePipeline, Deploy, Replay, Service};

type Reply<T> = Result<T, ApiError>;
type Shared = State<Arc<Service>>;

/// The API's routes over `service`.
pub fn router(service: Arc<Service>) -> Router {
    let config = service.config();
    let largest_module_mib = config
        .tenants
        .values()
        .map(|t| t.max_module_mib)
        .fold(config.limits.max_module_mib, usize::max);
    let pipeline = "/v1/tenants/{tenant}/pipelines/{name}";
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .route("/metrics", get(metrics))
        .route(
            "/v1/tenants/{tenant}/modules",
            get(list_modules).post(upload_module),
        )
        .route(
            "/v1/tenants/{tenant}/modules/refused",
            get(list_refused_modules),
        )
        .route("/v1/whoami", get(whoami))
        .route("/v1/host", get(host))
        .route("/v1/cluster", get(cluster))
        .route("/v1/tenants", get(list_tenants))
        .route(
            "/v1/tenants/{tenant}",
            get(tenant).put(put_tenant).delete(delete_tenant),
        )
        .route("/v1/tenants/{tenant}/pipelines", get(list_pipelines))
        .route("/v1/tenants/{tenant}/history", get(tenant_history))
        .route(pipeline, get(status).put(create).delete(delete))
        .route(&format!("{pipeline}/deploy"), post(deploy))
        .route(&format!("{pipeline}/rollback"), post(rollback))
        .route(&format!("{pipeline}/replays"), post(replay))
        .route(&format!("{pipeline}/pause"), post(pause))
        .route(&format!("{pipeline}/resume"), post(resume))
        .route(&format!("{pipeline}/logs"), get(logs))
        .route(&format!("{pipeline}/history"), get(history))
        .route(&format!("{pipeline}/dead-letters"), get(dead_letters))
        .merge(state::routes(pipeline))
        .merge(shadow::routes(pipeline))
        // Room for the largest module a tenant may upload; the tenant's own limit is
        // checked with a clear message.
        .layer(DefaultBodyLimit::max(
            (largest_module_mib + 1) * 1024 * 1024,
        ))
        .merge(crate::console::routes())
        .fallback(no_route)
        .method_not_allowed_fallback(no_method)
        .layer(axum::middleware::map_response(json_errors))
        .layer(axum::middleware::from_fn(close_after_refused_body))
        .with_state(service)
}

/// A request refused before its body was read (a missing or wrong token, a path or
/// method with no route, a body over the limit) leaves unread bytes on the connection,
/// and hyper closes it after answering unless the whole body had already arrived.
/// Saying so in the answer keeps keep-alive clients from sending their next request on
/// a connection the service is closing. Refusals made after reading the body (a bad
/// config, a conflict) keep the connection.
async fn close_after_refused_body(request: Request, next: Next) -> Response {
    let headers = request.headers();
    let has_body = headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|length| length != "0");
    let mut response = next.run(request).await;
    let refused_early = matches!(
        response.status(),
        StatusCode::UNAUTHORIZED
            | StatusCode::FORBIDDEN
            | StatusCode::NOT_FOUND
            | StatusCode::METHOD_NOT_ALLOWED
            | StatusCode::PAYLOAD_TOO_LARGE
    );
    if has_body && refused_early {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

async fn no_route(method: Method, uri: Uri) -> Response {
    let message = format!(
        "There is no route {method} {}; the API is described in docs/api/openapi.yaml.",
        uri.path()
    );
    (
        StatusCode::NOT_FOUND,
        Json(serde_json::json!({ "error": message })),
    )
        .into_response()
}

async fn no_method(method: Method, uri: Uri) -> Response {
    let message = format!("{} does not take {method}.", uri.path());
    let body = Json(serde_json::json!({ "error": message }));
    (StatusCode::METHOD_NOT_ALLOWED, body).into_response()
}

/// Refusals axum makes itself (a body that is not the expected JSON, a missing query
/// parameter, a body over the size limit) come as text; the API's clients get every
/// refusal as `{"error": sentence}`.
async fn json_errors(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
    if !status.is_client_error() || is_json {
        return response;
    }
    let text = axum::body::to_bytes(response.into_body(), 64 * 1024)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&text).trim().to_string();
    let message = match text.is_empty() {
        true => format!(
            "The request was refused: {}.",
            status.canonical_reason().unwrap_or("client error")
        ),
        false => format!("The request was refused: {text}."),
    };
    (status, Json(serde_json::json!({ "error": message }))).into_response()
}

async fn ready(State(service): Shared) -> Response {
    if service.is_ready() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "restoring pipelines\n").into_response()
    }
}

async fn metrics(State(service): Shared, operator: Operator) -> Reply<Response> {
    let statuses = service.metric_statuses(&operator)?;
    Ok((
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        crate::prometheus::render(&statuses),
    )
        .into_response())
}

async fn whoami(caller: Caller) -> Json<crate::auth::WhoAmI> {
    Json(caller.who())
}

async fn host(State(service): Shared, operator: Operator) -> Reply<Response> {
    Ok(Json(service.host_view(&operator)).into_response())
}

#[derive(Deserialize)]
struct HistoryQuery {
    last: Option<usize>,
}

async fn history(
    State(service): Shared,
    pipeline: PipelineScope,
    Query(query): Query<HistoryQuery>,
) -> Reply<Response> {
    let history = service
        .history(&pipeline.tenant, &pipeline.name, query.last)
        .await?;
    Ok(Json(history).into_response())
}

async fn tenant_history(
    State(service): Shared,
    tenant: TenantScope,
    Query(query): Query<HistoryQuery>,
) -> Reply<Response> {
    let history = service.tenant_history(&tenant, query.last).await?;
    Ok(Json(history).into_response())
}

#[derive(Deserialize)]
struct DeadLettersQuery {
    #[serde(default = "default_letters")]
    limit: usize,
}

fn default_letters() -> usize {
    50
}

async fn dead_letters(
    State(service): Shared,
    pipeline: PipelineScope,
    Query(query): Query<DeadLettersQuery>,
) -> Reply<Response> {
    let letters = service
        .dead_letters(&pipeline.tenant, &pipeline.name, query.limit)
        .await?;
    Ok(Json(letters).into_response())
}

async fn cluster(State(service): Shared, _: Operator) -> Reply<Response> {
    match service.node_view() {
        Some(view) => Ok(Json(view).into_response()),
        None => Err(ServiceError::NotFound {
            what: "A cluster (this node runs alone; see [cluster] in docs/cluster.md)".into(),
        }
        .into()),
    }
}

async fn list_tenants(State(service): Shared, operator: Operator) -> Reply<Response> {
    Ok(Json(service.tenant_views(&operator)?).into_response())
}

async fn tenant(State(service): Shared, tenant: TenantScope) -> Reply<Response> {
    Ok(Json(service.tenant_view(&tenant)?).into_response())
}

async fn put_tenant(
    State(service): Shared,
    operator: Operator,
    Path(tenant): Path<String>,
    Json(settings): Json<TenantConfig>,
) -> Reply<Response> {
    Ok(Json(service.put_tenant(&operator, &tenant, settings).await?).into_response())
}

async fn delete_tenant(
    State(service): Shared,
    operator: Operator,
    Path(tenant): Path<String>,
) -> Reply<Response> {
    service.delete_tenant(&operator, &tenant).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
struct UploadQuery {
    name: String,
}

async fn upload_module(
    State(service): Shared,
    tenant: TenantScope,
    Query(query): Query<UploadQuery>,
    body: Bytes,
) -> Reply<Response> {
    let entry = service
        .upload_module(&tenant, &query.name, body.to_vec())
        .await?;
    Ok((StatusCode::CREATED, Json(entry)).into_response())
}

async fn list_modules(State(service): Shared, tenant: TenantScope) -> Reply<Response> {
    Ok(Json(service.modules(&tenant).await?).into_response())
}

async fn list_refused_modules(State(service): Shared, tenant: TenantScope) -> Reply<Response> {
    Ok(Json(service.refused_modules(&tenant).await?).into_response())
}

async fn list_pipelines(State(service): Shared, tenant: TenantScope) -> Reply<Response> {
    Ok(Json(service.pipelines(&tenant).await?).into_response())
}

async fn create(
    State(service): Shared,
    pipeline: PipelineScope,
    Json(request): Json<CreatePipeline>,
) -> Reply<Response> {
    let status = service
        .create_pipeline(&pipeline.tenant, &pipeline.name, request)
        .await?;
    Ok((StatusCode::CREATED, Json(status)).into_response())
}

async fn status(State(service): Shared, pipeline: PipelineScope) -> Reply<Response> {
    Ok(Json(service.status(&pipeline.tenant, &pipeline.name).await?).into_response())
}

async fn delete(State(service): Shared, pipeline: PipelineScope) -> Reply<Response> {
    service.delete(&pipeline.tenant, &pipeline.name).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn deploy(
    State(service): Shared,
    pipeline: PipelineScope,
    Json(request): Json<Deploy>,
) -> Reply<Response> {
    let report = service
        .deploy(&pipeline.tenant, &pipeline.name, request)
        .await?;
    Ok(Json(report).into_response())
}

async fn replay(
    State(service): Shared,
    pipeline: PipelineScope,
    Json(request): Json<Replay>,
) -> Reply<Response> {
    let status = service
        .replay(&pipeline.tenant, &pipeline.name, request)
        .await?;
    Ok((StatusCode::CREATED, Json(status)).into_response())
}

async fn rollback(State(service): Shared, pipeline: PipelineScope) -> Reply<Response> {
    Ok(Json(service.rollback(&pipeline.tenant, &pipeline.name).await?).into_response())
}

async fn pause(State(service): Shared, pipeline: PipelineScope) -> Reply<Response> {
    Ok(Json(service.pause(&pipeline.tenant, &pipeline.name).await?).into_response())
}

async fn resume(State(service): Shared, pipeline: PipelineScope) -> Reply<Response> {
    Ok(Json(service.resume(&pipeline.tenant, &pipeline.name).await?).into_response())
}

#[derive(Deserialize)]
struct LogsQuery {
    #[serde(default)]
    follow: bool,
}

async fn logs(
    State(service): Shared,
    PipelineScope { tenant, name }: PipelineScope,
    Query(query): Query<LogsQuery>,
    uri: Uri,
    headers: HeaderMap,
) -> Reply<Response> {
    let (kept, live) = service.logs(&tenant, &name).await?;
    if let Some(api) = relay::relay_target(&service, &headers, &tenant, &name) {
        return relay::relay(&api, &uri, &headers, "logs").await;
    }
    let line = |l: &crate::logs::LogLine| {
        let mut json = serde_json::to_string(l).expect("a log line serialises");
        json.push('\n');
        Ok::<_, Infallible>(Bytes::from(json))
    };
    let kept: Vec<_> = kept.iter().map(line).collect();
    let body = if query.follow {
        // Lines a slow reader missed are skipped, not buffered without bound; the
        // stream ends when the service stops.
        let live = BroadcastStream::new(live).filter_map(move |l| l.ok().map(|l| Some(line(&l))));
        let stopped = WatchStream::new(service.stopping())
            .filter(|stopping| *stopping)
            .map(|_| None);
        let live = live.merge(stopped).map_while(|line| line);
        Body::from_stream(tokio_stream::iter(kept).chain(live))
    } else {
        Body::from_stream(tokio_stream::iter(kept))
    };
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response())
}

#[cfg(test)]
mod tests {
    use axum::routing::put;
    use tower::ServiceExt as _;

    use super::*;

    fn refusing_router() -> Router {
        Router::new()
            .route(
                "/refused",
                put(|| async { StatusCode::UNAUTHORIZED })
                    .get(|| async { StatusCode::UNAUTHORIZED }),
            )
            .route("/accepted", put(|body: Bytes| async move { body }))
            .route(
                "/conflict",
                put(|body: Bytes| async move { (StatusCode::CONFLICT, body) }),
            )
            .layer(axum::middleware::from_fn(close_after_refused_body))
    }

    async fn connection_header(method: Method, path: &str, body: &'static str) -> Option<String> {
        let mut request = axum::http::Request::builder().method(method).uri(path);
        if !body.is_empty() {
            request = request.header(header::CONTENT_LENGTH, body.len());
        }
        let response = refusing_router()
            .oneshot(request.body(Body::from(body)).unwrap())
            .await
            .unwrap();
        response
            .headers()
            .get(header::CONNECTION)
            .map(|v| v.to_str().unwrap().to_string())
    }

    #[tokio::test]
    async fn only_an_early_refusal_of_a_request_with_a_body_closes_the_connection() {
        assert_eq!(
            connection_header(Method::PUT, "/refused", "{\"config\": \"...\"}").await,
            Some("close".to_string())
        );
        assert_eq!(connection_header(Method::GET, "/refused", "").await, None);
        for path in ["/accepted", "/conflict"] {
            assert_eq!(connection_header(Method::PUT, path, "{}").await, None);
        }
    }
}

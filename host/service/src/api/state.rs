//! The keyed state of a stateful pipeline (`[state]`): its summary, its entries in
//! pages, one value, every entry as JSON lines, and a reset. Entries are read from the
//! node that runs the pipeline; another node relays the call there.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use sluice_pipeline::{bytes_from_text_or_hex, entry_to_json, named_bytes};

use super::access::PipelineScope;
use super::relay::{relay, relay_target};
use super::{Reply, Shared};
use crate::error::ServiceError;
use crate::service::{MAX_STATE_PAGE, Service};

/// The state routes under `pipeline`, the path of one pipeline.
pub(super) fn routes(pipeline: &str) -> Router<Arc<Service>> {
    Router::new()
        .route(&format!("{pipeline}/state"), get(summary))
        .route(&format!("{pipeline}/state/entries"), get(entries))
        .route(&format!("{pipeline}/state/value"), get(value))
        .route(&format!("{pipeline}/state/export"), get(export))
        .route(&format!("{pipeline}/state/reset"), post(reset))
}

async fn summary(State(service): Shared, pipeline: PipelineScope) -> Reply<Response> {
    let summary = service
        .state_summary(&pipeline.tenant, &pipeline.name)
        .await?;
    Ok(Json(summary).into_response())
}

async fn reset(State(service): Shared, pipeline: PipelineScope) -> Reply<Response> {
    let report = service
        .reset_state(&pipeline.tenant, &pipeline.name)
        .await?;
    Ok(Json(report).into_response())
}

#[derive(Deserialize)]
struct EntriesQuery {
    prefix: Option<String>,
    prefix_hex: Option<String>,
    after: Option<String>,
    after_hex: Option<String>,
    limit: Option<usize>,
}

/// Bytes named by an optional pair of text and hex parameters.
fn optional_bytes(
    name: &str,
    text: Option<&str>,
    hex: Option<&str>,
) -> Result<Option<Vec<u8>>, ServiceError> {
    if text.is_none() && hex.is_none() {
        return Ok(None);
    }
    bytes_from_text_or_hex(name, text, hex)
        .map(Some)
        .map_err(ServiceError::BadRequest)
}

async fn entries(
    State(service): Shared,
    PipelineScope { tenant, name }: PipelineScope,
    Query(query): Query<EntriesQuery>,
    uri: Uri,
    headers: HeaderMap,
) -> Reply<Response> {
    if let Some(api) = relay_target(&service, &headers, &tenant, &name) {
        return relay(&api, &uri, &headers, "state").await;
    }
    let prefix = optional_bytes(
        "prefix",
        query.prefix.as_deref(),
        query.prefix_hex.as_deref(),
    )?
    .unwrap_or_default();
    let after = optional_bytes("after", query.after.as_deref(), query.after_hex.as_deref())?;
    let limit = query.limit.unwrap_or(100);
    let page = service
        .state_page(&tenant, &name, prefix, after, limit)
        .await?;
    // A full page may have more after it: the next one starts after its last key.
    let next = (page.len() >= limit.clamp(1, MAX_STATE_PAGE))
        .then(|| page.last())
        .flatten()
        .map(|(key, _)| {
            serde_json::Value::Object([named_bytes("after", key)].into_iter().collect())
        });
    let entries: Vec<_> = page.iter().map(|(k, v)| entry_to_json(k, v)).collect();
    Ok(Json(serde_json::json!({ "entries": entries, "next": next })).into_response())
}

#[derive(Deserialize)]
struct ValueQuery {
    key: Option<String>,
    key_hex: Option<String>,
}

async fn value(
    State(service): Shared,
    PipelineScope { tenant, name }: PipelineScope,
    Query(query): Query<ValueQuery>,
    uri: Uri,
    headers: HeaderMap,
) -> Reply<Response> {
    if let Some(api) = relay_target(&service, &headers, &tenant, &name) {
        return relay(&api, &uri, &headers, "state").await;
    }
    let key = bytes_from_text_or_hex("key", query.key.as_deref(), query.key_hex.as_deref())
        .map_err(ServiceError::BadRequest)?;
    match service.state_value(&tenant, &name, key.clone()).await? {
        Some(value) => Ok(Json(entry_to_json(&key, &value)).into_response()),
        None => Err(ServiceError::NotFound {
            what: format!(
                "A value under {} in the state of pipeline {name}",
                serde_json::Value::Object([named_bytes("key", &key)].into_iter().collect())
            ),
        }
        .into()),
    }
}

async fn export(
    State(service): Shared,
    PipelineScope { tenant, name }: PipelineScope,
    uri: Uri,
    headers: HeaderMap,
) -> Reply<Response> {
    if let Some(api) = relay_target(&service, &headers, &tenant, &name) {
        return relay(&api, &uri, &headers, "state").await;
    }
    // The first page is read before answering, so a pipeline whose state cannot be
    // read gets an error status instead of an empty export.
    let first = service
        .state_page(&tenant, &name, Vec::new(), None, MAX_STATE_PAGE)
        .await?;
    let (lines, received) = tokio::sync::mpsc::channel::<Bytes>(4);
    tokio::spawn(async move {
        let mut page = first;
        loop {
            let Some((last, _)) = page.last() else { return };
            let after = last.clone();
            let mut chunk = Vec::new();
            for (key, value) in &page {
                chunk.extend_from_slice(entry_to_json(key, value).to_string().as_bytes());
                chunk.push(b'\n');
            }
            if lines.send(Bytes::from(chunk)).await.is_err() || page.len() < MAX_STATE_PAGE {
                return;
            }
            page = match service
                .state_page(&tenant, &name, Vec::new(), Some(after), MAX_STATE_PAGE)
                .await
            {
                Ok(page) => page,
                Err(error) => {
                    // The status is sent already: a last line says the export is cut.
                    let line = serde_json::json!({ "error": error.to_string() });
                    let _ = lines.send(Bytes::from(format!("{line}\n"))).await;
                    return;
                }
            };
        }
    });
    let body = Body::from_stream(tokio_stream::StreamExt::map(
        tokio_stream::wrappers::ReceiverStream::new(received),
        Ok::<_, Infallible>,
    ));
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response())
}

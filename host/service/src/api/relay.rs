//! Calls about a pipeline that runs on another node of the cluster, relayed to that
//! node: it holds the pipeline's logs and state.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use tokio_stream::StreamExt as _;

use super::reply::ApiError;
use crate::error::ServiceError;
use crate::service::Service;

/// Marks a call one node relays to another: the node asked answers it itself.
const RELAYED: &str = "x-sluice-relayed";

/// Bytes read from the other node at a time.
const CHUNK: usize = 64 * 1024;

/// The API address of the node to relay a call about a pipeline to: the node that
/// runs it, when that is another one and the call was not relayed already.
pub(super) fn relay_target(
    service: &Service,
    headers: &HeaderMap,
    tenant: &str,
    name: &str,
) -> Option<String> {
    if headers.contains_key(RELAYED) {
        return None;
    }
    service.runs_elsewhere(tenant, name)
}

/// Relays a GET of `uri` (path and query) to the node at `api` with the caller's
/// token, and streams its answer back as it comes, status and all. `what` names what
/// is relayed, for the error.
pub(super) async fn relay(
    api: &str,
    uri: &Uri,
    headers: &HeaderMap,
    what: &str,
) -> Result<Response, ApiError> {
    let url = format!(
        "{}{}",
        api.trim_end_matches('/'),
        uri.path_and_query().map_or(uri.path(), |p| p.as_str())
    );
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let (opened, answer) = tokio::sync::oneshot::channel();
    let (chunks, received) = tokio::sync::mpsc::channel::<Bytes>(16);
    let asked = url.clone();
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let response = agent
            .get(&asked)
            .header("Authorization", &authorization)
            .header(RELAYED, "1")
            .call();
        let response = match response {
            Ok(response) => response,
            Err(e) => {
                let _ = opened.send(Err(e.to_string()));
                return;
            }
        };
        let status = response.status().as_u16();
        let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
        if opened.send(Ok((status, content_type))).is_err() {
            return;
        }
        let mut reader = response.into_body().into_reader();
        let mut buffer = vec![0; CHUNK];
        loop {
            match std::io::Read::read(&mut reader, &mut buffer) {
                Ok(0) | Err(_) => return,
                Ok(read) => {
                    if chunks
                        .blocking_send(Bytes::copy_from_slice(&buffer[..read]))
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    });
    let refused = |reason: String| {
        ApiError::from(ServiceError::Cluster(format!(
            "The pipeline runs on another node; its {what} could not be relayed from {url}: {reason}. Set [cluster] advertised_url on that node if the nodes cannot reach it at its listen address."
        )))
    };
    let (status, content_type) = answer
        .await
        .map_err(|_| refused("the relay stopped".into()))?
        .map_err(refused)?;
    let body = Body::from_stream(
        tokio_stream::wrappers::ReceiverStream::new(received).map(Ok::<_, Infallible>),
    );
    let mut response = (
        StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
        body,
    )
        .into_response();
    if let Some(content_type) =
        content_type.and_then(|v| HeaderValue::from_bytes(v.as_bytes()).ok())
    {
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, content_type);
    }
    Ok(response)
}

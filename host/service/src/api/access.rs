//! Who may make a call, read from the request before its handler runs: the caller
//! from the bearer token, the tenant scope from the path, the operator's proof. No
//! handler checks permissions itself.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{FromRequestParts, MatchedPath, Path};
use axum::http::request::Parts;
use axum::http::{Method, header};

use super::reply::ApiError;
use crate::auth::{Caller, Operator, TenantScope};
use crate::error::ServiceError;
use crate::service::Service;

/// The caller, from the request's bearer token: every route but the health checks
/// takes one, and a request without a valid token is refused before anything else.
impl FromRequestParts<Arc<Service>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        service: &Arc<Service>,
    ) -> Result<Caller, ApiError> {
        let authorization = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let caller = || service.caller(authorization);
        Ok(service.found(caller).await?)
    }
}

/// The `{tenant}` of the path, for a caller who may act for it.
impl FromRequestParts<Arc<Service>> for TenantScope {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        service: &Arc<Service>,
    ) -> Result<TenantScope, ApiError> {
        let caller = Caller::from_request_parts(parts, service).await?;
        let tenant = path_part(parts, service, "tenant").await?;
        Ok(caller.for_tenant(&tenant)?)
    }
}

/// A pipeline of the path (`{tenant}` and `{name}`), for a caller who may act for its
/// tenant.
pub struct PipelineScope {
    /// Its tenant.
    pub tenant: TenantScope,
    /// Its name.
    pub name: String,
}

impl FromRequestParts<Arc<Service>> for PipelineScope {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        service: &Arc<Service>,
    ) -> Result<PipelineScope, ApiError> {
        let tenant = TenantScope::from_request_parts(parts, service).await?;
        let name = path_part(parts, service, "name").await?;
        Ok(PipelineScope { tenant, name })
    }
}

/// The operator's proof; a tenant's token is refused, saying what it may not do.
impl FromRequestParts<Arc<Service>> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        service: &Arc<Service>,
    ) -> Result<Operator, ApiError> {
        let caller = Caller::from_request_parts(parts, service).await?;
        let route = parts
            .extensions
            .get::<MatchedPath>()
            .map_or("", MatchedPath::as_str);
        Ok(caller.operator(operator_action(&parts.method, route))?)
    }
}

/// What an operator-only route does, in the words of its refusal.
fn operator_action(method: &Method, route: &str) -> &'static str {
    match (method.as_str(), route) {
        ("GET", "/metrics") => "read every tenant's metrics",
        ("GET", "/v1/host") => "see the host's figures",
        ("GET", "/v1/cluster") => "see the node's part in its cluster",
        ("GET", "/v1/tenants") => "list tenants",
        ("PUT", "/v1/tenants/{tenant}") => "add or change tenants",
        ("DELETE", "/v1/tenants/{tenant}") => "remove tenants",
        _ => "make this call",
    }
}

/// A named part of the request's path.
async fn path_part(
    parts: &mut Parts,
    service: &Arc<Service>,
    name: &str,
) -> Result<String, ApiError> {
    let Path(mut params) = Path::<BTreeMap<String, String>>::from_request_parts(parts, service)
        .await
        .map_err(|e| ApiError(ServiceError::BadRequest(e.body_text())))?;
    Ok(params
        .remove(name)
        .unwrap_or_else(|| panic!("every route with this scope names {{{name}}}")))
}

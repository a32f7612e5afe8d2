//! How a service error is answered: a status and `{"error": "..."}`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::error::ServiceError;

/// A service error as an HTTP response: a status and `{"error": "..."}`.
pub struct ApiError(pub ServiceError);

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> ApiError {
        ApiError(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match &self.0 {
            ServiceError::Unauthenticated => StatusCode::UNAUTHORIZED,
            ServiceError::Forbidden { .. } | ServiceError::OperatorOnly(_) => StatusCode::FORBIDDEN,
            ServiceError::NotFound { .. } => StatusCode::NOT_FOUND,
            ServiceError::Conflict(_) => StatusCode::CONFLICT,
            ServiceError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ServiceError::LimitExceeded(_) | ServiceError::InvalidModule(_) => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            ServiceError::Config { .. } | ServiceError::State { .. } => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
            ServiceError::Cluster(_)
            | ServiceError::KafkaUnavailable(_)
            | ServiceError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        let body = serde_json::json!({ "error": self.0.to_string() });
        (status, Json(body)).into_response()
    }
}

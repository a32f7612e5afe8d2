//! Serves the web console's files under `/console/`. They hold no data and need no
//! token; the app asks the API for everything with the token the user signs in with.
//! The headers keep a page that shows tenants' data from running or loading anything
//! but its own files, or from being framed.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

/// Where the console is served.
pub const CONSOLE_PATH: &str = "/console/";

const POLICY: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; \
                      object-src 'none'; base-uri 'none'; frame-ancestors 'none'; \
                      form-action 'self'";

/// The console's routes.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/console",
            get(|| async { Redirect::permanent(CONSOLE_PATH) }),
        )
        .route("/console/", get(|| async { file("") }))
        .route(
            "/console/{*path}",
            get(|Path(path): Path<String>| async move { file(&path) }),
        )
}

fn file(path: &str) -> Response {
    let Some(asset) = sluice_console::asset(path) else {
        return (
            StatusCode::NOT_FOUND,
            format!("The console has no file {path}"),
        )
            .into_response();
    };
    let cache = match asset.immutable {
        true => "public, max-age=31536000, immutable",
        false => "no-cache",
    };
    let mut response = asset.bytes.into_response();
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_TYPE, asset.content_type),
        (header::CACHE_CONTROL, cache),
        (header::CONTENT_SECURITY_POLICY, POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use tower::ServiceExt as _;

    use super::*;

    async fn get(path: &str) -> Response {
        let request = axum::http::Request::get(path).body(Body::empty()).unwrap();
        routes::<()>().oneshot(request).await.unwrap()
    }

    #[tokio::test]
    async fn the_index_comes_with_a_policy_that_allows_only_its_own_files() {
        let index = get("/console/").await;
        assert_eq!(index.status(), StatusCode::OK);
        let policy = index.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap();
        assert!(policy.starts_with("default-src 'self'"), "{policy}");
        assert!(!policy.contains("unsafe"), "{policy}");
        assert_eq!(index.headers()[header::X_FRAME_OPTIONS], "DENY");
        assert_eq!(index.headers()[header::CACHE_CONTROL], "no-cache");
    }

    #[tokio::test]
    async fn the_bare_path_redirects_and_unknown_files_are_not_found() {
        let bare = get("/console").await;
        assert_eq!(bare.status(), StatusCode::PERMANENT_REDIRECT);
        assert_eq!(bare.headers()[header::LOCATION], CONSOLE_PATH);
        assert_eq!(
            get("/console/nothing.js").await.status(),
            StatusCode::NOT_FOUND
        );
    }
}

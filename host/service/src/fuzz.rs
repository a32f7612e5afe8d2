//! Fuzzing of what a tenant or an operator hands the service: the serve config, the
//! pipeline configs tenants submit, and the admin API's requests (bodies, paths,
//! queries). Nothing panics; the API answers every request with a status below 500 and,
//! for a refusal, a `{"error": ...}` body.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request};
use sluice_fuzzing::{Gen, corpus, fuzz};
use tower::ServiceExt as _;

use crate::config::ServeConfig;
use crate::service::Service;

const SERVE_KEYS: &[&str] = &[
    "server",
    "listen",
    "state_dir",
    "operator_token_file",
    "fuel_metering",
    "limits",
    "max_pipelines",
    "max_memory_mib",
    "tenants",
    "acme",
    "token_file",
    "token_sha256",
    "max_batch_timeout",
    "max_fuel_per_batch",
    "max_module_mib",
    "topic_prefix",
    "table_prefixes",
    "kafka",
];

const PIPELINE_KEYS: &[&str] = &[
    "pipeline",
    "name",
    "source",
    "table",
    "catalog",
    "url",
    "token",
    "transform",
    "module",
    "module_cache_dir",
    "memory_limit_mib",
    "batch_timeout",
    "params",
    "sink",
    "topic",
    "kafka",
    "ssl.key.location",
    "sasl.password",
    "bootstrap.servers",
    "plugin.library.paths",
];

const OPERATOR_TOKEN: &str = "operator-token-0123456789";
const ACME_TOKEN: &str = "acme-token-0123456789";

fn corpus_of(target: &str) -> Vec<String> {
    corpus(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/corpus")
            .join(target),
    )
}

/// A service for tenant `acme` in `dir`, its tokens written beside its config.
fn service(dir: &Path) -> Arc<Service> {
    std::fs::write(dir.join("operator.token"), OPERATOR_TOKEN).unwrap();
    std::fs::write(dir.join("acme.token"), ACME_TOKEN).unwrap();
    let config = dir.join("serve.toml");
    std::fs::write(
        &config,
        "[server]\nstate_dir = \"state\"\noperator_token_file = \"operator.token\"\n\n[tenants.acme]\ntoken_file = \"acme.token\"\nmax_module_mib = 1\ntable_prefixes = [\"/data/acme/\"]\n",
    )
    .unwrap();
    Service::new(ServeConfig::load(&config).unwrap()).unwrap()
}

fn write(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("serve.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn fuzz_serve_config() {
    let seeds = corpus_of("serve-config");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("acme.password"), "hunter2").unwrap();
    fuzz("serve-config", |g| {
        let path = write(dir.path(), &g.mutated_toml_seed(&seeds, SERVE_KEYS));
        if let Err(e) = ServeConfig::load(&path) {
            assert!(!e.to_string().is_empty());
        }
    });
}

#[test]
fn fuzz_tenant_pipeline_config() {
    let seeds: Vec<String> = corpus_of("admin-bodies")
        .iter()
        .filter_map(|body| serde_json::from_str::<serde_json::Value>(body).ok())
        .filter_map(|body| body["config"].as_str().map(str::to_string))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let service = service(dir.path());
    fuzz("tenant-pipeline-config", |g| {
        let text = g.mutated_toml_seed(&seeds, PIPELINE_KEYS);
        let name = g.text(&["deals", "a-b_c"]);
        if let Ok(config) = service.pipeline_config("acme", &name, &text, &"0".repeat(64)) {
            // What a tenant may not choose stays the service's.
            assert_eq!(config.pipeline.name, format!("acme.{name}"));
            assert!(config.transform.module.starts_with(dir.path()));
            assert!(config.source.table.starts_with("/data/acme/"));
            assert!(config.source.catalog.is_none());
            for property in config.sink.kafka.keys() {
                assert!(
                    !crate::service::reaches_host_files(property),
                    "{property} passed"
                );
            }
        }
        let _ = crate::service::redacted(&text);
    });
}

/// A request a client could send: a route of the API with a generated path, query,
/// token and body (JSON bodies from the corpus, mutated, or bytes).
fn request(g: &mut Gen, bodies: &[String]) -> Request<Body> {
    let name = g.text(&["deals", "a-b_c", "../x", "%2e%2e"]);
    let name: String = url_safe(&name);
    let routes = [
        (Method::PUT, format!("/v1/tenants/acme/pipelines/{name}")),
        (
            Method::POST,
            format!("/v1/tenants/acme/pipelines/{name}/deploy"),
        ),
        (
            Method::POST,
            format!("/v1/tenants/acme/pipelines/{name}/pause"),
        ),
        (
            Method::POST,
            format!("/v1/tenants/acme/pipelines/{name}/resume"),
        ),
        (
            Method::POST,
            format!("/v1/tenants/acme/pipelines/{name}/rollback"),
        ),
        (Method::DELETE, format!("/v1/tenants/acme/pipelines/{name}")),
        (Method::GET, format!("/v1/tenants/acme/pipelines/{name}")),
        (
            Method::GET,
            format!(
                "/v1/tenants/acme/pipelines/{name}/logs?follow={}",
                url_safe(&g.text(&["false", "1"]))
            ),
        ),
        (
            Method::POST,
            format!(
                "/v1/tenants/acme/modules?name={}",
                url_safe(&g.text(&["m"]))
            ),
        ),
        (
            Method::GET,
            format!(
                "/v1/tenants/{}/modules",
                url_safe(&g.text(&["acme", "globex"]))
            ),
        ),
    ];
    let (method, path) = g.pick(&routes).clone();
    let seed = g.pick(bodies).clone();
    let body = match g.below(4) {
        0 => g.mutate_bytes(b"\0asm\x0d\0\x01\0"),
        1 => g.mutate_bytes(seed.as_bytes()),
        _ => {
            let mut body: serde_json::Value = serde_json::from_str(&seed).unwrap();
            for _ in 0..1 + g.below(3) {
                g.mutate_json(&mut body, &["config", "module", "sample_rows"]);
            }
            body.to_string().into_bytes()
        }
    };
    let token = match g.below(6) {
        0 => String::new(),
        1 => OPERATOR_TOKEN.to_string(),
        2 => url_safe(&g.text(&[ACME_TOKEN])),
        _ => ACME_TOKEN.to_string(),
    };
    let mut builder = Request::builder().method(method).uri(path);
    if !g.one_in(8) {
        builder = builder.header("Content-Type", "application/json");
    }
    if !token.is_empty() {
        builder = builder.header("Authorization", format!("Bearer {token}"));
    }
    builder.body(Body::from(body)).unwrap()
}

/// `text` with what a URL path cannot hold percent-encoded.
fn url_safe(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn fuzz_admin_api_requests() {
    let bodies = corpus_of("admin-bodies");
    let dir = tempfile::tempdir().unwrap();
    let service = service(dir.path());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let router = crate::api::router(service);
    fuzz("admin-api", |g| {
        let request = request(g, &bodies);
        let what = format!("{} {}", request.method(), request.uri());
        let response = runtime.block_on(router.clone().oneshot(request)).unwrap();
        let status = response.status();
        let body = runtime
            .block_on(axum::body::to_bytes(response.into_body(), usize::MAX))
            .unwrap();
        assert!(
            status.as_u16() < 500,
            "{what} answered {status}: {}",
            String::from_utf8_lossy(&body)
        );
        if status.is_client_error() {
            let error: serde_json::Value = serde_json::from_slice(&body).unwrap_or_else(|_| {
                panic!(
                    "{what} answered {status} without a JSON error: {}",
                    String::from_utf8_lossy(&body)
                )
            });
            assert!(error["error"].is_string(), "{what}: {error}");
        }
    });
}

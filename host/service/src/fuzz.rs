//! Fuzzing of what a tenant or an operator hands the service: the serve config, the
//! pipeline configs tenants submit, and the admin API's requests (bodies, paths,
//! queries). Nothing panics; the API answers every request with a status below 500 and,
//! for a refusal, a `{"error": ...}` body.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{Method, Request};
use sluice_fuzzing::proptest;
use sluice_fuzzing::proptest::prelude::*;
use sluice_fuzzing::strategies::{mutated_bytes, mutated_json, mutated_toml, text};
use sluice_fuzzing::{corpus, fuzz};
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
    fuzz("serve-config", mutated_toml(&seeds, SERVE_KEYS), |text| {
        let path = write(dir.path(), &text);
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
    let case = (
        mutated_toml(&seeds, PIPELINE_KEYS),
        text(&["deals", "a-b_c"]),
    );
    fuzz("tenant-pipeline-config", case, |(text, name)| {
        if let Ok(config) = service.pipeline_config("acme", &name, &text, &"0".repeat(64), 0) {
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
/// token and body.
#[derive(Clone, Debug)]
struct ApiRequest {
    method: Method,
    path: String,
    token: String,
    json: bool,
    body: Bytes,
}

/// [`ApiRequest`]s, their bodies JSON from the corpus (mutated) or bytes.
fn api_request(bodies: &[String]) -> impl Strategy<Value = ApiRequest> {
    let route = (
        0..10usize,
        text(&["deals", "a-b_c", "../x", "%2e%2e"]),
        text(&["false", "1"]),
        text(&["m"]),
        text(&["acme", "globex"]),
    )
        .prop_map(|(route, name, follow, module, tenant)| {
            let name = url_safe(&name);
            let pipeline = format!("/v1/tenants/acme/pipelines/{name}");
            match route {
                0 => (Method::PUT, pipeline),
                1 => (Method::POST, format!("{pipeline}/deploy")),
                2 => (Method::POST, format!("{pipeline}/pause")),
                3 => (Method::POST, format!("{pipeline}/resume")),
                4 => (Method::POST, format!("{pipeline}/rollback")),
                5 => (Method::DELETE, pipeline),
                6 => (Method::GET, pipeline),
                7 => (
                    Method::GET,
                    format!("{pipeline}/logs?follow={}", url_safe(&follow)),
                ),
                8 => (
                    Method::POST,
                    format!("/v1/tenants/acme/modules?name={}", url_safe(&module)),
                ),
                _ => (
                    Method::GET,
                    format!("/v1/tenants/{}/modules", url_safe(&tenant)),
                ),
            }
        });
    let token = prop_oneof![
        3 => Just(ACME_TOKEN.to_string()),
        1 => Just(String::new()),
        1 => Just(OPERATOR_TOKEN.to_string()),
        1 => text(&[ACME_TOKEN]).prop_map(|token| url_safe(&token)),
    ];
    let body = prop_oneof![
        3 => mutated_json(bodies, &["config", "module", "sample_rows"]).prop_map(Bytes::from),
        1 => mutated_bytes(b"\0asm\x0d\0\x01\0").prop_map(Bytes::from),
    ];
    (route, token, proptest::bool::weighted(7.0 / 8.0), body).prop_map(
        |((method, path), token, json, body)| ApiRequest {
            method,
            path,
            token,
            json,
            body,
        },
    )
}

impl ApiRequest {
    fn request(self) -> Request<Body> {
        let mut builder = Request::builder().method(self.method).uri(self.path);
        if self.json {
            builder = builder.header("Content-Type", "application/json");
        }
        if !self.token.is_empty() {
            builder = builder.header("Authorization", format!("Bearer {}", self.token));
        }
        builder.body(Body::from(self.body)).unwrap()
    }
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
    fuzz("admin-api", api_request(&bodies), |request| {
        let request = request.request();
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

#!/usr/bin/env bash
# Runs the whole test suite: formatting and lints, unit tests, and integration tests
# against a real Kafka broker, real Delta tables and real Wasm components.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

"$root/scripts/setup.sh"
# Only the tests use the object-store emulators, the fault proxy and the catalog server.
"$root/scripts/stores.sh" install

# Reuse a build cache outside the clone when there is one; it is created otherwise.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${SLUICE_CACHE:-$HOME/.cache/sluice}/target}

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# Modules of a crate import each other one way only (docs/architecture.md).
python3 -m pytest -q scripts/test_module_cycles.py
python3 scripts/module_cycles.py
# One version of each crate in `sluice`, but for the ones listed with their reason.
python3 scripts/duplicates.py

# The guest SDKs' own tests (the parts that need no host), each with the conformance
# suite of guest-sdk/conformance (the Rust SDK and the host run it in sluice-model).
python3 -m pytest -q guest-sdk/python/tests
python3 -m pytest -q guest-sdk/c/tests
node --test guest-sdk/js/test/
# The web console: its TypeScript, its kept build (host/console/dist) against a fresh
# one, and a build of the crate with a node and npm that fail first on PATH, in a target
# of its own so its build script runs: installing Sluice needs no Node.
"$root/scripts/console.sh" check
(cd host/console/web && npm run --silent check)
no_node=$(mktemp -d)
for tool in node npm npx; do
  printf '#!/bin/sh\necho "%s was called while building the console" >&2\nexit 1\n' "$tool" >"$no_node/$tool"
  chmod +x "$no_node/$tool"
done
PATH="$no_node:$PATH" CARGO_TARGET_DIR="$no_node/target" cargo build --locked -q -p sluice-console
rm -rf "$no_node"
(cd guest-sdk/go && GOTOOLCHAIN=local GOFLAGS=-mod=mod go vet ./... && GOTOOLCHAIN=local GOFLAGS=-mod=mod go test ./...)

# A broker that was already running (the demo's, a developer's) is used and left running;
# only what this script starts is stopped, also when a start fails half way. The
# fault-test cluster is always started anew.
started_kafka=false
started_registry=false
started_secured_registry=false
stop_services() {
  if $started_kafka; then "$root/scripts/kafka.sh" stop || true; fi
  if $started_registry; then "$root/scripts/registry.sh" stop || true; fi
  if $started_secured_registry; then "$root/scripts/registry.sh" secured-stop || true; fi
  "$root/scripts/kafka.sh" cluster-stop || true
}
trap stop_services EXIT
if ! "$root/scripts/kafka.sh" status >/dev/null 2>&1; then
  started_kafka=true
  "$root/scripts/kafka.sh" start
fi
if ! "$root/scripts/registry.sh" status >/dev/null 2>&1; then
  started_registry=true
  "$root/scripts/registry.sh" start
fi
# The second registry (https, credentials) uses the broker's certificates and its OIDC
# server, so it starts after the broker.
if ! "$root/scripts/registry.sh" secured-status >/dev/null 2>&1; then
  started_secured_registry=true
  "$root/scripts/registry.sh" secured-start
fi
"$root/scripts/kafka.sh" cluster-start
export SLUICE_TEST_KAFKA=127.0.0.1:${SLUICE_KAFKA_PORT:-19092}
export SLUICE_TEST_KAFKA_SCRAM=127.0.0.1:${SLUICE_KAFKA_SCRAM_PORT:-19094}
export SLUICE_TEST_KAFKA_TLS=127.0.0.1:${SLUICE_KAFKA_TLS_PORT:-19095}
export SLUICE_TEST_KAFKA_TLS_CA=${SLUICE_KAFKA_DIR:-${SLUICE_CACHE:-$HOME/.cache/sluice}/kafka-run}/tls/ca.crt
export SLUICE_TEST_KAFKA_CLUSTER=127.0.0.1:19201,127.0.0.1:19202,127.0.0.1:19203
export SLUICE_TEST_KAFKA_SCRAM_PASSWORD_FILE=${SLUICE_KAFKA_DIR:-${SLUICE_CACHE:-$HOME/.cache/sluice}/kafka-run}/scram-password
export SLUICE_TEST_KAFKA_SASL_SSL=127.0.0.1:${SLUICE_KAFKA_SASL_SSL_PORT:-19096}
export SLUICE_TEST_KAFKA_MTLS=127.0.0.1:${SLUICE_KAFKA_MTLS_PORT:-19097}
export SLUICE_TEST_KAFKA_OAUTH=127.0.0.1:${SLUICE_KAFKA_OAUTH_PORT:-19098}
export SLUICE_TEST_KAFKA_ELSEWHERE=127.0.0.1:${SLUICE_KAFKA_ELSEWHERE_PORT:-19099}
export SLUICE_TEST_KAFKA_DIR=${SLUICE_KAFKA_DIR:-${SLUICE_CACHE:-$HOME/.cache/sluice}/kafka-run}
export SLUICE_TEST_REGISTRY=$("$root/scripts/registry.sh" url)
export SLUICE_TEST_REGISTRY_SECURED=$("$root/scripts/registry.sh" secured-url)
export SLUICE_TEST_OIDC=http://127.0.0.1:${SLUICE_OIDC_PORT:-19180}

cargo build --locked -p sluice -p sluice-bench
cargo test --workspace --locked

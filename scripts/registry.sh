#!/usr/bin/env bash
# A local schema registry speaking Confluent's API, for the encoding tests and the demo:
# Apicurio Registry (in-memory storage) on 127.0.0.1, fetched from Maven Central.
#
# Usage: scripts/registry.sh install | start | stop | status | url
#        scripts/registry.sh secured-start | secured-stop | secured-status | secured-url
#
# `secured-start` starts a second instance that speaks only https (the certificate
# `scripts/kafka.sh start` made for the broker, signed by its test CA) and wants
# credentials: HTTP basic (client id and secret, exchanged for a token at the OIDC
# server kafka.sh runs, issuer `registry`) or a bearer token from that issuer. Start
# the broker first.
#
# Apicurio 3 needs Java 21 or newer: a JDK under /usr/lib/jvm that is 21+ is used (set
# SLUICE_REGISTRY_JAVA to pick one). Without one, Apicurio 2.6, which runs on Java 17,
# is used instead; both serve the same Confluent API.
#
# Environment: SLUICE_REGISTRY_PORT (default 18081; its management port is the next),
# SLUICE_REGISTRY_SECURED_PORT (default 18083; the two after it are taken too),
# SLUICE_OIDC_PORT and SLUICE_KAFKA_DIR as for kafka.sh, SLUICE_CACHE (default
# ~/.cache/sluice) holds the distribution and the run folder (registry-run/).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${SLUICE_CACHE:-$HOME/.cache/sluice}
port=${SLUICE_REGISTRY_PORT:-18081}
management_port=$((port + 1))
run_dir=$cache/registry-run
pid_file=$run_dir/registry.pid
secured_port=${SLUICE_REGISTRY_SECURED_PORT:-18083}
secured_pid_file=$run_dir/registry-secured.pid
tls_dir=${SLUICE_KAFKA_DIR:-$cache/kafka-run}/tls
oidc=http://127.0.0.1:${SLUICE_OIDC_PORT:-19180}/registry
mkdir -p "$run_dir"

# The newest JDK of version 21 or later, or nothing.
modern_java() {
  if [ -n "${SLUICE_REGISTRY_JAVA:-}" ]; then
    echo "$SLUICE_REGISTRY_JAVA"
    return
  fi
  local java best="" best_version=0 version
  for java in /usr/lib/jvm/*/bin/java; do
    [ -x "$java" ] || continue
    version=$("$java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = \([0-9]*\).*/\1/p')
    if [ -n "$version" ] && [ "$version" -ge 21 ] && [ "$version" -gt "$best_version" ]; then
      best=$java best_version=$version
    fi
  done
  echo "$best"
}

java_bin=$(modern_java)
if [ -n "$java_bin" ]; then
  version=3.3.3
  artifact=io.apicurio:apicurio-registry-app:$version:tar.gz:all
  dist=$cache/apicurio-registry-$version
  launch=(-jar "$dist/quarkus-run.jar")
else
  java_bin=java
  version=2.6.13.Final
  artifact=io.apicurio:apicurio-registry-app:$version:tar.gz:all
  dist=$cache/apicurio-registry-$version
  launch=(-Dquarkus.management.enabled=false -jar "$dist/apicurio-registry-app-$version-runner.jar")
fi

install() {
  if [ -f "$dist/.complete" ]; then
    return
  fi
  echo "Fetching Apicurio Registry $version into $dist ..."
  rm -rf "$dist" "$dist.download"
  mkdir -p "$dist.download"
  mvn -q -B -f "$here/registry/pom.xml" dependency:copy -Dartifact="$artifact" \
    -DoutputDirectory="$dist.download" -Dmdep.stripVersion=true
  mkdir -p "$dist"
  tar -xzf "$dist.download"/*.tar.gz -C "$dist"
  # The archive holds one top folder on some releases; the launcher is looked for in it.
  if [ ! -f "${launch[-1]}" ]; then
    local inner
    inner=$(find "$dist" -maxdepth 2 -name "$(basename "${launch[-1]}")" -printf '%h\n' | head -n1)
    if [ -z "$inner" ]; then
      echo "Apicurio Registry $version has no $(basename "${launch[-1]}") in its archive." >&2
      exit 1
    fi
    shopt -s dotglob
    mv "$inner"/* "$dist"/
  fi
  rm -rf "$dist.download"
  touch "$dist/.complete"
}

running() {
  [ -f "${1:-$pid_file}" ] && kill -0 "$(cat "${1:-$pid_file}")" 2>/dev/null
}

port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

url() {
  echo "http://127.0.0.1:$port/apis/ccompat/v7"
}

ready() {
  timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && printf 'GET /apis/ccompat/v7/schemas/types HTTP/1.0\r\n\r\n' >&3 && grep -q 'AVRO' <&3" 2>/dev/null
}

start() {
  install
  if running; then
    return
  fi
  local taken
  for taken in "$port" "$management_port"; do
    if port_open "$taken"; then
      echo "Port $taken is taken by another process; set SLUICE_REGISTRY_PORT to a port that is free with the one after it." >&2
      exit 1
    fi
  done
  # A small serial-GC heap: the registry holds a few test schemas in memory.
  nohup "$java_bin" -Xms64m -Xmx192m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$port" \
    -Dquarkus.management.host=127.0.0.1 -Dquarkus.management.port="$management_port" \
    "${launch[@]}" >"$run_dir/registry.log" 2>&1 &
  echo $! >"$pid_file"
  for _ in $(seq 1 120); do
    if ! running; then
      echo "The schema registry exited during start-up; its log ($run_dir/registry.log):" >&2
      tail -n 30 "$run_dir/registry.log" >&2
      exit 1
    fi
    if ready; then
      echo "Schema registry (Apicurio $version) ready at $(url)"
      return
    fi
    sleep 0.5
  done
  echo "The schema registry did not become ready within 60 s; see $run_dir/registry.log." >&2
  exit 1
}

secured_url() {
  echo "https://127.0.0.1:$secured_port/apis/ccompat/v7"
}

# Whether the secured instance answers an authenticated request over https.
secured_ready() {
  python3 - "$(secured_url)" "$tls_dir/ca.crt" <<'PY' 2>/dev/null
import base64, ssl, sys, urllib.request
request = urllib.request.Request(sys.argv[1] + "/schemas/types")
request.add_header("Authorization", "Basic " + base64.b64encode(b"sluice:secret").decode())
urllib.request.urlopen(request, context=ssl.create_default_context(cafile=sys.argv[2]), timeout=2).read()
PY
}

secured_start() {
  install
  if running "$secured_pid_file"; then
    # The broker makes its certificates anew at every start; a registry started before
    # still serves the old ones, which clients of the new CA refuse.
    if [ "$tls_dir/broker.crt" -nt "$secured_pid_file" ]; then
      echo "The secured schema registry serves certificates the broker has since replaced: restarting it."
      stop_one "$secured_pid_file"
    else
      return
    fi
  fi
  if [ ! -f "$tls_dir/broker.crt" ]; then
    echo "No test certificates in $tls_dir: run scripts/kafka.sh start first." >&2
    exit 1
  fi
  local taken
  for taken in "$secured_port" $((secured_port + 1)) $((secured_port + 2)); do
    if port_open "$taken"; then
      echo "Port $taken is taken by another process; set SLUICE_REGISTRY_SECURED_PORT to a port that is free with the two after it." >&2
      exit 1
    fi
  done
  # https only, on the broker's certificate; every request authenticated by the OIDC
  # issuer `registry` (basic credentials are exchanged for its tokens).
  nohup "$java_bin" -Xms64m -Xmx192m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port=$((secured_port + 2)) \
    -Dquarkus.http.ssl-port="$secured_port" -Dquarkus.http.insecure-requests=disabled \
    -Dquarkus.http.ssl.certificate.files="$tls_dir/broker.crt" \
    -Dquarkus.http.ssl.certificate.key-files="$tls_dir/broker.key" \
    -Dquarkus.management.host=127.0.0.1 -Dquarkus.management.port=$((secured_port + 1)) \
    -Dquarkus.oidc.tenant-enabled=true -Dquarkus.oidc.auth-server-url="$oidc" \
    -Dquarkus.oidc.token-path="$oidc/token" -Dquarkus.oidc.client-id=registry-api \
    -Dapicurio.authn.basic-client-credentials.enabled=true \
    "${launch[@]}" >"$run_dir/registry-secured.log" 2>&1 &
  echo $! >"$secured_pid_file"
  for _ in $(seq 1 120); do
    if ! running "$secured_pid_file"; then
      echo "The secured schema registry exited during start-up; its log ($run_dir/registry-secured.log):" >&2
      tail -n 30 "$run_dir/registry-secured.log" >&2
      exit 1
    fi
    if secured_ready; then
      echo "Secured schema registry (Apicurio $version) ready at $(secured_url)"
      return
    fi
    sleep 0.5
  done
  echo "The secured schema registry did not become ready within 60 s; see $run_dir/registry-secured.log." >&2
  exit 1
}

stop_one() {
  if running "$1"; then
    local pid
    pid=$(cat "$1")
    kill "$pid"
    for _ in $(seq 1 20); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$1"
}

stop() {
  stop_one "$pid_file"
}

status() {
  if running && ready; then
    echo "Schema registry (Apicurio $version) running at $(url)"
  else
    echo "Schema registry not running."
    return 1
  fi
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  status) status ;;
  url) url ;;
  secured-start) secured_start ;;
  secured-stop) stop_one "$secured_pid_file" ;;
  secured-status) running "$secured_pid_file" && secured_ready ;;
  secured-url) secured_url ;;
  *)
    echo "Usage: $0 install | start | stop | status | url | secured-start | secured-stop | secured-status | secured-url" >&2
    exit 2
    ;;
esac

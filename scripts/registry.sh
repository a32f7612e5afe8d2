#!/usr/bin/env bash
# A local schema registry speaking Confluent's API, for the encoding tests and the demo:
# Apicurio Registry (in-memory storage) on 127.0.0.1, fetched from Maven Central.
#
# Usage: scripts/registry.sh install | start | stop | status | url
#
# Apicurio 3 needs Java 21 or newer: a JDK under /usr/lib/jvm that is 21+ is used (set
# SLUICE_REGISTRY_JAVA to pick one). Without one, Apicurio 2.6, which runs on Java 17,
# is used instead; both serve the same Confluent API.
#
# Environment: SLUICE_REGISTRY_PORT (default 18081), SLUICE_CACHE (default
# ~/.cache/sluice) holds the distribution and the run folder (registry-run/).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${SLUICE_CACHE:-$HOME/.cache/sluice}
port=${SLUICE_REGISTRY_PORT:-18081}
management_port=$((port + 1))
run_dir=$cache/registry-run
pid_file=$run_dir/registry.pid
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
  [ -f "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null
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
  if port_open "$port"; then
    echo "Port $port is taken by another process; set SLUICE_REGISTRY_PORT to a free port." >&2
    exit 1
  fi
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

stop() {
  if running; then
    local pid
    pid=$(cat "$pid_file")
    kill "$pid"
    for _ in $(seq 1 20); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pid_file"
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
  *)
    echo "Usage: $0 install | start | stop | status | url" >&2
    exit 2
    ;;
esac

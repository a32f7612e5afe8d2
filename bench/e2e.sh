#!/usr/bin/env bash
# The end-to-end benchmark: Sluice (exactly-once, at-least-once, native), the raw
# rdkafka producer and Spark Structured Streaming delivering the same Delta table to
# the same local broker. Writes docs/benchmarks/README.md and e2e.png.
#
#   bench/e2e.sh [--rows N] [--runs R] [--commits C] [--large-commit N[,N...]] [--contestants a,b,...] [--profile debug]
#
# Installs what it needs (scripts/setup.sh; Spark's venv and matplotlib when Spark is a
# contestant), builds the binaries (release by default), starts the local broker, and
# stops it afterwards if it started it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/scripts/setup.sh" >&2
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${SLUICE_CACHE:-$HOME/.cache/sluice}/target}

profile=release
contestants=sluice-eos,sluice-replay,sluice-eos-x2,sluice-alo,sluice-python,sluice-js,sluice-c,sluice-go,native,native-x2,wasm,wasm-shadow,wasm-shadow-loop,raw,kafka-perf,spark
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[$i]}" in
    --profile) profile=${args[$((i + 1))]} ;;
    --contestants) contestants=${args[$((i + 1))]} ;;
  esac
done
cargo_profile=()
[ "$profile" = release ] && cargo_profile=(--release)
cargo build --locked "${cargo_profile[@]}" -p sluice -p sluice-bench --bin sluice --bin e2e >&2
# The modules the contestants run, built as `sluice build` builds them.
modules=(gold-deals)
for language in python js c go; do
  [[ ",$contestants," == *",sluice-$language,"* || ",$contestants," == *",sluice-$language-"* ]] && modules+=("gold-deals-$language")
done
[[ ",$contestants," == *",sluice-account,"* ]] && modules+=(account-pipeline)
[[ ",$contestants," == *",wasm-shadow-loop,"* ]] && modules+=(misbehaving/behaviors)
for language in js python go c; do
  [[ ",$contestants," == *",sluice-account-$language,"* ]] && modules+=("account-pipeline-$language")
done
for module in "${modules[@]}"; do
  "$CARGO_TARGET_DIR/$profile/sluice" build "transforms/$module" \
    --out-dir "$CARGO_TARGET_DIR/guests/components" --target-dir "$CARGO_TARGET_DIR/guests" >&2
done

spark_python=""
if [[ ",$contestants," == *",spark,"* ]]; then
  spark_python=$("$root/scripts/spark_env.sh")
  python3 -m pip install --quiet --disable-pip-version-check 'matplotlib==3.10.7' >&2
fi
python=${spark_python:-python3}

started=""
if ! "$root/scripts/kafka.sh" status >/dev/null 2>&1; then
  "$root/scripts/kafka.sh" start >&2
  started=yes
fi
started_registry=""
if [[ ",$contestants," == *"-avro,"* || ",$contestants," == *"-json-schema,"* || ",$contestants," == *"-protobuf,"* ]] &&
  ! "$root/scripts/registry.sh" status >/dev/null 2>&1; then
  "$root/scripts/registry.sh" start >&2
  started_registry=yes
fi
trap '[ -n "$started" ] && "$root/scripts/kafka.sh" stop >&2; [ -n "$started_registry" ] && "$root/scripts/registry.sh" stop >&2' EXIT

# The orchestrator writes tables with the deltalake package of the system python.
python3 "$root/bench/e2e/run.py" --profile "$profile" --spark-python "$python" --contestants "$contestants" "$@"

#!/usr/bin/env bash
# The motivating case, end to end on this machine: a CRM deals table (Delta, change data
# feed on) gets appends, then an UPDATE, a DELETE and a MERGE while Sluice streams it
# through the gold-deals Wasm transform into a local Apache Kafka broker.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

"$root/scripts/setup.sh"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${SLUICE_CACHE:-$HOME/.cache/sluice}/target}
port=${SLUICE_KAFKA_PORT:-19092}
bootstrap=127.0.0.1:$port
topic=deals-gold-$(date +%s)
counts_topic=open-deals-$(date +%s)
work=$root/demo/work

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "Building sluice and the gold-deals transform"
cargo build --locked -q -p sluice
sluice=$CARGO_TARGET_DIR/debug/sluice
# Put this build on PATH (cargo's bin folder, where rustup's tools are) so the README's
# `sluice ...` examples work after the demo; `cargo install --locked --path host/cli`
# replaces it with an optimised build.
bin_dir=${CARGO_HOME:-$HOME/.cargo}/bin
mkdir -p "$bin_dir" && ln -sf "$sluice" "$bin_dir/sluice"
echo "sluice is on PATH: $bin_dir/sluice -> $sluice"
# Its bash completions and man pages, where bash-completion and man look in a user's
# home (XDG data folder); other shells: `sluice completions zsh|fish|elvish|powershell`.
data_dir=${XDG_DATA_HOME:-$HOME/.local/share}
mkdir -p "$data_dir/bash-completion/completions"
"$sluice" completions bash >"$data_dir/bash-completion/completions/sluice"
"$sluice" manpages --out-dir "$data_dir/man/man1"
echo "Completions: $data_dir/bash-completion/completions/sluice; man pages: $data_dir/man/man1 (man sluice)"
rm -rf "$work" && mkdir -p "$work"
module=$("$sluice" build transforms/gold-deals --out-dir "$work" --target-dir "$CARGO_TARGET_DIR/guests")
echo "Transform component: $module ($(stat -c %s "$module") bytes)"
counting_module=$("$sluice" build transforms/account-pipeline --out-dir "$work" --target-dir "$CARGO_TARGET_DIR/guests")
echo "Stateful transform component: $counting_module ($(stat -c %s "$counting_module") bytes)"

say "Starting Apache Kafka (KRaft) on $bootstrap"
started_kafka=false
if ! "$root/scripts/kafka.sh" status >/dev/null 2>&1; then
  "$root/scripts/kafka.sh" start
  started_kafka=true
fi
sluice_pid=
counts_pid=
cleanup() {
  [ -n "$sluice_pid" ] && kill "$sluice_pid" 2>/dev/null && wait "$sluice_pid" 2>/dev/null
  [ -n "$counts_pid" ] && kill "$counts_pid" 2>/dev/null && wait "$counts_pid" 2>/dev/null
  if $started_kafka; then "$root/scripts/kafka.sh" stop >/dev/null; fi
}
trap cleanup EXIT

table() { python3 "$root/scripts/deals_table.py" "$work/deals" "$@"; }
position() {
  "$sluice" position show --json --config "$work/${1:-pipeline.toml}" 2>/dev/null |
    python3 -c 'import json,sys; p=json.load(sys.stdin); print(p["version"] if p else -1)' 2>/dev/null || echo -1
}
wait_for_version() {
  for _ in $(seq 1 600); do
    [ "$(position)" -ge "$1" ] && [ "$(position open-deals.toml)" -ge "$1" ] && return
    kill -0 "$sluice_pid" 2>/dev/null || { echo "sluice stopped; see $work/sluice.log" >&2; exit 1; }
    kill -0 "$counts_pid" 2>/dev/null || { echo "sluice stopped; see $work/open-deals.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "sluice did not reach version $1; see $work/sluice.log" >&2
  exit 1
}
show_records() {
  kcat -C -b "$bootstrap" -t "${2:-$topic}" -o "$1" -e -q -Z -X isolation.level=read_committed \
    -f '  %k  %s\n' | sed 's/  NULL$/  (tombstone)/'
}

say "Creating the deals table: 20 deals (version 0), then 10 more (version 1)"
table create --rows 20
table append --start 20 --rows 10
sed -e "s|@BOOTSTRAP@|$bootstrap|" -e "s|@MODULE@|$module|" -e "s|@TOPIC@|$topic|" demo/pipeline.toml.in >"$work/pipeline.toml"

say "Running: sluice run --config demo/work/pipeline.toml"
"$sluice" run --config "$work/pipeline.toml" >"$work/sluice.log" 2>&1 &
sluice_pid=$!
sed -e "s|@BOOTSTRAP@|$bootstrap|" -e "s|@MODULE@|$counting_module|" -e "s|@TOPIC@|$counts_topic|" demo/open-deals.toml.in >"$work/open-deals.toml"
echo "And beside it, with keyed state: sluice run --config demo/work/open-deals.toml"
"$sluice" run --config "$work/open-deals.toml" >"$work/open-deals.log" 2>&1 &
counts_pid=$!
wait_for_version 2
echo "Sluice delivered versions 0 and 1 and keeps following the table. The first records:"
show_records beginning | head -n 3 || true
echo "  ..."
echo "The open deals per stage, counted in the stateful pipeline's keyed state:"
show_records beginning "$counts_topic"

offset() { kcat -Q -b "$bootstrap" -t "${1:-$topic}:0:-1" 2>/dev/null | awk '{print $NF}'; }
step() {
  local title=$1 command=$2 version=$3
  say "$title"
  local before counts_before
  before=$(offset)
  counts_before=$(offset "$counts_topic")
  table "$command"
  python3 - "$work/deals/_delta_log/$(printf '%020d' "$version").json" <<'PY'
import json, sys
actions = [json.loads(line) for line in open(sys.argv[1])]
operation = next(a["commitInfo"]["operation"] for a in actions if "commitInfo" in a)
removed = sum(1 for a in actions if "remove" in a and a["remove"].get("dataChange", True))
print(f"Delta version {sys.argv[1][-25:-5].lstrip('0') or '0'}: {operation}, removing {removed} data file(s).")
if removed:
    print("A plain `spark.readStream.table(...)` stops here: 'Detected a data update ... in the source table'.")
PY
  wait_for_version $((version + 1))
  echo "Sluice keeps running and delivers:"
  show_records "${before:-beginning}"
  echo "The open deals per stage that changed (from the state, exactly once):"
  show_records "${counts_before:-beginning}" "$counts_topic" | grep . || echo "  (none: no stage's count moved)"
}
step "UPDATE: deals 3 and 7 are won" update 2
step "DELETE: deals 5 and 10 are removed (tombstones keyed by documentId)" delete 3
step "MERGE: deal 1 changes stage, deal 100 is new" merge 4

say "Stopping sluice (SIGTERM): it finishes the batch in hand; its position is in Kafka"
kill "$sluice_pid" && wait "$sluice_pid" || true
sluice_pid=
kill "$counts_pid" && wait "$counts_pid" || true
counts_pid=
tail -n 1 "$work/sluice.log"
"$sluice" position show --config "$work/pipeline.toml"
echo "The stateful pipeline's state, read back from its store (sluice state show):"
"$sluice" state show --config "$work/open-deals.toml"
echo "Every record, as a read_committed consumer sees it: $(kcat -C -b "$bootstrap" -t "$topic" -o beginning -e -q -X isolation.level=read_committed -f '.\n' | wc -l) in topic $topic."

#!/usr/bin/env bash
# Fetches the jars FlinkDebeziumRead.java runs on (pom.xml beside this script: Flink's
# `debezium-json` format) with Maven into a cache outside the clone, once per Flink
# version, and prints their folder. scripts/setup.sh runs it; so does the test that
# needs it, in case setup ran before it existed.
#
# Environment: SLUICE_CACHE (default ~/.cache/sluice).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=$(sed -n 's:.*<flink.version>\(.*\)</flink.version>.*:\1:p' "$here/pom.xml")
libs=${SLUICE_CACHE:-$HOME/.cache/sluice}/flink-debezium-$version
if [ ! -f "$libs/.complete" ]; then
  echo "Fetching Flink $version's debezium-json format into $libs ..." >&2
  rm -rf "$libs"
  mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies -DoutputDirectory="$libs" >&2
  touch "$libs/.complete"
fi
echo "$libs"

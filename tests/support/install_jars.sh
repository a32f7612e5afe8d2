#!/usr/bin/env bash
# Fetches the jars a Java reader under tests/support/ runs on (the pom.xml in its folder)
# with Maven into a cache outside the clone, once per version of that pom, and prints
# their folder. scripts/setup.sh runs it for each reader; so do the tests that run one,
# in case setup ran before the reader existed.
#
#     install_jars.sh FOLDER        e.g. flink-debezium
#
# Environment: SLUICE_CACHE (default ~/.cache/sluice).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pom=$here/$1/pom.xml
version=$(sha256sum "$pom" | cut -c1-12)
libs=${SLUICE_CACHE:-$HOME/.cache/sluice}/$1-$version
if [ ! -f "$libs/.complete" ]; then
  echo "Fetching the jars of tests/support/$1 into $libs ..." >&2
  rm -rf "$libs"
  mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$libs" >&2
  touch "$libs/.complete"
fi
echo "$libs"

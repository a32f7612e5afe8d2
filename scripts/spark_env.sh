#!/usr/bin/env bash
# Installs Apache Spark's Python package and Delta Lake's Spark connector into a virtualenv
# kept in the cache, for the scripts that write the CDF test tables and compute Spark's
# reference answers (tests/support/make_cdf_tables.py, tests/support/spark_changes.py).
# Safe to run again: it does nothing when the pinned versions are already there.
# Prints the venv's python on stdout (everything else goes to stderr):
#
#   py=$(scripts/spark_env.sh) && "$py" tests/support/make_cdf_tables.py
#
# Environment: SLUICE_CACHE (default ~/.cache/sluice) holds the venv (spark-venv/) and the
# Ivy cache of Delta's jars (spark-ivy/), which Spark fetches from Maven on first use via
# spark.jars.packages. Needs python3 (3.10+) and Java 17.
set -euo pipefail

# delta-spark 4.4.0 accepts pyspark >=4.0.1,<=4.2.0; its jar for Spark 4.1 is
# io.delta:delta-spark_4.1_2.13:4.4.0 (4.4.1 was on PyPI
# but its jars were not yet on Maven when this was pinned).
pyspark_version=4.1.4
delta_spark_version=4.4.0
pyarrow_version=26.0.1

cache=${SLUICE_CACHE:-$HOME/.cache/sluice}
venv=$cache/spark-venv
stamp=$venv/.sluice-versions
want="pyspark==$pyspark_version delta-spark==$delta_spark_version pyarrow==$pyarrow_version"

if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$venv/bin/python"
  exit 0
fi

command -v java >/dev/null || { echo "Java 17 is needed for Spark (apt-get install openjdk-17-jre-headless)" >&2; exit 1; }
echo "Installing $want into $venv ..." >&2
mkdir -p "$cache"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv" >&2
# shellcheck disable=SC2086
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check $want >&2
echo "$want" >"$stamp"
echo "$venv/bin/python"

#!/usr/bin/env python3
"""Spark's answer to "which change rows does this range of versions hold", for every
table of the CDF golden suite, written as golden files the tests compare the reader with.

    py=$(scripts/spark_env.sh)
    "$py" tests/support/spark_changes.py [--external DIR] [--generated DIR] [--out DIR] [--arrow-dir DIR]

Tables: every table under the fixtures written by other engines (default tests/data/delta-tables in
the repository; groups spark/ and kernel/) whose log turns delta.enableChangeDataFeed on,
and every table under tests/data/cdf/ (group generated/, made by make_cdf_tables.py).

Ranges per table (start and end inclusive, deduplicated, `kinds` says why each is there):
  full         first CDF version .. latest
  single       v .. v for every version whose commit file is in the log
  middle       a range strictly inside the full one (or its second half when short)
  before-cdf   earliest version .. latest, when CDF was turned on after the earliest version
  split        first CDF version .. (schema change - 1) and schema change .. latest, for the
               last version inside the full range whose metaData changed the schema

For each range, Spark's `table_changes_by_path(path, start, end)` rows are rendered by
canonical.canonical_line, sorted, and written to
tests/golden/cdf/<group>/<table>/<start>-<end>.jsonl (one line per row, empty file for no
rows). When Spark refuses the range, <start>-<end>.error holds its error class on the first
line and the first line of its message (table path replaced by <table>) on the second.
tests/golden/cdf/manifest.json lists all of it. The previous golden tree is replaced.

When the range ends before a later schema change, Spark's default answer uses the latest
schema (columns added later come out as null). For tables without column mapping the same
range is then also read with the end version's schema
(read option versionAsOf=end, as delta_kernel does) and, if its columns differ, written to
<start>-<end>.end-schema.jsonl.

Shared tables are read from a scratch copy without Hadoop's hidden `.*.crc` side files:
some fixtures' side files no longer match the edited JSON next to them, and Spark's local
file system then refuses to read (ChecksumException); Delta does not use those files.
Spark's check that time travel stays within delta.deletedFileRetentionDuration is turned
off: it compares commit timestamps with the clock, not what the log holds.

--arrow-dir DIR also writes, for every golden range, Spark's rows through Spark's own Arrow
conversion (`DataFrame.toArrow()`) to DIR/<group>/<table>/<start>-<end>.arrow (IPC file
format for even starts, stream format for odd ones), to check compare_changes.py with.
"""

import argparse
import glob
import json
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from canonical import canonical_line, spark_row_to_python  # noqa: E402
from spark_session import delta_spark  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GOLDEN = os.path.join(REPO, "tests", "golden", "cdf")
GENERATED = os.path.join(REPO, "tests", "data", "cdf")
DEFAULT_EXTERNAL = os.path.join(REPO, "tests", "data", "delta-tables")
METADATA_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")
COMMIT_FILE = re.compile(r"^(\d{20})\.json$")


class TableLog:
    """What the golden suite needs from a table's _delta_log, read without Spark."""

    def __init__(self, path):
        log = os.path.join(path, "_delta_log")
        self.versions = sorted(
            int(m.group(1)) for m in (COMMIT_FILE.match(f) for f in os.listdir(log)) if m
        )
        self.earliest, self.latest = self.versions[0], self.versions[-1]
        metadata = self._checkpoint_metadata(log, self.earliest)
        self.cdf_enabled = {}  # version -> bool, as of that version
        self.schema_changes = []  # versions whose metaData changed the schema
        schema = metadata.get("schemaString") if metadata else None
        enabled = _cdf_on(metadata)
        self.column_mapping = _config(metadata).get("delta.columnMapping.mode", "none")
        for version in self.versions:
            with open(os.path.join(log, f"{version:020d}.json"), encoding="utf-8") as commit:
                for line in commit:
                    action = json.loads(line) if line.strip() else {}
                    if "metaData" in action:
                        meta = action["metaData"]
                        if schema is not None and meta.get("schemaString") != schema:
                            self.schema_changes.append(version)
                        schema = meta.get("schemaString")
                        enabled = _cdf_on(meta)
                        self.column_mapping = _config(meta).get("delta.columnMapping.mode", "none")
            self.cdf_enabled[version] = enabled
        self.first_cdf = next((v for v in self.versions if self.cdf_enabled[v]), None)

    @staticmethod
    def _checkpoint_metadata(log, version):
        """The metaData action of the checkpoint at `version`, if the log starts there."""
        parts = sorted(glob.glob(os.path.join(log, f"{version:020d}.checkpoint*.parquet")))
        if not parts:
            return None
        import pyarrow.parquet as pq

        for part in parts:
            for row in pq.read_table(part, columns=["metaData"]).column("metaData").to_pylist():
                if row:
                    return row
        return None

    def ranges(self):
        """[(start, end, [kinds])] in a stable order."""
        found = {}

        def add(start, end, kind):
            if start is None or end is None or start > end:
                return
            found.setdefault((start, end), []).append(kind)

        first, last = self.first_cdf, self.latest
        add(first, last, "full")
        span = last - first
        if span >= 3:
            step = max(1, span // 4)
            add(first + step, last - step, "middle")
        elif span == 2:
            add(first + 1, last, "middle")
        if first > self.earliest:
            add(self.earliest, last, "before-cdf")
        inside = [v for v in self.schema_changes if first < v <= last]
        if inside:
            add(first, inside[-1] - 1, "split")
            add(inside[-1], last, "split")
        for version in self.versions:
            add(version, version, "single")
        return sorted(found.items(), key=lambda item: (item[0][1] - item[0][0] == 0, item[0]))


def _config(metadata):
    conf = (metadata or {}).get("configuration") or {}
    return dict(conf) if isinstance(conf, list) else conf  # a checkpoint's map: (k, v) pairs


def _cdf_on(metadata):
    return str(_config(metadata).get("delta.enableChangeDataFeed", "false")).lower() == "true"


def discover(external, generated):
    """[(group, name, key, path)] for every table of the suite."""
    tables = []
    for group in ("spark", "kernel"):
        for path in sorted(glob.glob(os.path.join(external, group, "*"))):
            if os.path.isdir(os.path.join(path, "_delta_log")) and TableLog(path).first_cdf is not None:
                name = os.path.basename(path)
                tables.append((group, name, f"external:{group}/{name}", path))
    for path in sorted(glob.glob(os.path.join(generated, "*"))):
        if os.path.isdir(os.path.join(path, "_delta_log")):
            name = os.path.basename(path)
            tables.append(("generated", name, f"generated:{name}", path))
    return tables


def error_of(exception, paths):
    """(error class, first message line) of a Spark failure."""
    condition = None
    for getter in ("getCondition", "getErrorClass"):
        if hasattr(exception, getter):
            try:
                condition = getattr(exception, getter)()
            except Exception:  # noqa: BLE001 - best effort only
                condition = None
            if condition:
                break
    text = str(exception)
    java = getattr(exception, "java_exception", None)
    if java is not None and not condition:
        condition = java.getClass().getName()
        text = java.getMessage() or text
    # The message's first sentence, on one line (Spark wraps its messages).
    joined = " ".join(line.strip() for line in text.splitlines() if line.strip())
    first = re.split(r"(?<=\.)\s", joined, maxsplit=1)[0][:300] if joined else type(exception).__name__
    variants = set()
    for path in paths:
        real = os.path.realpath(path)
        variants.update({path, real, "file:" + real, "file://" + real})
    for variant in sorted(variants, key=len, reverse=True):
        first = first.replace(variant, "<table>")
    return condition or type(exception).__name__, first


def spark_rows(spark, path, start, end):
    quoted = path.replace("'", "\\'")
    return spark.sql(f"SELECT * FROM table_changes_by_path('{quoted}', {start}, {end})")


def spark_rows_end_schema(spark, path, start, end):
    """The same range read with the end version's schema."""
    return (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", start)
        .option("endingVersion", end)
        .option("versionAsOf", end)
        .load(path)
    )


def canonical_lines(frame):
    schema = frame.schema
    return sorted(canonical_line(spark_row_to_python(r, schema)) for r in frame.collect())


def data_columns(frame):
    return [
        {"name": f.name, "type": f.dataType.simpleString()}
        for f in frame.schema.fields
        if f.name not in METADATA_COLUMNS
    ]


def scratch_copy(path, scratch):
    """A copy of a read-only fixture without Hadoop's `.*.crc` side files."""
    target = os.path.join(scratch, os.path.basename(os.path.dirname(path)), os.path.basename(path))
    shutil.copytree(path, target, ignore=shutil.ignore_patterns(".*.crc"))
    return target


def write_arrow(frame, target, stream):
    import pyarrow as pa

    table = frame.toArrow()
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with pa.OSFile(target, "wb") as sink:
        opener = pa.ipc.new_stream if stream else pa.ipc.new_file
        with opener(sink, table.schema) as writer:
            for batch in table.to_batches(max_chunksize=3):
                writer.write_batch(batch)


def manifest_text(manifest):
    """The manifest as JSON with one line per table header and per range."""
    parts = ["{"]
    for key, value in manifest.items():
        if key != "tables":
            parts.append(f" {json.dumps(key)}: {json.dumps(value)},")
    parts.append(' "tables": [')
    tables = manifest["tables"]
    for i, table in enumerate(tables):
        head = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in table.items() if k != "ranges")
        ranges = ",\n".join("    " + json.dumps(r) for r in table["ranges"])
        parts.append("  {" + head + ',\n   "ranges": [\n' + ranges + "\n   ]}" + ("," if i < len(tables) - 1 else ""))
    parts.append(" ]")
    parts.append("}")
    text = "\n".join(parts) + "\n"
    assert json.loads(text) == manifest
    return text


def main():
    parser = argparse.ArgumentParser(description="Write the CDF golden files with Spark.")
    parser.add_argument("--external", default=DEFAULT_EXTERNAL, help="the folder of tables written by other engines")
    parser.add_argument("--generated", default=GENERATED, help="the generated tables' folder")
    parser.add_argument("--out", default=GOLDEN, help="where the golden tree goes")
    parser.add_argument("--arrow-dir", help="also write Spark's rows as Arrow IPC here")
    args = parser.parse_args()
    golden = os.path.abspath(args.out)

    import pyspark
    from importlib.metadata import version as package_version

    tables = discover(os.path.abspath(args.external), os.path.abspath(args.generated))
    spark = delta_spark("sluice-cdf-golden")
    spark.conf.set("spark.databricks.delta.vacuum.enforceTimeTravelWithinDeletedFileRetentionDuration", "false")
    spark.conf.set("spark.databricks.delta.changeDataFeed.allowTimeTravelOptionsForSchema", "true")
    scratch = tempfile.mkdtemp(prefix="sluice-cdf-golden-")
    manifest = {
        "about": "Spark's table_changes() per table and version range; see README.md",
        "spark": pyspark.__version__,
        "delta_spark": package_version("delta-spark"),
        "tables": [],
    }
    for group in ("spark", "kernel", "generated"):
        shutil.rmtree(os.path.join(golden, group), ignore_errors=True)
    try:
        for group, name, key, original in tables:
            log = TableLog(original)
            path = scratch_copy(original, scratch) if key.startswith("external:") else original
            entry = {
                "table": key,
                "golden_dir": f"{group}/{name}",
                "earliest_version": log.earliest,
                "latest_version": log.latest,
                "first_cdf_version": log.first_cdf,
                "schema_change_versions": log.schema_changes,
                "column_mapping": log.column_mapping,
                "columns": None,
                "ranges": [],
            }
            out_dir = os.path.join(golden, group, name)
            os.makedirs(out_dir, exist_ok=True)
            for (start, end), kinds in log.ranges():
                item = {"start": start, "end": end, "kinds": kinds}
                changes = [v for v in log.schema_changes if start < v <= end]
                if changes:
                    item["schema_changes_inside"] = changes
                stem = f"{start}-{end}"
                try:
                    frame = spark_rows(spark, path, start, end)
                    lines = canonical_lines(frame)
                except Exception as exception:  # noqa: BLE001 - Spark raises many kinds
                    condition, message = error_of(exception, [path, original])
                    with open(os.path.join(out_dir, stem + ".error"), "w", encoding="utf-8") as out:
                        out.write(f"{condition}\n{message}\n")
                    item.update(error=f"{group}/{name}/{stem}.error", error_class=condition, message=message)
                    print(f"{key} {stem}: {condition}: {message[:160]}", file=sys.stderr)
                else:
                    with open(os.path.join(out_dir, stem + ".jsonl"), "w", encoding="utf-8") as out:
                        out.writelines(line + "\n" for line in lines)
                    columns = data_columns(frame)
                    item.update(golden=f"{group}/{name}/{stem}.jsonl", rows=len(lines), columns=columns)
                    if args.arrow_dir:
                        target = os.path.join(args.arrow_dir, group, name, stem + ".arrow")
                        write_arrow(frame, target, stream=start % 2 == 1)
                    print(f"{key} {stem}: {len(lines)} rows", file=sys.stderr)
                    # Column-mapping tables: Spark already answers with the end version's
                    # schema (and refuses versionAsOf with that schema mode).
                    if log.column_mapping in ("none", None) and any(v > end for v in log.schema_changes):
                        try:
                            end_frame = spark_rows_end_schema(spark, path, start, end)
                            end_columns = data_columns(end_frame)
                            end_lines = canonical_lines(end_frame) if end_columns != columns else None
                        except Exception as exception:  # noqa: BLE001
                            item["end_schema_error"] = ": ".join(error_of(exception, [path, original]))
                            end_columns = columns
                        if end_columns != columns:
                            end_stem = stem + ".end-schema"
                            with open(os.path.join(out_dir, end_stem + ".jsonl"), "w", encoding="utf-8") as out:
                                out.writelines(line + "\n" for line in end_lines)
                            item.update(
                                golden_end_schema=f"{group}/{name}/{end_stem}.jsonl",
                                end_schema_columns=end_columns,
                            )
                            if args.arrow_dir:
                                target = os.path.join(args.arrow_dir, group, name, end_stem + ".arrow")
                                write_arrow(end_frame, target, stream=start % 2 == 0)
                            print(f"{key} {end_stem}: {len(end_lines)} rows", file=sys.stderr)
                entry["ranges"].append(item)
            # The table's columns are those of the widest successful range (the full one
            # unless Spark refused it); a range lists its own only when they differ.
            answered = [r for r in entry["ranges"] if "columns" in r]
            if answered:
                widest = max(answered, key=lambda r: (r["end"] - r["start"], -r["start"]))
                entry["columns"] = widest["columns"]
                for r in answered:
                    if r["columns"] == entry["columns"]:
                        del r["columns"]
            manifest["tables"].append(entry)
    finally:
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    with open(os.path.join(golden, "manifest.json"), "w", encoding="utf-8") as out:
        out.write(manifest_text(manifest))
    ranges = sum(len(t["ranges"]) for t in manifest["tables"])
    errors = sum(1 for t in manifest["tables"] for r in t["ranges"] if "error" in r)
    print(f"{len(manifest['tables'])} tables, {ranges} ranges, {errors} expected errors", file=sys.stderr)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""An independent answer to "what is this table's change feed": reads the Delta log and
the Parquet files it names, without any Delta library, and prints one JSON object per
change row (data columns, _change_type, _commit_version; nulls left out), sorted.

A version with `cdc` actions changed exactly the rows in its _change_data files; any
other version inserted the rows of its added files and deleted those of its removed
files (dataChange only). Partition values come from the actions. Tables with deletion
vectors or column mapping are out of scope for this oracle.

    expected_changes.py TABLE
"""

import glob
import json
import math
import os
import sys
from datetime import date

import pyarrow.parquet as pq


def typed(value, delta_type):
    if value is None:
        return None
    if delta_type in ("integer", "long", "short", "byte"):
        return int(value)
    if delta_type in ("double", "float"):
        return float(value)
    if delta_type == "boolean":
        return value == "true"
    return value


def jsonable(value):
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def rows(table, action, schema_types, change_type):
    for row in pq.read_table(os.path.join(table, action["path"])).to_pylist():
        for name, raw in (action.get("partitionValues") or {}).items():
            row[name] = typed(raw, schema_types[name])
        if change_type is not None:
            row["_change_type"] = change_type
        yield row


def main():
    table = sys.argv[1]
    schema_types = {}
    out = []
    for path in sorted(glob.glob(os.path.join(table, "_delta_log", "*.json"))):
        version = int(os.path.basename(path).split(".")[0])
        actions = [json.loads(line) for line in open(path) if line.strip()]
        for action in actions:
            if "metaData" in action:
                fields = json.loads(action["metaData"]["schemaString"])["fields"]
                schema_types = {f["name"]: f["type"] for f in fields}
        cdc = [a["cdc"] for a in actions if "cdc" in a]
        changed = []
        if cdc:
            for action in cdc:
                changed.extend(rows(table, action, schema_types, None))
        else:
            for action in actions:
                if "add" in action and action["add"].get("dataChange", True):
                    changed.extend(rows(table, action["add"], schema_types, "insert"))
                if "remove" in action and action["remove"].get("dataChange", True):
                    changed.extend(rows(table, action["remove"], schema_types, "delete"))
        for row in changed:
            row["_commit_version"] = version
            out.append(json.dumps({k: jsonable(v) for k, v in row.items() if v is not None}, sort_keys=True))
    for line in sorted(out):
        print(line)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Compares the change rows in an Arrow IPC file with a golden file of Spark's answer.

    compare_changes.py --golden tests/golden/cdf/spark/cdf-table/0-3.jsonl --arrow rows.arrow

The Arrow file (IPC file or stream format, detected) holds the rows the reader returned:
the data columns under their logical names plus `_change_type` and `_commit_version`
(`_commit_timestamp` may be there too; it is ignored). Every row is rendered by
canonical.canonical_line, the lines are sorted, and compared with the golden file's lines
(already sorted, one per row). Exit 0 if they are equal; otherwise print the counts and
the first lines of a unified diff (golden -> arrow) and exit 1. Exit 2 on unreadable input.
Needs only pyarrow.
"""

import argparse
import difflib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pyarrow as pa  # noqa: E402

from canonical import canonical_line  # noqa: E402

DIFF_LINES = 40


def read_arrow(path):
    """All record batches of an Arrow IPC file, in file or stream format."""
    with open(path, "rb") as source:
        data = source.read()
    if not data:
        return []
    try:
        reader = pa.ipc.open_file(pa.BufferReader(data))
        return [reader.get_batch(i) for i in range(reader.num_record_batches)]
    except pa.ArrowInvalid:
        return list(pa.ipc.open_stream(pa.BufferReader(data)))


def arrow_lines(path):
    lines = []
    for batch in read_arrow(path):
        lines.extend(canonical_line(row) for row in batch.to_pylist())
    return sorted(lines)


def golden_lines(path):
    with open(path, encoding="utf-8") as source:
        return sorted(line.rstrip("\n") for line in source if line.strip())


def compare(golden, actual, golden_name="golden", actual_name="arrow", out=sys.stdout):
    if golden == actual:
        print(f"equal: {len(golden)} rows", file=out)
        return True
    diff = list(difflib.unified_diff(golden, actual, golden_name, actual_name, lineterm="", n=1))
    missing = sum(1 for line in diff if line.startswith("-") and not line.startswith("---"))
    extra = sum(1 for line in diff if line.startswith("+") and not line.startswith("+++"))
    print(
        f"different: golden has {len(golden)} rows, arrow has {len(actual)}; "
        f"{missing} golden rows missing, {extra} unexpected rows",
        file=out,
    )
    for line in diff[:DIFF_LINES]:
        print(line, file=out)
    if len(diff) > DIFF_LINES:
        print(f"... {len(diff) - DIFF_LINES} more diff lines", file=out)
    return False


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--golden", required=True, help="sorted canonical lines (.jsonl)")
    parser.add_argument("--arrow", required=True, help="Arrow IPC file or stream with the rows read")
    args = parser.parse_args(argv)
    try:
        golden = golden_lines(args.golden)
        actual = arrow_lines(args.arrow)
    except (OSError, pa.ArrowException, TypeError) as error:
        print(f"cannot read input: {error}", file=sys.stderr)
        return 2
    return 0 if compare(golden, actual, args.golden, args.arrow) else 1


if __name__ == "__main__":
    sys.exit(main())

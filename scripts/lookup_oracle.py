#!/usr/bin/env python3
"""The records gold-deals-enriched must give, computed independently of Sluice: an as-of
join over the change data feeds of the deals, owners and accounts tables (deltalake's
`load_cdf`, Spark's `table_changes`), in plain Python.

    lookup_oracle.py DEALS OWNERS ACCOUNTS

Prints one JSON object per deal insert or update postimage, in commit order:
`{"documentId", "owner_name", "account_segment"}`, each looked up as of the newest
version of its table committed at or before the deal change's commit.
"""

import json
import sys

import pyarrow as pa
from deltalake import DeltaTable


def changes(path: str) -> list:
    "The table's change rows, every version, as dicts."
    cdf = DeltaTable(path).load_cdf(starting_version=0)
    return pa.table(cdf.read_all()).to_pylist()


def as_of(lookup: list, key: str, column: str, value, at):
    "The column of the key's row as of `at`: its last change at or before `at`."
    rows = [
        r
        for r in lookup
        if r[key] == value and r["_commit_timestamp"] <= at and r["_change_type"] != "update_preimage"
    ]
    if not rows:
        return None
    last = max(rows, key=lambda r: r["_commit_version"])
    return None if last["_change_type"] == "delete" else last[column]


def main() -> None:
    deals, owners, accounts = (changes(p) for p in sys.argv[1:4])
    deals = [d for d in deals if d["_change_type"] in ("insert", "update_postimage")]
    deals.sort(key=lambda d: (d["_commit_version"], d["documentId"]))
    for deal in deals:
        at = deal["_commit_timestamp"]
        document = deal["fullDocument"]
        print(
            json.dumps(
                {
                    "documentId": deal["documentId"],
                    "owner_name": as_of(owners, "owner_id", "name", document["owner_id"], at),
                    "account_segment": as_of(
                        accounts, "account_id", "segment", document["account_id"], at
                    ),
                }
            )
        )


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes the demo's and tests' CRM deals table: the motivating case's bronze schema,
with the change data feed enabled, then appends, updates, deletes and merges.

Every step is deterministic, so the records Sluice produces from it can be checked
against a golden file.

    deals_table.py TABLE create [--rows N]     version 0: N deals (default 20)
    deals_table.py TABLE append --start K --rows N
    deals_table.py TABLE appends --start K --rows N --versions V
                                                V versions of N new deals each, from deal K
    deals_table.py TABLE update                 deals 3 and 7 are won
    deals_table.py TABLE delete                 deals 5 and 10 are removed
    deals_table.py TABLE merge                  deal 1 changes stage, deal 100 is new
    deals_table.py TABLE scenario               create, append 20..29, update, delete, merge
    deals_table.py TABLE big --start K --title-bytes N
                                                one deal whose title is N characters long
    deals_table.py TABLE bulk --rows N          version 0: N deals written in one commit, fast
    deals_table.py TABLE churn --rows N        after `bulk --rows N`: three versions touching about
                                                10% of the deals: an update (5%), a delete
                                                (2%), a merge (3% changed, N/100 new)
    deals_table.py TABLE vacuum                 VACUUM with no retention: files that only
                                                older versions need are deleted
    deals_table.py TABLE checkpoint             write a checkpoint of the latest version
    deals_table.py TABLE plain --rows N         a table without the change data feed
    deals_table.py TABLE region [--name C]      ADD COLUMNS C (string, default `region`), then
                                                deal 3's C is 'emea'
    deals_table.py TABLE drop [--name C]        overwrite the table without column C (its
                                                schema too, as schema_mode="overwrite" does)
    deals_table.py TABLE rename [--name C] --to D
                                                overwrite the table with column C named D
    deals_table.py TABLE retype [--name C]      overwrite the table with column C as a string
    deals_table.py TABLE owners [--rows N]      a lookup table of the owners of deals 0..N-1
                                                (owner_id, name, region), change data feed on
    deals_table.py TABLE owner-rename [--start K]
                                                the owner of deal K (default 3) is renamed
    deals_table.py TABLE owner-delete [--start K]
                                                the owner of deal K (default 5) is removed
    deals_table.py TABLE accounts [--rows N]    a lookup table of the accounts of deals 0..N-1
                                                (account_id, segment)
    deals_table.py TABLE owner-duplicate [--start K]
                                                a second row with the owner of deal K

Appends write the columns the table has gained since it was created as nulls.
"""

import argparse
from datetime import datetime, timedelta, timezone

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

FULL_DOCUMENT = pa.struct(
    [
        ("owner_id", pa.string()),
        ("owner_type", pa.string()),
        ("account_id", pa.string()),
        ("manager_account_id", pa.string()),
        ("hubspot_deal_id", pa.string()),
        ("stage", pa.string()),
        ("status", pa.string()),
        ("title", pa.string()),
    ]
)
SCHEMA = pa.schema(
    [
        ("documentId", pa.string()),
        ("eventTimestamp", pa.timestamp("us", tz="UTC")),
        ("fullDocument", FULL_DOCUMENT),
    ]
)
EPOCH = datetime(2024, 1, 15, 10, 30, tzinfo=timezone.utc)


def object_id(n: int) -> str:
    return f"ObjectId('{n:024x}')"


def deal(i: int, stage: str = "appointmentscheduled", status: str = "open") -> dict:
    return {
        "documentId": f"deal-{i:04d}",
        "eventTimestamp": EPOCH + timedelta(minutes=i),
        "fullDocument": {
            "owner_id": object_id(0x65A1F0C2E4B0 * 1000 + i),
            "owner_type": "user",
            "account_id": object_id(0xACC0 * 1_000_000 + i),
            # Every fifth deal has no manager: a null that to_json leaves out.
            "manager_account_id": None if i % 5 == 0 else object_id(0xBEEF * 1_000_000 + i),
            "hubspot_deal_id": str(900_000 + i),
            "stage": stage,
            "status": status,
            "title": f"Deal {i}",
        },
    }


def deals(ids, **kwargs) -> pa.Table:
    return pa.Table.from_pylist([deal(i, **kwargs) for i in ids], schema=SCHEMA)


def create(table: str, rows: int) -> None:
    write_deltalake(
        table,
        deals(range(rows)),
        mode="error",
        configuration={"delta.enableChangeDataFeed": "true"},
    )


# Rows built at a time by `bulk`: past this a commit is written from a stream of such
# chunks, so a 100M-row commit needs the memory of one chunk, not of the whole table.
BULK_CHUNK = 10_000_000


def bulk_rows(ids: range) -> pa.Table:
    """The deals `ids`, built column by column so that millions of rows are quick."""
    repeat = lambda value: pa.array([value] * len(ids), pa.string())  # noqa: E731
    document = pa.StructArray.from_arrays(
        [
            pa.array([object_id(0x65A1F0C2E4B0 * 1000 + i) for i in ids]),
            repeat("user"),
            pa.array([object_id(0xACC0 * 1_000_000 + i) for i in ids]),
            pa.array([None if i % 5 == 0 else object_id(0xBEEF * 1_000_000 + i) for i in ids]),
            pa.array([str(900_000 + i) for i in ids]),
            repeat("appointmentscheduled"),
            repeat("open"),
            pa.array([f"Deal {i}" for i in ids]),
        ],
        fields=list(FULL_DOCUMENT),
    )
    start = int(EPOCH.timestamp() * 1_000_000)
    return pa.Table.from_arrays(
        [
            pa.array([f"deal-{i:04d}" for i in ids]),
            pa.array([start + i * 60_000_000 for i in ids], pa.timestamp("us", tz="UTC")),
            document,
        ],
        schema=SCHEMA,
    )


def bulk(table: str, rows: int) -> None:
    """Like `create`, with `rows` deals in one commit, fast."""
    if rows <= BULK_CHUNK:
        data = bulk_rows(range(rows))
    else:
        chunks = (range(at, min(at + BULK_CHUNK, rows)) for at in range(0, rows, BULK_CHUNK))
        data = pa.RecordBatchReader.from_batches(
            SCHEMA, (batch for ids in chunks for batch in bulk_rows(ids).to_batches())
        )
    write_deltalake(table, data, mode="error", configuration={"delta.enableChangeDataFeed": "true"})


def conformed(table: str, data: pa.Table) -> pa.Table:
    """`data` with the columns the table gained after it was created (ADD COLUMNS) as
    nulls, so appends keep working after a schema change."""
    current = pa.schema(DeltaTable(table).schema().to_arrow())
    for field in current:
        if field.name not in data.column_names:
            data = data.append_column(field, pa.nulls(len(data), field.type))
    return data.select(current.names)


def append(table: str, start: int, rows: int) -> None:
    write_deltalake(table, conformed(table, deals(range(start, start + rows))), mode="append")


def appends(table: str, start: int, rows: int, versions: int) -> None:
    for v in range(versions):
        append(table, start + v * rows, rows)


def churn(table: str, rows: int) -> None:
    """Changes about 10% of a `bulk` table's deals in three versions."""
    ends = lambda *suffixes: " OR ".join(f"documentId LIKE '%{s}'" for s in suffixes)  # noqa: E731
    DeltaTable(table).update(
        predicate=ends("00", "20", "40", "60", "80"),
        updates={"fullDocument": WON},
    )
    DeltaTable(table).delete(ends("13", "37"))
    changed = [i for i in range(rows) if i % 100 in (71, 72, 73)]
    source = pa.concat_tables(
        [deals(changed, stage="contractsent"), deals(range(rows, rows + max(rows // 100, 1)))]
    )
    (
        DeltaTable(table)
        .merge(source, predicate="t.documentId = s.documentId", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )


def big(table: str, start: int, title_bytes: int) -> None:
    row = deal(start)
    row["fullDocument"]["title"] = "x" * title_bytes
    write_deltalake(table, pa.Table.from_pylist([row], schema=SCHEMA), mode="append")


# The deal's document with stage `closedwon` and status `won`, as an update expression.
WON = (
    "named_struct("
    "'owner_id', fullDocument['owner_id'], 'owner_type', fullDocument['owner_type'], "
    "'account_id', fullDocument['account_id'], "
    "'manager_account_id', fullDocument['manager_account_id'], "
    "'hubspot_deal_id', fullDocument['hubspot_deal_id'], "
    "'stage', 'closedwon', 'status', 'won', 'title', fullDocument['title'])"
)


def update(table: str) -> None:
    DeltaTable(table).update(
        predicate="documentId IN ('deal-0003', 'deal-0007')",
        updates={
            "eventTimestamp": "arrow_cast('2024-02-01T09:00:00Z', 'Timestamp(Microsecond, Some(\"UTC\"))')",
            "fullDocument": WON,
        },
    )


def delete(table: str) -> None:
    DeltaTable(table).delete("documentId IN ('deal-0005', 'deal-0010')")


def merge(table: str) -> None:
    source = pa.concat_tables([deals([1], stage="contractsent"), deals([100])])
    (
        DeltaTable(table)
        .merge(source, predicate="t.documentId = s.documentId", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )


OWNERS = pa.schema([("owner_id", pa.string()), ("name", pa.string()), ("region", pa.string())])
ACCOUNTS = pa.schema([("account_id", pa.string()), ("segment", pa.string())])


def owner(i: int, name: str = "") -> dict:
    return {
        "owner_id": deal(i)["fullDocument"]["owner_id"],
        "name": name or f"Owner {i}",
        "region": ["emea", "amer", "apac"][i % 3],
    }


def owners(table: str, rows: int) -> None:
    write_deltalake(
        table,
        pa.Table.from_pylist([owner(i) for i in range(rows)], schema=OWNERS),
        mode="error",
        configuration={"delta.enableChangeDataFeed": "true"},
    )


def owner_is(i: int) -> str:
    "A predicate on the owner of deal i (its id has quotes, doubled in SQL)."
    quoted = owner(i)["owner_id"].replace("'", "''")
    return f"owner_id = '{quoted}'"


def owner_rename(table: str, i: int) -> None:
    DeltaTable(table).update(
        predicate=owner_is(i),
        updates={"name": f"'Owner {i} (renamed)'"},
    )


def owner_delete(table: str, i: int) -> None:
    DeltaTable(table).delete(owner_is(i))


def owner_duplicate(table: str, i: int) -> None:
    write_deltalake(table, pa.Table.from_pylist([owner(i, "Twin")], schema=OWNERS), mode="append")


def accounts(table: str, rows: int) -> None:
    rows = [
        {"account_id": deal(i)["fullDocument"]["account_id"], "segment": ["smb", "mid", "enterprise"][i % 3]}
        for i in range(rows)
    ]
    write_deltalake(
        table,
        pa.Table.from_pylist(rows, schema=ACCOUNTS),
        mode="error",
        configuration={"delta.enableChangeDataFeed": "true"},
    )


def vacuum(table: str) -> None:
    DeltaTable(table).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)


def checkpoint(table: str) -> None:
    DeltaTable(table).create_checkpoint()


def plain(table: str, rows: int) -> None:
    write_deltalake(table, deals(range(rows)), mode="error")


def region(table: str, name: str) -> None:
    from deltalake.schema import Field

    dt = DeltaTable(table)
    dt.alter.add_columns([Field(name, "string", nullable=True)])
    DeltaTable(table).update(predicate="documentId = 'deal-0003'", updates={name: "'emea'"})


def reshaped(table: str, data: pa.Table) -> None:
    """Overwrites the table with `data`, its schema included: the one way delta-rs drops,
    renames or retypes a column, and what a following pipeline must not follow."""
    write_deltalake(table, data, mode="overwrite", schema_mode="overwrite")


def drop(table: str, name: str) -> None:
    reshaped(table, DeltaTable(table).to_pyarrow_table().drop_columns([name]))


def rename(table: str, name: str, to: str) -> None:
    data = DeltaTable(table).to_pyarrow_table()
    reshaped(table, data.rename_columns([to if c == name else c for c in data.column_names]))


def retype(table: str, name: str) -> None:
    data = DeltaTable(table).to_pyarrow_table()
    index = data.column_names.index(name)
    reshaped(table, data.set_column(index, name, data.column(name).cast(pa.string())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table")
    parser.add_argument("step", choices=["create", "bulk", "churn", "append", "appends", "big", "update", "delete", "merge", "scenario", "vacuum", "checkpoint", "plain", "region", "drop", "rename", "retype", "owners", "owner-rename", "owner-delete", "owner-duplicate", "accounts"])
    parser.add_argument("--rows", type=int, default=20)
    parser.add_argument("--start", type=int, default=20)
    parser.add_argument("--title-bytes", type=int, default=2_000_000)
    parser.add_argument("--versions", type=int, default=1)
    parser.add_argument("--name", default="region")
    parser.add_argument("--to")
    args = parser.parse_args()
    if args.step == "create":
        create(args.table, args.rows)
    elif args.step == "append":
        append(args.table, args.start, args.rows)
    elif args.step == "appends":
        appends(args.table, args.start, args.rows, args.versions)
    elif args.step == "churn":
        churn(args.table, args.rows)
    elif args.step == "bulk":
        bulk(args.table, args.rows)
    elif args.step == "big":
        big(args.table, args.start, args.title_bytes)
    elif args.step == "update":
        update(args.table)
    elif args.step == "delete":
        delete(args.table)
    elif args.step == "merge":
        merge(args.table)
    elif args.step == "vacuum":
        vacuum(args.table)
    elif args.step == "checkpoint":
        checkpoint(args.table)
    elif args.step == "plain":
        plain(args.table, args.rows)
    elif args.step == "region":
        region(args.table, args.name)
    elif args.step == "drop":
        drop(args.table, args.name)
    elif args.step == "rename":
        if not args.to:
            parser.error("rename needs --to, the column's new name")
        rename(args.table, args.name, args.to)
    elif args.step == "retype":
        retype(args.table, args.name)
    elif args.step == "owners":
        owners(args.table, args.rows)
    elif args.step == "owner-rename":
        owner_rename(args.table, args.start if args.start != 20 else 3)
    elif args.step == "owner-delete":
        owner_delete(args.table, args.start if args.start != 20 else 5)
    elif args.step == "owner-duplicate":
        owner_duplicate(args.table, args.start if args.start != 20 else 1)
    elif args.step == "accounts":
        accounts(args.table, args.rows)
    else:
        create(args.table, 20)
        append(args.table, 20, 10)
        update(args.table)
        delete(args.table)
        merge(args.table)
    print(f"{args.table}: version {DeltaTable(args.table).version()}")


if __name__ == "__main__":
    main()

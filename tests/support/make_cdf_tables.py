#!/usr/bin/env python3
"""Writes the small Delta tables with a change data feed that the CDF golden suite reads,
with Spark SQL and Delta Lake, into tests/data/cdf/<name>/ (checked in).

    py=$(scripts/spark_env.sh)
    "$py" tests/support/make_cdf_tables.py [--out DIR] [NAME ...]

Each table is written into a temporary folder next to its final place, then Hadoop's
hidden `.*.crc` side files are removed and the folder replaces the old table. The data is
fixed; only file names (UUIDs) and commit timestamps differ between runs, so the goldens
(tests/support/spark_changes.py) stay the same when the tables are made again.
Every table has delta.enableChangeDataFeed=true from version 0 (the CREATE commit, which
has no rows). Each INSERT writes one file per partition (local[1], one shuffle partition).
"""

import argparse
import glob
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from spark_session import delta_spark  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEFAULT_OUT = os.path.join(REPO, "tests", "data", "cdf")

CDF = "'delta.enableChangeDataFeed' = 'true'"
NO_DV = "'delta.enableDeletionVectors' = 'false'"


def update_all_types(sql, t):
    """UPDATE and DELETE on a table with every Delta type the reader must carry."""
    sql(f"""CREATE TABLE {t} (
        id INT, tiny TINYINT, small SMALLINT, big BIGINT, f FLOAT, d DOUBLE,
        dec DECIMAL(12, 3), str STRING, flag BOOLEAN, day DATE, ts TIMESTAMP,
        ntz TIMESTAMP_NTZ, bin BINARY, arr ARRAY<INT>, m MAP<STRING, INT>,
        st STRUCT<a: INT, b: STRING, inner: STRUCT<x: DOUBLE>>,
        arr_st ARRAY<STRUCT<k: STRING, v: BIGINT>>, m_arr MAP<INT, ARRAY<STRING>>)
        USING delta TBLPROPERTIES ({CDF}, {NO_DV})""")
    sql(f"""INSERT INTO {t} VALUES
        (1, 127, 32767, 9223372036854775807, 1.1, 0.1, 123456789.123, 'plain', true,
         DATE'2024-02-29', TIMESTAMP'2024-02-29 23:59:59.123456', TIMESTAMP_NTZ'2024-02-29 12:00:00.5',
         X'00FF10', array(1, 2, NULL), map('b', 2, 'a', 1), named_struct('a', 1, 'b', 'x', 'inner', named_struct('x', 2.5)),
         array(named_struct('k', 'k1', 'v', 10L)), map(2, array('two'), 1, array('one', NULL))),
        (2, -128, -32768, -9223372036854775808, CAST('NaN' AS FLOAT), CAST('Infinity' AS DOUBLE), -0.001, 'ünïcødé "quoted" \\\\ tab\t', false,
         DATE'1900-01-01', TIMESTAMP'1969-12-31 23:59:59.999999', TIMESTAMP_NTZ'1900-01-01 00:00:00',
         X'', array(), map(), named_struct('a', NULL, 'b', NULL, 'inner', NULL),
         array(), map()),
        (3, 0, 0, 0, -0.0, CAST('-Infinity' AS DOUBLE), 0.000, '', NULL,
         DATE'1970-01-01', TIMESTAMP'1970-01-01 00:00:00', TIMESTAMP_NTZ'2262-04-11 23:47:16.854775',
         NULL, NULL, NULL, NULL, NULL, NULL),
        (4, NULL, NULL, NULL, NULL, CAST('NaN' AS DOUBLE), 10.000, NULL, true,
         NULL, NULL, NULL, X'DEADBEEF', array(NULL), map('k', NULL), named_struct('a', 4, 'b', 'four', 'inner', named_struct('x', CAST('NaN' AS DOUBLE))),
         array(named_struct('k', NULL, 'v', NULL), NULL), map(4, NULL))""")
    sql(f"UPDATE {t} SET d = d * 2, str = concat(str, '!'), dec = dec + 1 WHERE id IN (1, 3)")
    sql(f"DELETE FROM {t} WHERE id = 2")
    sql(f"UPDATE {t} SET m = map('z', 26), ts = TIMESTAMP'2030-01-01 00:00:00.000001', arr = array(7) WHERE id = 4")


def delete(sql, t):
    """A DELETE with a predicate (rewrites a file, writes _change_data), an unconditional
    DELETE (removes whole files, no _change_data) and appends around them."""
    sql(f"CREATE TABLE {t} (id INT, name STRING, amount DECIMAL(10, 2)) USING delta TBLPROPERTIES ({CDF}, {NO_DV})")
    sql(f"""INSERT INTO {t} VALUES (1, 'one', 1.10), (2, 'two', 2.20), (3, 'three', 3.30),
        (4, 'four', 4.40), (5, 'five', 5.50), (6, 'six', 6.60)""")
    sql(f"DELETE FROM {t} WHERE id % 2 = 0")
    sql(f"INSERT INTO {t} VALUES (7, 'seven', 7.70), (8, 'eight', 8.80)")
    sql(f"DELETE FROM {t}")
    sql(f"INSERT INTO {t} VALUES (9, 'nine', 9.90)")


def merge_dv(sql, t):
    """MERGE (update, delete, insert), DELETE and UPDATE with deletion vectors, then an
    OPTIMIZE (dataChange=false: emits nothing) and an append."""
    sql(f"""CREATE TABLE {t} (id INT, name STRING, qty BIGINT) USING delta
        TBLPROPERTIES ({CDF}, 'delta.enableDeletionVectors' = 'true')""")
    sql(f"""INSERT INTO {t} VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30), (4, 'd', 40),
        (5, 'e', 50), (6, 'f', 60), (7, 'g', 70), (8, 'h', 80)""")
    sql(f"""MERGE INTO {t} AS t
        USING (SELECT * FROM VALUES (2, 'B', 200, 'upsert'), (4, NULL, NULL, 'delete'),
                                    (9, 'i', 90, 'upsert'), (10, 'j', 100, 'upsert')
               AS s(id, name, qty, op)) AS s
        ON t.id = s.id
        WHEN MATCHED AND s.op = 'delete' THEN DELETE
        WHEN MATCHED THEN UPDATE SET name = s.name, qty = s.qty
        WHEN NOT MATCHED THEN INSERT (id, name, qty) VALUES (s.id, s.name, s.qty)""")
    sql(f"DELETE FROM {t} WHERE id = 3")
    sql(f"UPDATE {t} SET qty = qty + 1 WHERE id IN (5, 9)")
    sql(f"OPTIMIZE {t}")
    sql(f"INSERT INTO {t} VALUES (11, 'k', 110)")


def overwrite(sql, spark, t, path):
    """INSERT OVERWRITE twice (the second replaces with an overlapping row) and a
    DataFrame overwrite with replaceWhere on a data column."""
    sql(f"CREATE TABLE {t} (id INT, name STRING) USING delta TBLPROPERTIES ({CDF}, {NO_DV})")
    sql(f"INSERT INTO {t} VALUES (1, 'one'), (2, 'two'), (3, 'three')")
    sql(f"INSERT OVERWRITE {t} VALUES (3, 'three'), (4, 'four')")
    sql(f"INSERT INTO {t} VALUES (5, 'five'), (6, 'six')")
    (
        spark.createDataFrame([(6, "SIX"), (7, "seven")], "id INT, name STRING")
        .coalesce(1)
        .write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", "id >= 6")
        .save(path)
    )
    sql(f"INSERT OVERWRITE {t} VALUES (8, 'eight')")


def add_column(sql, t):
    """Schema evolution: ADD COLUMNS (nullable) in the middle of the feed, then changes
    that touch the new column and rows written before it."""
    sql(f"CREATE TABLE {t} (id INT, name STRING) USING delta TBLPROPERTIES ({CDF}, {NO_DV})")
    sql(f"INSERT INTO {t} VALUES (1, 'one'), (2, 'two'), (3, 'three')")
    sql(f"UPDATE {t} SET name = 'TWO' WHERE id = 2")
    sql(f"ALTER TABLE {t} ADD COLUMNS (score DOUBLE, tags ARRAY<STRING>)")
    sql(f"INSERT INTO {t} VALUES (4, 'four', 4.5, array('x'))")
    sql(f"UPDATE {t} SET score = 1.5 WHERE id = 1")
    sql(f"DELETE FROM {t} WHERE id = 3")


def partitioned(sql, spark, t):
    """Two partition columns (string with a null partition, date): an UPDATE that moves a
    row across partitions, a DELETE of a whole partition (file removal only), a DELETE
    inside a partition, and a dynamic partition overwrite."""
    sql(f"""CREATE TABLE {t} (id INT, value STRING, region STRING, day DATE) USING delta
        PARTITIONED BY (region, day) TBLPROPERTIES ({CDF}, {NO_DV})""")
    sql(f"""INSERT INTO {t} VALUES
        (1, 'a', 'eu', DATE'2024-01-01'), (2, 'b', 'eu', DATE'2024-01-02'),
        (3, 'c', 'us', DATE'2024-01-01'), (4, 'd', 'us', DATE'2024-01-01'),
        (5, 'e', NULL, DATE'2024-01-03'), (6, 'f', 'ap', DATE'2024-01-01')""")
    sql(f"UPDATE {t} SET region = 'ap', value = 'c moved' WHERE id = 3")
    sql(f"DELETE FROM {t} WHERE region = 'eu'")
    sql(f"DELETE FROM {t} WHERE id = 4")
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        sql(f"INSERT OVERWRITE {t} VALUES (7, 'g', 'ap', DATE'2024-01-01'), (8, 'h', 'sa', DATE'2024-01-05')")
    finally:
        spark.conf.set("spark.sql.sources.partitionOverwriteMode", "static")


def checkpoint(sql, t):
    """delta.checkpointInterval=2: checkpoints at versions 2, 4 and 6, inside the range."""
    sql(f"""CREATE TABLE {t} (id INT, name STRING) USING delta
        TBLPROPERTIES ({CDF}, {NO_DV}, 'delta.checkpointInterval' = '2')""")
    sql(f"INSERT INTO {t} VALUES (1, 'one'), (2, 'two')")
    sql(f"INSERT INTO {t} VALUES (3, 'three')")
    sql(f"UPDATE {t} SET name = upper(name) WHERE id <= 2")
    sql(f"DELETE FROM {t} WHERE id = 3")
    sql(f"INSERT INTO {t} VALUES (4, 'four')")
    sql(f"""MERGE INTO {t} AS t USING (SELECT * FROM VALUES (4, 'FOUR'), (5, 'five') AS s(id, name)) AS s
        ON t.id = s.id WHEN MATCHED THEN UPDATE SET name = s.name
        WHEN NOT MATCHED THEN INSERT (id, name) VALUES (s.id, s.name)""")
    sql(f"INSERT INTO {t} VALUES (6, 'six')")


def column_mapping_rename(sql, t):
    """Column mapping mode name, a column whose name has a space, and a RENAME COLUMN in
    the middle of the feed (a non-additive schema change)."""
    sql(f"""CREATE TABLE {t} (id INT, `first name` STRING, value DOUBLE) USING delta
        TBLPROPERTIES ({CDF}, {NO_DV}, 'delta.columnMapping.mode' = 'name',
                       'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5')""")
    sql(f"INSERT INTO {t} VALUES (1, 'ann', 1.0), (2, 'bob', 2.0)")
    sql(f"UPDATE {t} SET value = 20.0 WHERE id = 2")
    sql(f"ALTER TABLE {t} RENAME COLUMN value TO `amount (eur)`")
    sql(f"INSERT INTO {t} VALUES (3, 'cy', 3.0)")
    sql(f"UPDATE {t} SET `amount (eur)` = 10.0 WHERE id = 1")
    sql(f"DELETE FROM {t} WHERE id = 2")


TABLES = {
    "update_all_types": lambda spark, sql, t, path: update_all_types(sql, t),
    "delete": lambda spark, sql, t, path: delete(sql, t),
    "merge_dv": lambda spark, sql, t, path: merge_dv(sql, t),
    "overwrite": lambda spark, sql, t, path: overwrite(sql, spark, t, path),
    "add_column": lambda spark, sql, t, path: add_column(sql, t),
    "partitioned": lambda spark, sql, t, path: partitioned(sql, spark, t),
    "checkpoint": lambda spark, sql, t, path: checkpoint(sql, t),
    "column_mapping_rename": lambda spark, sql, t, path: column_mapping_rename(sql, t),
}


def make(spark, name, out):
    final = os.path.join(out, name)
    tmp = os.path.join(out, f".{name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    table = f"delta.`{tmp}`"
    TABLES[name](spark, lambda text: spark.sql(text).collect(), table, tmp)
    for crc in glob.glob(os.path.join(tmp, "**", ".*.crc"), recursive=True):
        os.remove(crc)
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    history = spark.sql(f"DESCRIBE HISTORY delta.`{final}`").orderBy("version").collect()
    size = sum(os.path.getsize(f) for f in glob.glob(os.path.join(final, "**"), recursive=True) if os.path.isfile(f))
    ops = ", ".join(f"{h.version}:{h.operation}" for h in history)
    print(f"{name}: {size // 1024} KiB, versions {ops}", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description="Write the CDF test tables with Spark.")
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("names", nargs="*", help=f"tables to make (default all: {', '.join(TABLES)})")
    args = parser.parse_args()
    names = args.names or list(TABLES)
    unknown = [n for n in names if n not in TABLES]
    if unknown:
        parser.error(f"unknown tables: {unknown}")
    os.makedirs(args.out, exist_ok=True)
    spark = delta_spark("sluice-make-cdf-tables")
    try:
        for name in names:
            make(spark, name, os.path.abspath(args.out))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()

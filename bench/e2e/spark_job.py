"""The Spark contestant of the end-to-end benchmark: the motivating case's job done
the way Spark can do it, reading the change data feed.

    spark_job.py TABLE TOPIC BOOTSTRAP CHECKPOINT

Structured Streaming reads the table's change feed from version 0
(`readChangeFeed`), drops update pre-images, shapes the gold columns as `deal_gold1`
does (`substring(x, 11, 24)` of the ObjectId fields, `to_json(struct(...))`), turns
deletes into tombstones keyed by `documentId`, and writes with Spark's Kafka sink
(at-least-once) on `local[2]` with the `availableNow` trigger. Prints one JSON line.
"""

import json
import os
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql.functions import col, lit, struct, substring, to_json, when

DELTA = "io.delta:delta-spark_4.1_2.13:4.4.0"
KAFKA = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.1"


def main() -> None:
    table, topic, bootstrap, checkpoint = sys.argv[1:5]
    started = time.monotonic()
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("sluice-bench-spark")
        .config("spark.jars.packages", f"{DELTA},{KAFKA}")
        .config("spark.jars.ivy", os.environ.get("SLUICE_SPARK_IVY", "/tmp/spark-ivy"))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    changes = (
        spark.readStream.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .load(table)
        .filter(col("_change_type") != "update_preimage")
    )
    cut = lambda field: substring(col(f"fullDocument.{field}"), 11, 24).alias(field)  # noqa: E731
    gold = struct(
        col("documentId"),
        col("eventTimestamp"),
        cut("owner_id"),
        col("fullDocument.owner_type").alias("owner_type"),
        cut("account_id"),
        cut("manager_account_id"),
        col("fullDocument.hubspot_deal_id").alias("hubspot_deal_id"),
        col("fullDocument.stage").alias("stage"),
        col("fullDocument.status").alias("status"),
        col("fullDocument.title").alias("title"),
    )
    records = changes.select(
        col("documentId").alias("key"),
        when(col("_change_type") == "delete", lit(None).cast("string")).otherwise(to_json(gold)).alias("value"),
    )
    query = (
        records.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()
    print(json.dumps({"seconds": time.monotonic() - started}))


if __name__ == "__main__":
    main()

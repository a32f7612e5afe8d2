"""A small local Spark session with Delta Lake, shared by make_cdf_tables.py and
spark_changes.py. Run those with the venv python from scripts/spark_env.sh.

One core (local[1]), one shuffle partition, UTC everywhere; Delta's jars come from Maven
through spark.jars.packages into an Ivy cache under ${SLUICE_CACHE:-~/.cache/sluice}.
"""

import os
import time

os.environ["TZ"] = "UTC"
time.tzset()


def delta_spark(app_name="sluice-cdf"):
    import pyspark
    from delta.pip_utils import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    cache = os.environ.get("SLUICE_CACHE") or os.path.expanduser("~/.cache/sluice")
    ivy = os.path.join(cache, "spark-ivy")
    os.makedirs(ivy, exist_ok=True)
    builder = (
        SparkSession.builder.appName(app_name)
        .master("local[1]")
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.jars.ivy", ivy)
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        # Delta rebuilds table state with 50 partitions by default: far too many here.
        .config("spark.databricks.delta.snapshotPartitions", "1")
        .config("spark.sql.warehouse.dir", os.path.join(cache, "spark-warehouse"))
        .config("spark.driver.extraJavaOptions", f"-Duser.timezone=UTC -Dderby.system.home={cache}/spark-derby")
    )
    spark = configure_spark_with_delta_pip(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark

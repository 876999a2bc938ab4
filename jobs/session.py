"""Build the SparkSession every job uses: Hive catalog, metastore and warehouse inside the lake."""

from __future__ import annotations

import os
import sys

from pyspark import SparkConf
from pyspark.sql import SparkSession

from udfs.paths import is_local_path, local_path


def lake_uri(root: str) -> str:
    """Absolute URI of the lake root: a relative local path would otherwise be resolved
    against the catalog's database directory."""
    if is_local_path(root):
        return f"file://{local_path(root)}"
    return root.rstrip("/")


def build_session(
    app_name: str,
    lake_root: str,
    master: str | None = None,
    conf: dict[str, str] | None = None,
) -> SparkSession:
    """A Hive-enabled session whose warehouse (and, for a local lake, Derby metastore) live
    under the lake root, so a fresh `spark-sql` pointed at the same lake sees every table.

    A cluster with its own Hive metastore passes `spark.hadoop.hive.metastore.uris` (or sets
    it in hive-site.xml) and the embedded Derby metastore is not used.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name).enableHiveSupport()
    if master and not SparkConf().contains("spark.master"):
        builder = builder.master(master)  # spark-submit's --master wins
    # Partition values such as corpus=2019 stay strings.
    builder = builder.config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    for key, value in embedded_catalog_conf(lake_root).items():
        builder = builder.config(key, value)
    for key, value in (conf or {}).items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if is_local_path(lake_root):
        # Derby writes derby.log into the working directory unless told otherwise; the Hive
        # client starts lazily, so setting the property now is early enough.
        log = os.path.join(local_path(lake_root), "derby.log")
        spark.sparkContext._jvm.java.lang.System.setProperty("derby.stream.error.file", log)
    return spark


def embedded_catalog_conf(lake_root: str) -> dict[str, str]:
    """Warehouse under the lake; for a local lake also an embedded Derby metastore there."""
    conf = {"spark.sql.warehouse.dir": f"{lake_root.rstrip('/')}/warehouse"}
    if is_local_path(lake_root) and not SparkConf().contains("spark.hadoop.hive.metastore.uris"):
        root = local_path(lake_root)
        os.makedirs(root, exist_ok=True)
        conf["spark.sql.warehouse.dir"] = f"file://{root}/warehouse"
        conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
            f"jdbc:derby:;databaseName={root}/metastore_db;create=true"
        )
    return conf


def spark_sql_command(lake_root: str) -> str:
    """The `spark-sql` invocation that opens the same catalog as the jobs (printed for users)."""
    args = " ".join(f"--conf {k}={v}" for k, v in embedded_catalog_conf(lake_root).items())
    return f"spark-sql {args}"

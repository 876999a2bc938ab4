"""Create, once, every catalog table a sluice job touches in a new shared metastore.

The metastore makes its PostgreSQL tables on first use (DataNucleus autoCreateTables): two jobs
that first add a partition at the same moment both try to create the same tables, one waits
on the other's open transaction inside the one service, and a call times out. So
scripts/metastore.sh runs this once, alone, right after a new metastore starts: a database, a
partitioned table, a partition added, a column added, a view; the view and table dropped.

    python scripts/metastore_warmup.py thrift://127.0.0.1:9083 WORKDIR
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession


def main(uri: str, work: str) -> None:
    spark = (SparkSession.builder.master("local[1]").appName("sluice-metastore-warmup")
             .enableHiveSupport()
             .config("spark.hadoop.hive.metastore.uris", uri)
             .config("spark.sql.warehouse.dir", f"file://{work}/warehouse")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    db = "sluice_metastore_warmup"
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {db}")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {db}.t (a INT, p STRING) USING parquet "
              f"PARTITIONED BY (p) LOCATION 'file://{work}/warmup/t'")
    spark.sql(f"ALTER TABLE {db}.t ADD IF NOT EXISTS PARTITION (p = 'x') "
              f"LOCATION 'file://{work}/warmup/t/p=x'")
    spark.sql(f"ALTER TABLE {db}.t ADD COLUMNS (b STRING)")
    spark.sql(f"CREATE OR REPLACE VIEW {db}.v AS SELECT a FROM {db}.t WHERE p = 'x'")
    spark.sql(f"SELECT count(*) FROM {db}.v").collect()
    spark.sql(f"DROP VIEW {db}.v")
    spark.sql(f"DROP TABLE {db}.t")  # its files stay under WORKDIR/warmup; the database too
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

"""The lake: Parquet tables in the Spark SQL catalog, committed by flipping partition locations.

A run writes its data under `<root>/runs/<run_id>/...`, where no table points yet. Commit
writes a journal listing the partition flips, then points each table partition at its new
directory with `ALTER TABLE ... PARTITION ... SET LOCATION` and deletes the journal. A run
killed before commit leaves nothing visible; one killed during commit is rolled forward by
the next job that opens the lake (`recover`). Readers go through the catalog.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from jobs.session import lake_uri


@dataclass(frozen=True)
class Flip:
    """Point one partition of `table` at `location`."""

    table: str
    partition: dict[str, str]
    location: str


def sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def partition_spec(partition: dict[str, str]) -> str:
    return ", ".join(f"`{k}` = {sql_string(v)}" for k, v in partition.items())


class Lake:
    def __init__(self, spark: SparkSession, root: str, database: str) -> None:
        self.spark = spark
        self.root = lake_uri(root)
        self.database = database
        jvm = spark.sparkContext._jvm
        self._Path = jvm.org.apache.hadoop.fs.Path
        self._hconf = spark.sparkContext._jsc.hadoopConfiguration()
        spark.sql(f"CREATE DATABASE IF NOT EXISTS `{database}`")

    # -- paths ---------------------------------------------------------------------------
    def run_dir(self, run_id: str) -> str:
        return f"{self.root}/runs/{run_id}"

    def qualified(self, table: str) -> str:
        return f"`{self.database}`.`{table}`"

    def _fs(self, path: str):
        return self._Path(path).getFileSystem(self._hconf)

    def qualified_path(self, path: str) -> str:
        """One spelling per location: the catalog says `file:/x`, the job `file:///x`."""
        return self._fs(path).makeQualified(self._Path(path)).toString().rstrip("/")

    def exists(self, path: str) -> bool:
        return self._fs(path).exists(self._Path(path))

    def delete(self, path: str) -> None:
        self._fs(path).delete(self._Path(path), True)

    def mkdirs(self, path: str) -> None:
        self._fs(path).mkdirs(self._Path(path))

    def write_text(self, path: str, text: str) -> None:
        out = self._fs(path).create(self._Path(path), True)
        out.write(bytearray(text.encode()))
        out.close()

    def read_text(self, path: str) -> str:
        return self.spark.sparkContext.wholeTextFiles(path).collect()[0][1]

    def list_dir(self, path: str) -> list[str]:
        if not self.exists(path):
            return []
        return [s.getPath().toString() for s in self._fs(path).listStatus(self._Path(path))]

    # -- tables --------------------------------------------------------------------------
    def ensure_table(self, table: str, schema: StructType, partition_cols: list[str]) -> None:
        """Create the table if missing; add columns a newer version of the job produces."""
        name = self.qualified(table)
        data_cols = [f for f in schema.fields if f.name not in partition_cols]
        part_cols = [schema[c] for c in partition_cols]
        if not self.spark.catalog.tableExists(f"{self.database}.{table}"):
            self.mkdirs(f"{self.root}/tables/{table}")
            cols = ", ".join(
                f"`{f.name}` {f.dataType.simpleString()}" for f in data_cols + part_cols
            )
            self.spark.sql(
                f"CREATE TABLE {name} ({cols}) USING parquet "
                f"PARTITIONED BY ({', '.join(partition_cols)}) "
                f"LOCATION {sql_string(f'{self.root}/tables/{table}')}"
            )
            return
        existing = {f.name: f.dataType for f in self.spark.table(name).schema.fields}
        for field in data_cols:
            if field.name not in existing:
                column = f"`{field.name}` {field.dataType.simpleString()}"
                self.spark.sql(f"ALTER TABLE {name} ADD COLUMNS ({column})")
            elif existing[field.name] != field.dataType:
                raise RuntimeError(
                    f"{name}.{field.name} is {existing[field.name].simpleString()} in the lake "
                    f"but the job writes {field.dataType.simpleString()}: migrate the table first"
                )

    def partition_location(self, table: str, partition: dict[str, str]) -> str | None:
        rows = self.spark.sql(
            f"DESCRIBE FORMATTED {self.qualified(table)} PARTITION ({partition_spec(partition)})"
        ).collect()
        return next((r.data_type for r in rows if r.col_name == "Location"), None)

    def has_partition(self, table: str, partition: dict[str, str]) -> bool:
        wanted = "/".join(f"{k}={v}" for k, v in partition.items())
        rows = self.spark.sql(f"SHOW PARTITIONS {self.qualified(table)}").collect()
        return any(_unescape_partition(r[0]) == wanted for r in rows)

    # -- commit --------------------------------------------------------------------------
    def commit(self, run_id: str, flips: list[Flip]) -> None:
        journal = f"{self.root}/journal/{run_id}.json"
        self.write_text(journal, json.dumps([asdict(f) for f in flips]))
        self._apply(flips)
        self.delete(journal)

    def recover(self) -> list[str]:
        """Roll forward commits a killed run left half-done. Returns their run ids."""
        recovered = []
        for path in self.list_dir(f"{self.root}/journal"):
            flips = [Flip(**f) for f in json.loads(self.read_text(path))]
            self._apply(flips)
            self.delete(path)
            recovered.append(path.rsplit("/", 1)[-1].removesuffix(".json"))
        return recovered

    def _apply(self, flips: list[Flip]) -> None:
        stale: list[str] = []
        for flip in flips:
            name, spec = self.qualified(flip.table), partition_spec(flip.partition)
            if self.has_partition(flip.table, flip.partition):
                old = self.partition_location(flip.table, flip.partition)
                if old and self.qualified_path(old) != self.qualified_path(flip.location):
                    stale.append(old)
                self.spark.sql(
                    f"ALTER TABLE {name} PARTITION ({spec}) "
                    f"SET LOCATION {sql_string(flip.location)}"
                )
            else:
                self.spark.sql(
                    f"ALTER TABLE {name} ADD PARTITION ({spec}) "
                    f"LOCATION {sql_string(flip.location)}"
                )
            self.spark.catalog.refreshTable(f"{self.database}.{flip.table}")
        for old in stale:  # superseded data of an earlier run of the same partition
            if "/runs/" in old:  # only data this lake's runs wrote
                self.delete(old)


def _unescape_partition(text: str) -> str:
    from urllib.parse import unquote

    return "/".join(unquote(part) for part in text.split("/"))


def write_staged(df: DataFrame, path: str, partition_cols: list[str]) -> None:
    """Write a run's data where no table points yet (overwrite: a retried run starts clean)."""
    df.write.mode("overwrite").partitionBy(*partition_cols).parquet(path)

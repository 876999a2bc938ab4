"""A refresh's commit units: for each (pair, corpus) whose rows change, the directory that
replaces the published one, made of the published Parquet files it keeps and the new ones.

A refresh writes each source file's rows into Parquet files of their own, named
`s<file id>-part-…parquet`, so a changed or dropped file's rows are its files: the unit
leaves them out, links every other published file in unchanged (a hard link on a local lake:
no byte is copied or rewritten; a copy elsewhere) and moves the new files in. The unit then
swaps with the published directory in one step, as every commit does (jobs/lake/store.py).
Files of a corpus that a plain filter run wrote carry no file id: a refresh keeps them.
"""

from __future__ import annotations

import os
import re

from jobs.lake.store import Flip, Lake
from udfs.paths import is_local_path, local_path

SOURCE_FILE = re.compile(r"^s([0-9a-f]{16})-")
SOURCE_COLUMN = "source_id"  # the staged rows' file id: a partition column of the staged data only


def source_id(name: str) -> str | None:
    """The source file id in a Parquet file's name, or None (a plain filter run's file)."""
    match = SOURCE_FILE.match(name)
    return match.group(1) if match else None


def is_data_file(name: str) -> bool:
    return not name.startswith(("_", "."))


class UnitBuilder:
    def __init__(self, lake: Lake, run_dir: str, removed: set[str]) -> None:
        self.lake, self.run_dir, self.removed = lake, run_dir, removed

    def unit(self, table: str, partition: dict[str, str], inner: list[dict[str, str]],
             staged: bool, removed: set[str] | None = None) -> Flip:
        """The unit replacing `table`'s `partition` directory (with its `inner` partitions,
        e.g. each outcome): published files kept but those of `removed` file ids (default:
        the builder's), plus the run's new files for it when `staged` (the run wrote rows for
        it under `<run_dir>/<table>/`)."""
        lake = self.lake
        removed = self.removed if removed is None else removed
        where = lake.partition_path(partition)
        unit = f"{self.run_dir}/units/{table}/{where}"
        for part in inner or [{}]:
            sub = lake.partition_path(part) if part else ""
            target = f"{unit}/{sub}" if sub else unit
            lake.mkdirs(target)
            published = f"{lake.table_dir(table)}/{where}/{sub}".rstrip("/")
            for path in lake.list_dir(published):
                name = path.rsplit("/", 1)[-1]
                if is_data_file(name) and source_id(name) not in removed:
                    self.link(path, f"{target}/{name}")
            if staged:
                new = f"{self.run_dir}/{table}/{where}/{sub}".rstrip("/")
                for source_dir in self.lake.list_dir(new):
                    file_id = source_dir.rsplit("/", 1)[-1].removeprefix(f"{SOURCE_COLUMN}=")
                    for path in self.lake.list_dir(source_dir):
                        name = path.rsplit("/", 1)[-1]
                        if is_data_file(name):
                            lake.rename(path, f"{target}/s{file_id}-{name}")
        return Flip(table, partition, unit, inner)

    def link(self, src: str, dst: str) -> None:
        """`dst` names the same file as `src`: a hard link on a local lake, else a copy."""
        if is_local_path(src) and is_local_path(dst):
            os.link(local_path(src), local_path(dst))
            return
        jvm = self.lake.spark.sparkContext._jvm
        fs = self.lake._fs(src)
        jvm.org.apache.hadoop.fs.FileUtil.copy(
            fs, self.lake._Path(src), fs, self.lake._Path(dst), False, self.lake._hconf)

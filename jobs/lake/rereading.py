"""Reading tables while other jobs commit to them.

A Spark query lists a table's files when it is planned and opens them when it runs. A commit
that swaps a unit in between (jobs/lake/store.py `Lake._publish`: the unit's directory
exchanged whole) leaves the query a file that is no longer there, and Spark fails the query
with `FAILED_READ_FILE.FILE_NOT_EXIST`. The unit itself is whole, old or new; only the
query's listing is stale. So a reader that must not fail while others commit (the report,
the clean-up after a commit) reads again over a fresh listing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from pyspark.sql import SparkSession

from jobs.kit.progress import log

T = TypeVar("T")

TRIES = 3  # each retry follows a commit that landed during the read: rare, and never endless
GONE = ("FAILED_READ_FILE.FILE_NOT_EXIST", "java.io.FileNotFoundException")


class Lake(Protocol):
    """What a read needs of jobs/lake/store.py's Lake (which reads through commits itself)."""

    spark: SparkSession
    database: str

    def table_dir(self, table: str) -> str: ...

    def qualified(self, table: str) -> str: ...


def swapped_away(err: BaseException, lake: Lake) -> bool:
    """Whether `err` is a read of a file under the lake's tables that a commit moved away."""
    said = str(err)
    tables = lake.table_dir("").split("://", 1)[-1].lstrip("/")  # with or without a scheme
    return any(mark in said for mark in GONE) and tables in said


def read_through_commits(lake: Lake, read: Callable[[], T]) -> T:
    """`read()`, made again (up to TRIES times in all) when a commit swapped a unit it had
    listed; before each new try the lake's tables are listed afresh. Any other error, or the
    same one after the last try, is raised."""
    for attempt in range(1, TRIES + 1):
        try:
            return read()
        except Exception as err:
            if attempt == TRIES or not swapped_away(err, lake):
                raise
            log(f"a commit replaced files this read had listed: reading again ({attempt} of "
                f"{TRIES - 1} retries)")
            refresh_tables(lake)
    raise AssertionError("unreachable")  # the loop returns or raises


def refresh_tables(lake: Lake) -> None:
    """Drop the cached file listings of the lake's tables (views read through them)."""
    catalog = lake.spark.catalog
    for table in catalog.listTables(lake.database):
        if table.tableType != "VIEW":
            catalog.refreshTable(lake.qualified(table.name))

"""A read of a table while another job commits to it (jobs/lake/rereading.py): the query lists a
unit's files, a commit swaps the unit, and the query's read of the listed files fails. Read
through commits, it is made again over a fresh listing and returns the unit as committed."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import DataFrame

from jobs.lake.rereading import TRIES, read_through_commits
from jobs.lake.store import Flip, Lake

TABLE = "reread_probe"


@pytest.fixture()
def lake(spark, lake_root: Path, request: pytest.FixtureRequest) -> Lake:
    database = "reread_" + "".join(c if c.isalnum() else "_" for c in request.node.name[5:30])
    lake = Lake(spark, str(lake_root / database), database)
    lake.ensure_table(TABLE, spark.createDataFrame([], "text string, part string").schema,
                      ["part"])
    commit(lake, "r0", ["一", "二"])
    return lake


def commit(lake: Lake, run_id: str, texts: list[str]) -> None:
    """A run that replaces the table's one unit (part=a) with `texts`, as a job commits."""
    staged = f"{lake.run_dir(run_id)}/{TABLE}"
    lake.spark.createDataFrame([(t, "a") for t in texts], "text string, part string").write \
        .mode("overwrite").partitionBy("part").parquet(staged)
    lake.commit(run_id, [Flip(TABLE, {"part": "a"}, f"{staged}/part=a")])


def texts(df: DataFrame) -> list[str]:
    return sorted(r.text for r in df.collect())


def planned(lake: Lake) -> DataFrame:
    """A query of the table that has listed its files and not read them yet. A catalog query
    lists when its job starts, its tasks read after; a path's DataFrame lists at once, which
    puts the commit between the two here without timing."""
    return lake.spark.read.parquet(lake.table_dir(TABLE))


def test_read_through_commits_reads_the_new_unit(lake: Lake, monkeypatch) -> None:
    said: list[str] = []
    monkeypatch.setattr("jobs.lake.rereading.log", said.append)
    runs = iter(["r1"])
    calls = []

    def read() -> list[str]:
        calls.append(1)
        df = planned(lake)
        if (run := next(runs, None)) is not None:  # another job commits meanwhile, once
            commit(lake, run, ["三", "四"])
        return texts(df)

    assert read_through_commits(lake, read) == ["三", "四"]
    assert len(calls) == 2
    assert said == ["a commit replaced files this read had listed: reading again (1 of 2 "
                    "retries)"]


def test_a_commit_during_every_try_fails_after_the_last(lake: Lake) -> None:
    runs = iter([f"r{k}" for k in range(1, TRIES + 1)])
    calls = []

    def read() -> list[str]:
        calls.append(1)
        df = planned(lake)
        commit(lake, next(runs), ["五"])
        return texts(df)

    with pytest.raises(Exception, match="FILE_NOT_EXIST"):
        read_through_commits(lake, read)
    assert len(calls) == TRIES


def test_other_errors_are_raised_at_once(lake: Lake, tmp_path: Path) -> None:
    calls = []
    outside = tmp_path / "outside"
    lake.spark.createDataFrame([("x",)], "text string").write.parquet(str(outside))

    def read() -> list[str]:  # a file gone that is no table's: not a commit's doing
        calls.append(1)
        df = lake.spark.read.parquet(str(outside))
        for part in outside.glob("*.parquet"):
            part.unlink()
        return texts(df)

    with pytest.raises(Exception, match="FILE_NOT_EXIST"):
        read_through_commits(lake, read)
    assert len(calls) == 1


"""The lake's commit protocol: a run killed before or during its commit never leaves partial
data visible, and the next job rolls an interrupted commit forward (jobs/lake.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.lake import Flip, Lake

TABLE = "commit_probe"


class Killed(BaseException):
    """Stands in for SIGKILL: not an Exception, so nothing on the way catches it."""


@pytest.fixture()
def lake(spark, lake_root: Path, request: pytest.FixtureRequest) -> Lake:
    database = f"commit_{request.node.name.removeprefix('test_')[:40]}"
    lake = Lake(spark, str(lake_root / database), database)
    schema = spark.createDataFrame([("x", "a")], "text string, part string").schema
    lake.ensure_table(TABLE, schema, ["part"])
    return lake


def write_run(lake: Lake, run_id: str, rows: dict[str, list[str]]) -> list[Flip]:
    """Stage a run's data as the filter job does; return the flips that would publish it."""
    flips = []
    for part, texts in rows.items():
        location = f"{lake.run_dir(run_id)}/{TABLE}/part={part}"
        lake.spark.createDataFrame([(t,) for t in texts], "text string").write.mode(
            "overwrite"
        ).parquet(location)
        flips.append(Flip(TABLE, {"part": part}, location))
    return flips


def visible(lake: Lake) -> dict[str, list[str]]:
    lake.spark.catalog.refreshTable(f"{lake.database}.{TABLE}")
    rows = lake.spark.table(lake.qualified(TABLE)).collect()
    out: dict[str, list[str]] = {}
    for r in rows:
        out.setdefault(r.part, []).append(r.text)
    return {k: sorted(v) for k, v in out.items()}


def journals(lake: Lake) -> list[str]:
    return [path.rsplit("/", 1)[-1] for path in lake.list_dir(f"{lake.root}/journal")]


def test_a_run_killed_before_commit_is_invisible(lake: Lake) -> None:
    lake.commit("r1", write_run(lake, "r1", {"a": ["一", "二"]}))
    write_run(lake, "r2", {"a": ["三"], "b": ["四"]})  # staged, then the job died
    assert visible(lake) == {"a": ["一", "二"]}
    assert lake.recover() == []


def test_a_commit_killed_midway_is_rolled_forward(lake: Lake, monkeypatch) -> None:
    lake.commit("r1", write_run(lake, "r1", {"a": ["一", "二"]}))
    old_dir = lake.partition_location(TABLE, {"part": "a"})
    flips = write_run(lake, "r2", {"a": ["三"], "b": ["四", "五"]})
    apply_all = lake._apply

    def killed_after_first_flip(flips: list[Flip]) -> None:
        apply_all(flips[:1])
        raise Killed

    monkeypatch.setattr(lake, "_apply", killed_after_first_flip)
    with pytest.raises(Killed):
        lake.commit("r2", flips)
    # Half-committed: partition a shows r2, b is not there yet; the journal says what is left.
    assert visible(lake) == {"a": ["三"]}
    assert journals(lake) == ["r2.json"]

    next_job = Lake(lake.spark, lake.root, lake.database)  # what the next run does first
    assert next_job.recover() == ["r2"]
    assert visible(next_job) == {"a": ["三"], "b": sorted(["四", "五"])}
    assert next_job.exists(flips[0].location)  # the re-applied flip kept its own data
    assert journals(next_job) == []
    assert not next_job.exists(old_dir)  # r1's superseded data was removed


def test_recommitting_the_same_run_is_harmless(lake: Lake) -> None:
    flips = write_run(lake, "r1", {"a": ["一"]})
    lake.commit("r1", flips)
    lake.commit("r1", flips)  # a roll-forward of an already applied journal does this
    assert visible(lake) == {"a": ["一"]}

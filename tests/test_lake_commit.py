"""The lake's commit protocol (jobs/lake/store.py): a run killed before or at any step of its commit
never shows readers a mix of old and new rows — through the catalog or through pyarrow on the
table's directory — and the next job rolls an interrupted commit forward."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from jobs.kit.config import check_run_id
from jobs.kit.errors import ConfigError
from jobs.lake.lock import run_lease
from jobs.lake.store import MARKER, Flip, Lake, gc

TABLE = "commit_probe"
OUTCOMES = [{"outcome": "clean"}, {"outcome": "rejected"}]
OLD = {"a": {"clean": ["一", "二"], "rejected": ["x"]}}
NEW = {"a": {"clean": ["三"], "rejected": ["y", "z"]},
       "b:2024#1": {"clean": ["四"], "rejected": []}}


class Killed(BaseException):
    """Stands in for SIGKILL: not an Exception, so nothing on the way catches it."""


@pytest.fixture()
def lake(spark, lake_root: Path, request: pytest.FixtureRequest) -> Lake:
    database = f"commit_{request.node.name.removeprefix('test_')[:30]}".replace("[", "_")
    database = "".join(c if c.isalnum() or c == "_" else "_" for c in database)
    lake = Lake(spark, str(lake_root / database), database)
    schema = spark.createDataFrame([("x", "a", "clean")], "text string, part string, "
                                   "outcome string").schema
    lake.ensure_table(TABLE, schema, ["part", "outcome"])
    return lake


def write_run(lake: Lake, run_id: str, rows: dict[str, dict[str, list[str]]]) -> list[Flip]:
    """Stage a run as the filter job does (Spark's partitionBy, so its escaping); return the
    flips that publish it: one unit per part, holding both outcomes."""
    data = [(t, part, outcome) for part, by in rows.items() for outcome, texts in by.items()
            for t in texts]
    staged = f"{lake.run_dir(run_id)}/{TABLE}"
    df = lake.spark.createDataFrame(data, "text string, part string, outcome string")
    df.write.mode("overwrite").partitionBy("part", "outcome").parquet(staged)
    flips = []
    for part in rows:
        unit = f"{staged}/{lake.partition_path({'part': part})}"
        for inner in OUTCOMES:
            lake.mkdirs(f"{unit}/{lake.partition_path(inner)}")
        flips.append(Flip(TABLE, {"part": part}, unit, OUTCOMES))
    return flips


def as_rows(pairs) -> dict[str, dict[str, list[str]]]:
    out: dict[str, dict[str, list[str]]] = {}
    for text, part, outcome in pairs:
        out.setdefault(part, {"clean": [], "rejected": []})[outcome].append(text)
    return {p: {o: sorted(t) for o, t in by.items()} for p, by in out.items()}


def via_catalog(lake: Lake) -> dict:
    lake.spark.catalog.refreshTable(f"{lake.database}.{TABLE}")
    rows = lake.spark.table(lake.qualified(TABLE)).collect()
    return as_rows((r.text, r.part, r.outcome) for r in rows)


def via_pyarrow(lake: Lake) -> dict:
    table = ds.dataset(lake.table_dir(TABLE).removeprefix("file://"), format="parquet",
                       partitioning="hive").to_table()
    return as_rows(zip(*(table.column(c).to_pylist() for c in ("text", "part", "outcome")),
                       strict=True))


def normal(rows: dict) -> dict:
    return {p: {o: sorted(t) for o, t in by.items()} for p, by in rows.items()
            if any(by.values())}


def test_a_run_killed_before_commit_is_invisible(lake: Lake) -> None:
    lake.commit("r1", write_run(lake, "r1", OLD))
    write_run(lake, "r2", NEW)  # staged, then the job died
    assert via_catalog(lake) == via_pyarrow(lake) == normal(OLD)
    assert lake.recover() == []


def commit_steps(lake: Lake) -> list[str]:
    """The named steps of committing NEW over OLD, found by a dry run in a scratch lake."""
    steps: list[str] = []
    lake._hook = steps.append  # type: ignore[method-assign]
    lake.commit("r1", write_run(lake, "r1", OLD))
    steps.clear()
    lake.commit("r2", write_run(lake, "r2", NEW))
    return steps


def staged_copy(template: Lake, lake: Lake, run_id: str, rows: dict) -> list[Flip]:
    """The run `template` staged (write_run), copied into `lake`: the same files, as Spark
    wrote them, without a Spark write for every step below."""
    shutil.copytree(template.run_dir(run_id).removeprefix("file://"),
                    lake.run_dir(run_id).removeprefix("file://"))
    staged = f"{lake.run_dir(run_id)}/{TABLE}"
    return [Flip(TABLE, {"part": part}, f"{staged}/{lake.partition_path({'part': part})}",
                 OUTCOMES) for part in rows]


def test_every_step_of_the_commit_is_all_old_or_all_new(spark, lake_root: Path) -> None:
    probe = Lake(spark, str(lake_root / "steps_probe"), "steps_probe")
    schema = spark.createDataFrame([("x", "a", "clean")], "text string, part string, "
                                   "outcome string").schema
    probe.ensure_table(TABLE, schema, ["part", "outcome"])
    steps = commit_steps(probe)
    assert len(steps) >= 6, steps  # journal, per unit: register and publish, journal deleted
    template = Lake(spark, str(lake_root / "steps_template"), "steps_template")
    for run_id, rows in (("r1", OLD), ("r2", NEW)):
        write_run(template, run_id, rows)  # staged, never committed: copied for each step
    new = normal(NEW)
    for k, step in enumerate(steps):
        database = f"steps_{k}"
        lake = Lake(spark, str(lake_root / database), database)
        lake.ensure_table(TABLE, schema, ["part", "outcome"])
        lake.commit("r1", staged_copy(template, lake, "r1", OLD))
        flips = staged_copy(template, lake, "r2", NEW)
        calls = iter(range(len(steps)))

        def kill_at(name: str, k=k, calls=calls) -> None:
            if next(calls) == k:
                raise Killed(name)

        lake._hook = kill_at  # type: ignore[method-assign]
        with pytest.raises(Killed):
            lake.commit("r2", flips)
        # A fresh reader before recovery: each unit (part) all old or all new, never a mix.
        for seen in (via_catalog(lake), via_pyarrow(lake)):
            for part in ("a", "b:2024#1"):
                olds, news = normal(OLD).get(part), new.get(part)
                assert seen.get(part) in (olds, news), f"killed at {step}: {part} = {seen}"
        next_job = Lake(spark, lake.root, database)
        next_job.recover()
        assert via_catalog(next_job) == via_pyarrow(next_job) == new, f"killed at {step}"
        assert next_job.list_dir(f"{next_job.root}/journal") == []
        assert not next_job.exists(f"{next_job.root}/trash")


def test_recommitting_the_same_run_is_harmless(lake: Lake) -> None:
    flips = write_run(lake, "r1", OLD)
    lake.commit("r1", flips)
    lake.commit("r1", flips)  # a roll-forward of an already applied journal does this
    assert via_catalog(lake) == normal(OLD)


def test_escaped_partition_values_are_published(lake: Lake) -> None:
    lake.commit("r1", write_run(lake, "r1", NEW))
    assert via_catalog(lake) == via_pyarrow(lake) == normal(NEW)
    published = Path(lake.table_dir(TABLE).removeprefix("file://"))
    assert (published / "part=b%3A2024%231" / MARKER).read_text() == "r1"


def test_a_torn_journal_is_quarantined(lake: Lake) -> None:
    lake.commit("r1", write_run(lake, "r1", OLD))
    for torn in ("", '[{"table": "commit_pro'):
        lake.write_text(f"{lake.root}/journal/r9.json", torn)
        next_job = Lake(lake.spark, lake.root, lake.database)
        assert next_job.recover() == [] and next_job.torn == ["r9"]
        assert len(next_job.list_dir(f"{lake.root}/journal-quarantine")) == (2 if torn else 1)
        assert via_catalog(next_job) == normal(OLD)


def test_gc_keeps_what_tables_point_at(lake: Lake) -> None:
    lake.commit("r1", write_run(lake, "r1", OLD))
    write_run(lake, "r2", NEW)  # a dead run's staged data
    removed = gc(lake)
    assert any(p.endswith("/runs/r2") for p in removed)
    assert via_catalog(lake) == via_pyarrow(lake) == normal(OLD)


def test_gc_keeps_the_staged_data_of_a_run_that_holds_its_lease(lake: Lake) -> None:
    # The filter job stages rows before its `running` row is in (it registers beside): a
    # second job's gc must not take them for a dead run's.
    write_run(lake, "r5", NEW)
    with run_lease(lake.root, "r5"):
        assert not any(p.endswith("/runs/r5") for p in gc(lake))
    assert any(p.endswith("/runs/r5") for p in gc(lake))  # lease gone, no row: dead


def test_a_commit_applies_a_dead_writers_journal_before_its_own(lake: Lake) -> None:
    """Two jobs on one lake: r2 dies mid-commit while r3, opened before that, waits for the
    lock. r3 commits later, so its rows must be what readers see, not r2's rolled forward
    over them by whichever job starts next."""
    lake.commit("r1", write_run(lake, "r1", OLD))
    later = {"a": {"clean": ["五"], "rejected": []}}
    r3 = write_run(lake, "r3", later)
    flips = write_run(lake, "r2", NEW)

    def kill(step: str) -> None:
        if step.startswith("published"):
            raise Killed(step)

    lake._hook = kill  # type: ignore[method-assign]
    with pytest.raises(Killed):
        lake.commit("r2", flips)
    del lake._hook
    lake.commit("r3", r3)  # the journal of r2 is there: r2 is applied first, then r3
    assert lake.in_flight() == []
    next_job = Lake(lake.spark, lake.root, lake.database)
    assert next_job.recover() == []
    assert via_catalog(next_job) == via_pyarrow(next_job) == normal(
        {**NEW, "a": later["a"]})


def test_gc_keeps_what_a_pending_journal_needs(lake: Lake) -> None:
    """A commit killed after its journal (here `r2-running`, as `RunRecord.mark` names its
    commits) is in flight until rolled forward: gc must keep the run's staged units."""
    lake.commit("r1", write_run(lake, "r1", OLD))
    flips = write_run(lake, "r2", NEW)

    def kill(step: str) -> None:
        raise Killed(step)

    lake._hook = kill  # type: ignore[method-assign]
    with pytest.raises(Killed):
        lake.commit("r2-running", flips)
    del lake._hook
    assert not any(p.endswith("/runs/r2") for p in gc(lake))
    assert lake.recover() == ["r2-running"]
    assert via_catalog(lake) == via_pyarrow(lake) == normal(NEW)
    assert lake.in_flight() == []


@pytest.mark.parametrize("bad", ["../../x", "a/b", "", ".hidden", "a..b", "x" * 200])
def test_run_ids_name_one_directory(bad: str) -> None:
    with pytest.raises(ConfigError, match="run id"):
        check_run_id(bad)


def test_a_view_is_written_when_missing_or_changed_and_not_again(
        lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every run asks for its views; only a missing one, or one whose query changed (a column
    the table gained), is written, and then it shows the new columns and rows."""
    real_sql, written = lake.spark.sql, []

    def sql(statement: str, *args, **kwargs):
        if statement.startswith("CREATE OR REPLACE VIEW"):
            written.append(statement)
        return real_sql(statement, *args, **kwargs)

    monkeypatch.setattr(lake.spark, "sql", sql)
    view = lake.qualified("clean_view")
    lake.ensure_view("clean_view", TABLE, ["text", "part"], "outcome = 'clean'")
    lake.ensure_view("clean_view", TABLE, ["text", "part"], "outcome = 'clean'")
    assert len(written) == 1
    schema = lake.spark.createDataFrame([("x", 1.0, "a", "clean")], "text string, score double, "
                                        "part string, outcome string").schema
    lake.ensure_table(TABLE, schema, ["part", "outcome"])  # a newer job's column
    lake.ensure_view("clean_view", TABLE, ["text", "score", "part"], "outcome = 'clean'")
    assert len(written) == 2 and lake.spark.table(view).columns == ["text", "score", "part"]
    lake.commit("v-1", write_run(lake, "v-1", as_rows([("kept", "a", "clean"),
                                                        ("cut", "a", "rejected")])))
    lake.ensure_view("clean_view", TABLE, ["text", "score", "part"], "outcome = 'rejected'")
    assert len(written) == 3
    assert [r.text for r in lake.spark.table(view).collect()] == ["cut"]

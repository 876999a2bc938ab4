"""What readers see while a run commits (jobs/lake/store.py `Lake.commit`, jobs/lake/runs.py
`run_and_commit`), issue 22. A run's units are published one by one, so killed mid-commit a
reader may see some of them new and others old. What holds, at every step of the commit,
through the catalog and through pyarrow on `<root>/tables/` alike:
- each unit is all old or all new (for `bitext`-like tables: both outcomes together);
- the run's stats (a table keyed by `run_id` alone) appear only once all its data is in place;
- its `runs` row says `succeeded` only once everything is, and never `failed` once anything is;
- whenever the lake is part old, part new, the run's journal `<root>/journal/<run>.json` is
  there and lists the units in question;
and the next job rolls the commit forward to the whole new state.

The kills are in-process: `Lake._hook` raises at the k-th step a run passes (found by a dry
run, so a new step is covered without touching this file). What a reader sees is read inside
the hook, at that instant, and again once the kill has unwound the job: the two must be the
same, as they are for a SIGKILL (tests/test_lake_readers.py kills a real spark-submit)."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import jobs.lake.store
from jobs.kit.config import JobConfig, LakeConf, SparkConf
from jobs.lake.runs import run_and_commit
from jobs.lake.store import MARKER, Flip, Lake

pytestmark = pytest.mark.integration  # whole jobs, real processes: not in the fast tier

CORPORA = ["wmt#21"]  # escaped in paths: wmt%2321
RAW, BITEXT, STATS = "vis_raw", "vis_bitext", "vis_stats"
OUTCOMES = [{"outcome": "clean"}, {"outcome": "rejected"}]
DATA = [f"{t}/{c}" for c in CORPORA for t in (RAW, BITEXT)]  # the units keyed by corpus
View = dict[str, frozenset[str]]  # unit -> its rows, as strings


class Killed(BaseException):
    """Stands in for SIGKILL: not an Exception, so nothing on the way handles it as one."""


def units(run: str | None) -> View:
    """What each unit holds once `run` is published (None: before any run)."""
    if run is None:
        return {}
    out: View = {f"runs/{run}": frozenset({"succeeded"}),
                 f"{STATS}/{run}": frozenset(f"{c} 2" for c in CORPORA)}
    for c in CORPORA:
        out[f"{RAW}/{c}"] = frozenset({f"{run}/{c}/0 {run}", f"{run}/{c}/1 {run}"})
        out[f"{BITEXT}/{c}"] = frozenset({f"{run}/{c}/0 clean {run}",
                                          f"{run}/{c}/1 rejected {run}"})
    return out


SCHEMAS = {RAW: ("text string, run_id string, pair string, corpus string", ["pair", "corpus"]),
           BITEXT: ("text string, run_id string, pair string, corpus string, outcome string",
                    ["pair", "corpus", "outcome"]),
           STATS: ("corpus string, rows int, run_id string", ["run_id"])}


def make_tables(lake: Lake) -> None:
    for table, (ddl, keys) in SCHEMAS.items():
        lake.ensure_table(table, lake.spark.createDataFrame([], ddl).schema, keys)


def write(directory: str, **columns: list) -> None:
    """One Parquet file of `columns` into a staged directory (pyarrow: a Spark write per
    unit would make this test several times slower, and the layout is all the commit sees)."""
    path = Path(directory.removeprefix("file://"))
    path.mkdir(parents=True, exist_ok=True)
    types = {"rows": pa.int32()}
    pq.write_table(pa.table({k: pa.array(v, types.get(k, pa.string()))
                             for k, v in columns.items()}), path / "part-0.parquet")


def stage(lake: Lake, run: str) -> list[Flip]:
    """Stage `run` as the filter job lays it out, and return its flips in the filter job's
    order (stats first, then per corpus raw and bitext)."""
    base, own = lake.run_dir(run), {"run_id": run}
    flips = [Flip(STATS, own, f"{base}/{STATS}/{lake.partition_path(own)}")]
    write(flips[0].location, corpus=CORPORA, rows=[2] * len(CORPORA))
    for c in CORPORA:
        part = {"pair": "zh-en", "corpus": c}
        where = lake.partition_path(part)
        flips.append(Flip(RAW, part, f"{base}/{RAW}/{where}"))
        write(flips[-1].location, text=[f"{run}/{c}/0", f"{run}/{c}/1"], run_id=[run, run])
        flips.append(Flip(BITEXT, part, f"{base}/{BITEXT}/{where}", OUTCOMES))
        for j, outcome in enumerate(o["outcome"] for o in OUTCOMES):
            write(f"{flips[-1].location}/outcome={outcome}", text=[f"{run}/{c}/{j}"],
                  run_id=[run])
    return flips


def run_job(lake: Lake, run: str) -> None:
    cfg = JobConfig(lake=LakeConf(root=lake.root, database=lake.database),
                    spark=SparkConf(conf={}))
    run_and_commit(lake.spark, lake, cfg, "probe", run, [], lambda: stage(lake, run), "SELECT 1")


def via_catalog(lake: Lake) -> View:
    for table in (RAW, BITEXT, STATS, "runs"):
        lake.spark.catalog.refreshTable(f"{lake.database}.{table}")
    q = lake.qualified
    rows = lake.spark.sql(
        f"SELECT concat('{RAW}/', corpus), concat_ws(' ', text, run_id) FROM {q(RAW)} "
        f"UNION ALL SELECT concat('{BITEXT}/', corpus), concat_ws(' ', text, outcome, run_id) "
        f"FROM {q(BITEXT)} UNION ALL SELECT concat('{STATS}/', run_id), "
        f"concat_ws(' ', corpus, CAST(rows AS STRING)) FROM {q(STATS)} "
        f"UNION ALL SELECT concat('runs/', run_id), status FROM {q('runs')}").collect()
    return as_view((unit, row) for unit, row in rows)


def via_pyarrow(root: Path) -> View:
    def read(table: str, key: str, *cols: str) -> list[tuple[str, str]]:
        data = ds.dataset(root / "tables" / table, format="parquet", partitioning="hive")
        t = data.to_table()
        if t.num_rows == 0:
            return []
        columns = [t.column(c).to_pylist() for c in (key, *cols)]
        return [(f"{table}/{r[0]}", " ".join(map(str, r[1:]))) for r in zip(*columns, strict=True)]

    return as_view([*read(RAW, "corpus", "text", "run_id"),
                    *read(BITEXT, "corpus", "text", "outcome", "run_id"),
                    *read(STATS, "run_id", "corpus", "rows"),
                    *read("runs", "run_id", "status")])


def as_view(pairs) -> View:
    out: dict[str, set[str]] = {}
    for unit, row in pairs:
        out.setdefault(unit, set()).add(row)
    return {unit: frozenset(rows) for unit, rows in out.items()}


def journal_units(root: Path, run: str) -> set[str] | None:
    """The units the run's journal lists (what a plain reader finds), None without one."""
    path = root / "journal" / f"{run}.json"
    if not path.exists():
        return None
    flips = json.loads(path.read_text())
    return {f"{f['table']}/{f['partition'].get('corpus', f['partition'].get('run_id'))}"
            for f in flips}


def check_view(view: View, root: Path, prev: str | None, run: str, at: str,
               gap: bool = False) -> None:
    """What a reader may see while `run` commits over `prev`'s state (`gap`: a unit may
    also read empty, as on HDFS)."""
    old, new = units(prev), units(run)
    empty: frozenset[str] = frozenset()
    for unit in DATA:
        allowed = (old.get(unit, empty), new[unit], *([empty] if gap else []))
        assert view.get(unit, empty) in allowed, f"{at}: {unit} mixes runs: {view.get(unit)}"
        # A plain reader can tell which run a unit is from: its marker file.
        seen = view.get(unit)
        table, corpus = unit.split("/")
        marker = root / "tables" / table / "pair=zh-en" / f"corpus={corpus.replace('#', '%23')}"
        if seen and seen == new[unit]:
            assert (marker / MARKER).read_text() == run, at
    data_new = all(view.get(u) == new[u] for u in DATA)
    stats = view.get(f"{STATS}/{run}")
    assert stats in (None, new[f"{STATS}/{run}"]), f"{at}: stats {stats}"
    assert not stats or data_new, f"{at}: the run's stats are visible before its data"
    status = view.get(f"runs/{run}")
    assert status in (None, {"running"}, {"succeeded"}), f"{at}: runs row {status}"
    if status == {"succeeded"}:
        assert data_new and stats, f"{at}: the run says succeeded before all of it is visible"
    if prev:
        assert view[f"runs/{prev}"] == {"succeeded"}, at
    changed = {u for u in [*DATA, f"{STATS}/{run}"] if view.get(u) != old.get(u)}
    if changed and status != {"succeeded"}:  # part new, not yet settled: the journal says so
        listed = journal_units(root, run)
        assert listed is not None and changed <= listed, f"{at}: {changed} vs journal {listed}"


def record_steps(lake: Lake, run: str) -> list[tuple[str, str]]:
    """(commit id, step) for every hook a whole run passes, in order."""
    steps: list[tuple[str, str]] = []
    current = [""]
    commit = lake.commit

    def tracked(commit_id: str, flips: list[Flip]) -> None:
        current[0] = commit_id
        commit(commit_id, flips)

    lake.commit = tracked  # type: ignore[method-assign]
    lake._hook = lambda step: steps.append((current[0], step))  # type: ignore[method-assign]
    try:
        run_job(lake, run)
    finally:
        del lake.commit, lake._hook
    return steps


def kill_at(lake: Lake, root: Path, k: int) -> dict[str, View]:
    """From now on `lake` raises Killed at the k-th hook it passes, having first read what
    readers see at that instant into the returned dict (`catalog`, `pyarrow`)."""
    calls, seen = iter(range(10**6)), {}

    def hook(step: str) -> None:
        if next(calls) == k:
            seen.update(catalog=via_catalog(lake), pyarrow=via_pyarrow(root))
            raise Killed(step)

    lake._hook = hook  # type: ignore[method-assign]
    return seen


def new_lake(spark, lake_root: Path, name: str) -> tuple[Lake, Path]:
    """A job's view of the lake `name` (its tables made by the first)."""
    root = lake_root / name
    return Lake(spark, str(root), name), root


def kill_each(spark, root: Path, steps: list[tuple[str, str]], ks: list[int], dry_run: str,
              prev: str, gap: bool = False) -> None:
    """Kill a new run at each step k of `ks` (`steps`: what `record_steps` found for the run
    `dry_run` over the same state); check what readers see then, and after the next job."""
    for k in ks:
        commit_id, step = steps[k]
        run, at = f"k{k}", f"killed at {commit_id} {step!r} (#{k})"
        lake = Lake(spark, str(root), root.name)  # a fresh job
        seen = kill_at(lake, root, k)
        with pytest.raises(Killed, match=step):
            run_job(lake, run)
        assert seen["catalog"] == seen["pyarrow"], at
        check_view(seen["pyarrow"], root, prev, run, at, gap)
        # The killed job unwound without changing what readers see (as a SIGKILL would not).
        assert via_pyarrow(root) == seen["pyarrow"], f"{at}: changed by the dying job"
        next_job = Lake(spark, str(root), root.name)
        next_job.recover()
        after = via_catalog(next_job)
        assert after == via_pyarrow(root), at
        assert not list((root / "journal").glob("*.json")) and not (root / "trash").exists(), at
        if commit_id == dry_run:  # its own commit (not `running`'s) began: rolled forward
            assert {u: after.get(u) for u in units(run)} == units(run), at
            prev = run
        else:  # killed while recording `running`: none of its data; it stays `running`
            assert after.get(f"runs/{run}") in (None, {"running"}), at
            assert all(after[u] == units(prev)[u] for u in DATA), at


def test_every_step_of_a_run_commit_is_visible_only_as_documented(spark, lake_root) -> None:
    lake, root = new_lake(spark, lake_root, "visibility")
    make_tables(lake)
    run_job(lake, "v0")
    steps = record_steps(lake, "v1")
    names = [s for _, s in steps]
    assert "journal written" in names and f"published {RAW}" in names, steps
    assert len(steps) == 4 + 2 + 2 * 4, steps  # `running`'s row; journal, 4 units x 2
    kill_each(spark, root, steps, list(range(len(steps))), "v1", "v1")


def test_a_commit_failing_midway_is_rolled_forward_not_marked_failed(spark, lake_root) -> None:
    """An error (not a kill) after some units are published: the run may not say `failed`
    with its data visible; the next job completes it."""
    lake, root = new_lake(spark, lake_root, "vis_error")
    make_tables(lake)
    run_job(lake, "e0")

    def fail(step: str) -> None:
        if step == f"published {RAW}":
            raise OSError("the file system went away")

    lake._hook = fail  # type: ignore[method-assign]
    with pytest.raises(OSError):
        run_job(lake, "e1")
    view = via_pyarrow(root)
    assert view["runs/e1"] == {"running"}
    check_view(view, root, "e0", "e1", "failed at the first unit")
    Lake(spark, str(root), "vis_error").recover()
    assert {u: via_pyarrow(root).get(u) for u in units("e1")} == units("e1")


def test_a_failure_after_the_commit_leaves_the_run_succeeded(spark, lake_root) -> None:
    lake, root = new_lake(spark, lake_root, "vis_after")
    make_tables(lake)
    deleted = itertools.count()

    def fail(step: str) -> None:
        if step == "journal deleted" and next(deleted) == 1:  # the run's commit, not `running`
            raise OSError("could not empty the trash")

    lake._hook = fail  # type: ignore[method-assign]
    with pytest.raises(OSError):
        run_job(lake, "s0")
    assert via_catalog(lake) == via_pyarrow(root) == units("s0")


def test_on_hdfs_a_unit_reads_empty_for_a_moment_but_never_mixed(spark, lake_root,
                                                               monkeypatch) -> None:
    """Without renameat2 (HDFS) the old directory moves away before the new one moves in:
    killed there, the unit reads empty until the next job; the steps only this path has."""
    lake, root = new_lake(spark, lake_root, "vis_hdfs")
    make_tables(lake)
    run_job(lake, "h0")
    local = [s for _, s in record_steps(lake, "h1")]
    monkeypatch.setattr(jobs.lake.store, "exchange", lambda a, b: False)
    steps = record_steps(lake, "h2")
    only_here = [k for k, (_, s) in enumerate(steps) if s not in local]
    assert len(only_here) == 5, steps  # per unit (registering made its directory): 1 + 4
    kill_each(spark, root, steps, only_here, "h2", "h2", gap=True)


def test_a_run_that_waits_for_the_commit_lock_finishes_after_it(spark, lake_root) -> None:
    """`finished_at` orders the commits: a run whose commit waits for another job's records a
    finish after that job lets go of the lock, so the latest finished run is the one whose
    rows readers see (the `succeeded` record is stamped under the lock)."""
    from test_lake_locks import COMMITTING, start

    lake, root = new_lake(spark, lake_root, "vis_order")
    make_tables(lake)
    holder: list = []

    def stage_then_lose_the_lock() -> list[Flip]:
        flips = stage(lake, "w1")
        holder.append(start(COMMITTING, str(root), "other", "3"))  # holds it for 3 s
        holder.append(datetime.now(UTC).replace(tzinfo=None))
        return flips

    cfg = JobConfig(lake=LakeConf(root=lake.root, database=lake.database),
                    spark=SparkConf(conf={}))
    try:
        run_and_commit(spark, lake, cfg, "probe", "w1", [], stage_then_lose_the_lock,
                       "SELECT 1")
    finally:
        if holder:
            holder[0].wait(timeout=60)
    (run,) = ds.dataset(root / "tables" / "runs", partitioning="hive").to_table(
        filter=ds.field("run_id") == "w1").to_pylist()
    assert run["status"] == "succeeded"
    assert run["finished_at"] >= holder[1] + timedelta(seconds=3), (run, holder[1])

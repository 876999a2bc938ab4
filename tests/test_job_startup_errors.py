"""Issue 22: mistakes a job can see before Spark starts are one line and exit 2 at once (not a
failure after the work, or a new lake where a path was mistyped), and two jobs on one local
lake with the embedded metastore are one commit and one line with exit 75 (busy: try later),
not a crash of ~18,000 lines.

Every command is the real one (spark-submit, `python -m jobs.lake.store`). Those refused before
Spark starts are told apart by what they leave: no `metastore_db/` (Spark's catalog makes it
as it starts), no lake directory."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from subprocess import CompletedProcess

import pyarrow.dataset as ds
import pytest
from integration_helpers import BIN, REPO, spark_env, spark_submit

from jobs.lake.lock import BUSY_EXIT

pytestmark = pytest.mark.integration  # whole jobs, real processes: not in the fast tier

BAD_RUN_ID = "../escape"
NOISE = ("Traceback", "Exception", "\tat ", "Lost task")


def ours(done: CompletedProcess, code: int, prefix: str = "sluice: error: ") -> str:
    """The command's only line of ours, after asserting its exit code and that no Python or
    Java trace was printed (spark-submit passes the driver's stderr on to stdout)."""
    said = done.stdout + done.stderr
    assert done.returncode == code, said[-3000:]
    lines = [line for line in said.splitlines() if line.startswith("sluice: ")]
    assert len(lines) == 1 and lines[0].startswith(prefix), said[-3000:]
    for noise in NOISE:
        assert noise not in said, said[-3000:]
    return lines[0]


def empty_lake(path: Path) -> Path:
    """A directory that passes for a lake (a `tables/` directory) but has no catalog yet: a
    report or gc that started Spark on it would leave a `metastore_db/` there."""
    (path / "tables").mkdir(parents=True)
    return path


def timed_submit(*args: str, job: str) -> tuple[CompletedProcess, float]:
    started = time.monotonic()
    done = spark_submit(*args, job=job)
    return done, time.monotonic() - started


# -- 1. report --out not writable ---------------------------------------------------------


@pytest.mark.parametrize("where", ["no-such-dir/r.html", "."])
def test_report_refuses_an_unwritable_out_before_spark(tmp_path: Path, where: str) -> None:
    """Was a failure at the very end, after ~41 s of work."""
    lake = empty_lake(tmp_path / "lake")
    out = tmp_path / where
    done, took = timed_submit("--lake", str(lake), "--out", str(out), job="report")
    line = ours(done, 2)
    assert f"--out {out}" in line and ("no directory" in line or "is a directory" in line)
    assert not (lake / "metastore_db").exists(), f"Spark started ({took:.0f} s)"


# -- 3. read-only/maintenance tools on a mistyped lake ------------------------------------


def test_report_refuses_a_directory_that_holds_no_lake(tmp_path: Path) -> None:
    """Was a new, empty catalog there and an error about runs after Spark started."""
    mistyped = tmp_path / "lak"
    mistyped.mkdir()
    done, took = timed_submit("--lake", str(mistyped), "--out", str(tmp_path / "r.html"),
                              job="report")
    assert f"no lake at {mistyped}: the directory holds none of" in ours(done, 2)
    assert list(mistyped.iterdir()) == [], f"Spark started ({took:.0f} s)"


@pytest.fixture(scope="module")
def gc_mistyped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CompletedProcess]:
    mistyped = tmp_path_factory.mktemp("gc") / "no-such-lake"
    done = subprocess.run(
        [sys.executable, "-m", "jobs.lake_gc", "--lake", str(mistyped)], cwd=REPO,
        env=spark_env(), capture_output=True, text=True, timeout=300)
    return mistyped, done


def test_gc_refuses_a_lake_that_is_not_there(gc_mistyped) -> None:
    """Was a new lake (metastore_db/, derby.log) at the mistyped path and exit 0."""
    mistyped, done = gc_mistyped
    assert done.returncode != 0, done.stderr[-3000:]
    assert f"no lake at {mistyped}: no such directory" in done.stderr, done.stderr[-3000:]
    assert not mistyped.exists()


def test_gc_refusal_is_one_line_and_exit_2(gc_mistyped) -> None:
    _, done = gc_mistyped
    ours(done, 2)


# -- 4. --run-id checked before Spark -----------------------------------------------------


@pytest.mark.parametrize("job", ["filter", "redecide", "select", "translate", "report"])
def test_a_bad_run_id_fails_before_spark(tmp_path: Path, job: str) -> None:
    """Was checked after Spark started (~20 s), and after the lake was made."""
    lake = tmp_path / "lake"
    data = tmp_path / "p.tsv"
    data.write_text("你好。\tHello.\n", encoding="utf-8")
    args = {
        "filter": ["--pair", "zh-en", "--corpus", "c", "--input", str(data)],
        "redecide": ["--redecide", "some-run"],
        "select": ["--pair", "zh-en", "--top", "10", "--seed", str(data)],
        "translate": ["--model", str(tmp_path / "model"), "--direction", "zh-en"],
    }.get(job)
    if args is None:  # the report reads an existing lake: its run id is --run-id
        empty_lake(lake)
        args = ["--run-id", BAD_RUN_ID, "--out", str(tmp_path / "r.html")]
    else:
        args += ["--run-id", BAD_RUN_ID]
    done, took = timed_submit(*args, "--lake", str(lake), job="report" if job == "report"
                              else "filter" if job == "redecide"
                              else "select_data" if job == "select" else job)
    assert f"run id {BAD_RUN_ID!r}: use up to 128 letters" in ours(done, 2)
    assert not (lake / "metastore_db").exists(), f"Spark started ({took:.0f} s)"


# -- 2. two jobs at once on one local lake (embedded metastore) ---------------------------


def test_two_jobs_at_once_one_commits_the_other_exits_75(tmp_path: Path, data_dir: Path) -> None:
    """Both passed the Derby probe (no metastore yet) and one died after ~40 s with ~17,881
    lines. Now the first to take <lake>/locks/metastore.lock runs; the other is refused
    before its Spark starts, naming the holder."""
    lake = tmp_path / "lake"
    paths = []
    for side in ("zh", "en"):
        lines = (data_dir / f"tatoeba-zh-en.{side}").read_text(encoding="utf-8").splitlines()
        path = tmp_path / f"t.{side}"
        path.write_text("\n".join(lines[:100]) + "\n", encoding="utf-8")
        paths.append(str(path))
    jobs = {}
    for run_id in ("race-a", "race-b"):
        cmd = [str(BIN / "spark-submit"), "--master", "local[1]", str(REPO / "jobs/filter.py"),
               "--pair", "zh-en", "--corpus", "t", "--input", *paths, "--lake", str(lake),
               "--run-id", run_id]
        jobs[run_id] = subprocess.Popen(cmd, cwd=REPO, env=spark_env(), stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
    done = {}
    for run_id, process in jobs.items():
        out, err = process.communicate(timeout=600)
        done[run_id] = CompletedProcess(process.args, process.returncode, out, err)
    codes = {run_id: d.returncode for run_id, d in done.items()}
    assert sorted(codes.values()) == [0, BUSY_EXIT], {r: d.stderr[-2000:] for r, d in done.items()}
    winner = next(r for r, code in codes.items() if code == 0)
    loser = next(r for r, code in codes.items() if code == BUSY_EXIT)
    line = ours(done[loser], BUSY_EXIT, prefix="sluice: the lake's embedded metastore is in use")
    assert f"by run {winner} (sluice-filter, pid " in line and ", since " in line, line
    assert f"lock {lake}/locks/metastore.lock" in line, line
    assert "opening the lake" not in done[loser].stdout  # refused before its Spark started

    # The lake holds the winner's run, whole, and nothing of the loser's.
    runs = ds.dataset(lake / "tables" / "runs", partitioning="hive").to_table().to_pylist()
    assert [(r["run_id"], r["status"]) for r in runs] == [(winner, "succeeded")], runs
    bitext = ds.dataset(lake / "tables" / "bitext", partitioning="hive").to_table()
    assert bitext.num_rows == 100 and set(bitext.column("run_id").to_pylist()) == {winner}
    assert not (lake / "runs" / loser).exists()
    assert not list(lake.glob("journal/*.json"))  # no commit left half done

"""`sluice query` (jobs/lake/plain_query.py): duckdb over a lake's tables/ directory, shaped as
the jobs write it (hive partitions, a table created but not yet written to), with the schema
name the printed Spark SQL uses. The end-to-end check against spark-sql on a real run is
tests/test_filter_job.py::test_printed_duckdb_query_answers_what_spark_sql_does."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.kit.launcher import command as launcher_command
from jobs.lake import plain_query

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    stats = tmp_path / "tables" / "filter_stats"
    for run, corpus, rows in (("r-1", "news", [5, 3]), ("r-2", "web", [7])):
        part = stats / f"run_id={run}" / f"corpus={corpus}"
        part.mkdir(parents=True)
        pq.write_table(pa.table({"rule": [f"rule{i}" for i in range(len(rows))],
                                 "rows_rejected": rows}), part / "part-0.parquet")
    (tmp_path / "tables" / "selected").mkdir()  # created, never written to
    (tmp_path / "tables" / "filter_stats" / "_sluice_run").write_text("r-2")  # a hidden marker
    return tmp_path


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jobs.lake.plain_query", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_a_view_per_written_table_with_partitions_as_text(lake: Path) -> None:
    con = plain_query.connect(lake)
    views = {name for (name,) in con.sql("SELECT view_name FROM duckdb_views() "
                                         "WHERE schema_name = 'sluice'").fetchall()}
    assert views == {"filter_stats"}
    rows = con.sql("SELECT run_id, corpus, sum(rows_rejected) FROM sluice.filter_stats "
                   "GROUP BY ALL ORDER BY 1").fetchall()
    assert rows == [("r-1", "news", 8), ("r-2", "web", 7)]
    assert con.sql("SELECT typeof(run_id) FROM sluice.filter_stats LIMIT 1").fetchone() == (
        "VARCHAR",)


def test_the_printed_command_runs_as_printed(lake: Path) -> None:
    query = ("SELECT corpus, sum(rows_rejected) AS r FROM sluice.filter_stats "
             "WHERE run_id = 'r-1' GROUP BY 1")
    words = shlex.split(plain_query.command(str(lake), query))
    assert words[:2] == ["sluice", "query"] and words[-1] == query
    done = run(*words[2:])
    assert done.returncode == 0, done.stderr
    assert "news" in done.stdout and "8" in done.stdout and "web" not in done.stdout
    assert plain_query.command("s3a://bucket/lake", query) is None  # spark-sql reads those


def test_another_database_name(lake: Path) -> None:
    done = run("--lake", str(lake), "--database", "mt", "SELECT count(*) AS n FROM mt.filter_stats")
    assert done.returncode == 0, done.stderr
    assert "3" in done.stdout


@pytest.mark.parametrize(("args", "said"), [
    (("SELECT nope FROM sluice.filter_stats",), 'column "nope" not found'),
    (("SELECT * FROM sluice.selected",), "selected"),  # no rows yet: no view, a clear error
])
def test_a_bad_query_is_one_line_and_exit_2(lake: Path, args: tuple[str, ...], said: str) -> None:
    done = run("--lake", str(lake), *args)
    assert done.returncode == 2 and said in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("sluice query:")


@pytest.mark.parametrize(("lake_arg", "said"), [
    ("s3a://bucket/lake", "not a local directory"),
    ("/nonexistent/lake", "is not a lake"),
])
def test_not_a_local_lake_is_one_line_and_exit_2(lake_arg: str, said: str) -> None:
    done = run("--lake", lake_arg, "SELECT 1")
    assert done.returncode == 2 and said in done.stderr


def test_the_launcher_runs_it_on_this_interpreter_without_spark() -> None:
    cmd, _ = launcher_command(["query", "--lake", "L", "SELECT 1"])
    assert cmd == [sys.executable, "-m", "jobs.lake.plain_query", "--lake", "L", "SELECT 1"]

"""The tests' warm Spark driver (tests/warm_spark.py) gives what spark-submit gives: the same
rows in the lake, the same exit code and one-line error, and each lake its own catalog, also
when one JVM ran jobs on other lakes before."""

from __future__ import annotations

from pathlib import Path

import pyarrow.dataset as ds
import pytest
from integration_helpers import query_lake, spark_submit, submit_script

pytestmark = pytest.mark.integration  # whole jobs

DATA = Path(__file__).resolve().parent / "data"
KEPT = ["corpus", "line", "outcome", "reject_rule", "dup_of", "src", "tgt"]


def rows(lake: Path) -> list[tuple]:
    table = ds.dataset(lake / "tables" / "bitext", partitioning="hive").to_table(columns=KEPT)
    return sorted(tuple(r[c] for c in KEPT) for r in table.to_pylist())


def test_the_warm_driver_commits_what_spark_submit_commits(tmp_path: Path) -> None:
    zh, en = tmp_path / "t.zh", tmp_path / "t.en"
    zh.write_text("".join((DATA / "tatoeba-zh-en.zh").read_text("utf-8").splitlines(True)[:300]),
                  encoding="utf-8")
    en.write_text("".join((DATA / "tatoeba-zh-en.en").read_text("utf-8").splitlines(True)[:300]),
                  encoding="utf-8")
    args = ("--pair", "zh-en", "--corpus", "tatoeba", "--input", str(zh), str(en))
    lakes = {kind: tmp_path / kind for kind in ("cold", "warm", "warm-again")}
    cold = spark_submit(*args, "--lake", str(lakes["cold"]), cold=True)
    warm = spark_submit(*args, "--lake", str(lakes["warm"]))
    again = spark_submit(*args, "--lake", str(lakes["warm-again"]))  # a JVM that ran a job
    for done in (cold, warm, again):
        assert done.returncode == 0, done.stderr[-3000:]
        assert "tatoeba: 300 in" in done.stdout
    assert rows(lakes["cold"]) == rows(lakes["warm"]) == rows(lakes["warm-again"])
    assert len(rows(lakes["cold"])) == 300
    # Each lake's own catalog, read after jobs on the others: 300 rows each, no other lake's.
    for lake in (lakes["warm"], lakes["cold"], lakes["warm-again"]):
        answer = query_lake(lake, {"n": "SELECT count(*), count(DISTINCT run_id) FROM "
                                        "sluice.bitext", "dbs": "SHOW DATABASES"})
        assert answer == {"n": [[300, 1]], "dbs": [["default"], ["sluice"]]}, lake


def test_a_bad_input_is_the_same_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "no-such.tsv"
    args = ("--pair", "zh-en", "--corpus", "c", "--input", str(missing),
            "--lake", str(tmp_path / "lake"))
    cold, warm = spark_submit(*args, cold=True), spark_submit(*args)
    assert cold.returncode == warm.returncode == 2
    # spark-submit passes the driver's stderr on to its stdout: the same line there.
    def said(output: str) -> list[str]:
        return [line for line in output.splitlines() if line.startswith("sluice:")]

    assert said(warm.stdout) == said(cold.stdout) and not said(warm.stderr)
    assert len(said(warm.stdout)) == 1 and f"{missing}: no such file" in warm.stdout
    assert "Traceback" not in warm.stdout + warm.stderr


PROBE_JOB = """import os
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
seen = spark.sparkContext.parallelize(range(4), 2).map(
    lambda _: os.environ.get("SLUICE_PROBE", "unset")).collect()
print("workers:", ",".join(sorted(set(seen))))
spark.stop()
"""


def test_a_jobs_pyspark_python_reaches_its_workers_and_only_its_own(tmp_path: Path) -> None:
    """`env` is set for one job: its Python workers run the PYSPARK_PYTHON it names (as
    test_redecide.py's no-scoring Python), the next job's the tests' own again."""
    import sys

    wrapper = tmp_path / "python-probe"
    wrapper.write_text(f'#!/bin/sh\nexport SLUICE_PROBE=wrapped\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    job = tmp_path / "probe.py"
    job.write_text(PROBE_JOB)
    wrapped = submit_script(job, env={"PYSPARK_PYTHON": str(wrapper)})
    plain = submit_script(job)
    assert wrapped.returncode == plain.returncode == 0, wrapped.stderr[-2000:]
    assert "workers: wrapped" in wrapped.stdout
    assert "workers: unset" in plain.stdout

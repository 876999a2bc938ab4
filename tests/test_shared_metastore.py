"""One lake, many users at once (issue 24): a Hive metastore service on PostgreSQL started by
scripts/metastore.sh (loopback only, stopped even on failure), two filter jobs committing at
once while a second catalog client queries filter_stats in a loop, a writer killed mid-commit
and rolled forward by the next job, and the one-line errors of a metastore that is not there.
Real processes: spark-submit, the metastore's JVM, PostgreSQL."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from integration_helpers import JIT_OPTS

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
TATOEBA = [str(DATA / "tatoeba-zh-en.zh"), str(DATA / "tatoeba-zh-en.en")]
SUBMIT = str(REPO / ".venv/bin/spark-submit")

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def metastore(tmp_path_factory: pytest.TempPathFactory):
    """The service in a temporary directory on free loopback ports; stopped however the
    tests end."""
    # PostgreSQL runs as the postgres user when we are root: its directory must be reachable
    # by it, and pytest's own temporary directories are private to us.
    work = Path(tempfile.mkdtemp(prefix="sluice-metastore-"))
    work.chmod(0o755)
    env = {**os.environ, "SLUICE_PG_PORT": str(free_port()),
           "SLUICE_METASTORE_PORT": str(free_port())}
    script = [str(REPO / "scripts/metastore.sh")]
    try:
        started = subprocess.run([*script, "start", str(work / "ms")], cwd=REPO, env=env,
                                 capture_output=True, text=True, timeout=180)
        assert started.returncode == 0, started.stderr
        uri = f"thrift://127.0.0.1:{env['SLUICE_METASTORE_PORT']}"
        assert uri in started.stdout
        status = subprocess.run([*script, "status", str(work / "ms")], cwd=REPO, env=env,
                                capture_output=True, text=True)
        assert status.returncode == 0 and uri in status.stdout
        yield {"uri": uri, "work": work}
    finally:
        subprocess.run([*script, "stop", str(work / "ms")], cwd=REPO, env=env, timeout=120)
        gone = subprocess.run([*script, "status", str(work / "ms")], cwd=REPO, env=env)
        shutil.rmtree(work, ignore_errors=True)
    assert gone.returncode == 3


def job_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_SUBMIT_OPTS": JIT_OPTS,
            **extra}


def filter_job(lake: Path, corpus: str, uri: str, run_id: str = "", **env: str
               ) -> subprocess.Popen:
    return subprocess.Popen(
        [SUBMIT, "--master", "local[1]", str(REPO / "jobs/filter.py"), "--pair", "zh-en",
         "--corpus", corpus, "--input", *TATOEBA, "--lake", str(lake), "--run-id",
         run_id or f"run-{corpus}", "--set", f"lake.metastore={uri}"],
        cwd=REPO, env=job_env(**env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)


# A second catalog client (as an analyst's spark-sql shell): counts filter_stats rows every
# moment until told to stop, and says how many queries it ran and any error it met.
READER = """
import os, sys, time
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").enableHiveSupport()
         .config("spark.hadoop.hive.metastore.uris", sys.argv[1])
         .config("spark.sql.warehouse.dir", "file://" + sys.argv[2] + "/warehouse")
         .config("spark.ui.enabled", "false").getOrCreate())
queries, seen = 0, set()
print("reading", flush=True)
while not os.path.exists(sys.argv[3]):
    try:
        if spark.catalog.tableExists("sluice.filter_stats"):
            spark.catalog.refreshTable("sluice.filter_stats")
            rows = spark.sql("SELECT DISTINCT run_id FROM sluice.filter_stats").collect()
            seen |= {r.run_id for r in rows}
        queries += 1
    except Exception as err:
        print("error", type(err).__name__, str(err)[:300], flush=True)
    time.sleep(0.5)
print("queries", queries, "runs", sorted(seen), flush=True)
"""


def test_two_jobs_commit_at_once_while_a_reader_queries(metastore, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    stop = tmp_path / "stop-reading"
    reader = subprocess.Popen([sys.executable, "-c", READER, metastore["uri"], str(lake),
                               str(stop)], cwd=REPO, env=job_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        assert reader.stdout.readline().strip() == "reading"
        jobs = {c: filter_job(lake, c, metastore["uri"]) for c in ("a", "b")}
        outputs = {c: p.communicate(timeout=400)[0] for c, p in jobs.items()}
        for corpus, proc in jobs.items():
            assert proc.returncode == 0, outputs[corpus][-3000:]
            assert f"committed run run-{corpus}" in outputs[corpus]
        time.sleep(2)  # a query or more after both commits
    finally:
        stop.touch()
        said = reader.communicate(timeout=120)[0]
    assert "error" not in said, said
    last = said.strip().splitlines()[-1]
    assert last.startswith("queries ") and int(last.split()[1]) >= 5, said
    assert "'run-a'" in last and "'run-b'" in last  # the reader saw both runs land
    # The lake holds both runs whole, as one after the other would: the same input, the same
    # decisions in each corpus, read without Spark from the fixed table paths.
    import pyarrow.dataset as ds

    rows = ds.dataset(lake / "tables/bitext", partitioning="hive").to_table(
        columns=["corpus", "line", "reject_rule"]).to_pylist()
    by_corpus = {c: sorted((r["line"], r["reject_rule"] or "") for r in rows
                           if r["corpus"] == c) for c in ("a", "b")}
    assert len(by_corpus["a"]) == 1500 and by_corpus["a"] == by_corpus["b"]
    runs = ds.dataset(lake / "tables/runs", partitioning="hive").to_table().to_pylist()
    assert {r["run_id"]: r["status"] for r in runs} == {"run-a": "succeeded",
                                                       "run-b": "succeeded"}


def test_a_writer_killed_mid_commit_is_rolled_forward_by_the_next(metastore,
                                                                  tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    killed = filter_job(lake, "k", metastore["uri"], SLUICE_KILL_AT="published bitext")
    out = killed.communicate(timeout=400)[0]
    assert killed.returncode in (-9, 137), out[-2000:]  # SIGKILL (through spark-submit: 137)
    assert (lake / "journal/run-k.json").exists()  # its commit was cut short
    nxt = filter_job(lake, "n", metastore["uri"])
    out = nxt.communicate(timeout=400)[0]
    assert nxt.returncode == 0, out[-3000:]
    assert "rolled forward the interrupted commit of run run-k" in out
    import pyarrow.dataset as ds

    runs = ds.dataset(lake / "tables/runs", partitioning="hive").to_table().to_pylist()
    assert {r["run_id"]: r["status"] for r in runs} == {"run-k": "succeeded",
                                                       "run-n": "succeeded"}
    rows = ds.dataset(lake / "tables/bitext", partitioning="hive").to_table(
        columns=["corpus"]).to_pylist()
    assert sum(r["corpus"] == "k" for r in rows) == 1500


def test_two_jobs_on_the_same_partition_apply_one_after_the_other(metastore,
                                                                  tmp_path: Path) -> None:
    """The later commit's rows are what readers see, whole; both runs' stats stay."""
    import pyarrow.dataset as ds

    lake = tmp_path / "lake"
    jobs = {r: filter_job(lake, "same", metastore["uri"], run_id=r) for r in ("s1", "s2")}
    for proc in jobs.values():
        out = proc.communicate(timeout=400)[0]
        assert proc.returncode == 0, out[-3000:]
    runs = ds.dataset(lake / "tables/runs", partitioning="hive").to_table().to_pylist()
    later = max(runs, key=lambda r: r["finished_at"])["run_id"]
    rows = ds.dataset(lake / "tables/bitext", partitioning="hive").to_table(
        columns=["run_id"]).to_pylist()
    assert len(rows) == 1500 and {r["run_id"] for r in rows} == {later}
    stats = ds.dataset(lake / "tables/filter_stats", partitioning="hive").to_table(
        columns=["run_id"]).to_pylist()
    assert {r["run_id"] for r in stats} == {"s1", "s2"}


@pytest.mark.parametrize("uri", ["thrift://127.0.0.1:{port}",
                                 "jdbc:postgresql://127.0.0.1:{port}/sluice"])
def test_a_metastore_that_is_not_there_is_one_line_within_seconds(tmp_path: Path,
                                                                  uri: str) -> None:
    uri = uri.format(port=free_port())  # nothing listens there
    started = time.monotonic()
    job = filter_job(tmp_path / "lake", "x", uri)
    out = job.communicate(timeout=120)[0]
    lines = [line for line in out.splitlines() if line.startswith("sluice:")]
    assert job.returncode == 75, out[-2000:]  # nothing done: try again later
    assert lines == [f"sluice: the lake's metastore {uri.removeprefix('jdbc:')} does not "
                     "answer (Connection refused): nothing was done; start it "
                     "(scripts/metastore.sh start) or check lake.metastore"]
    assert time.monotonic() - started < 30  # Hive alone retries for minutes

"""One lake, many users at once (issue 24): a Hive metastore service on PostgreSQL started by
scripts/metastore.sh (loopback only, stopped even on failure), two filter jobs committing at
once while a second catalog client queries filter_stats in a loop, a writer killed mid-commit
and rolled forward by the next job, and the one-line errors of a metastore that is not there.
Real processes: spark-submit, the metastore's JVM, PostgreSQL. A job that runs alone (a set-up
run, the one-after-another references, the job after a failure) runs in the test worker's warm
driver, which opens the shared metastore as a spark-submit does."""

from __future__ import annotations

import gzip
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from integration_helpers import BIN, JIT_OPTS, alongside, spark_submit, submit_script
from standalone_cluster import standalone_cluster

from jobs.lake.session import spark_sql_command

pytestmark = pytest.mark.integration  # whole jobs, real processes: not in the fast tier

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
    # The service's JVM compiles with C1 only, as every JVM of the tests (conftest.py).
    env = {**os.environ, "SLUICE_PG_PORT": str(free_port()),
           "SLUICE_METASTORE_PORT": str(free_port()), "JAVA_TOOL_OPTIONS": JIT_OPTS}
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
        yield {"uri": uri, "work": work, "env": env, "pg_port": env["SLUICE_PG_PORT"]}
    finally:
        subprocess.run([*script, "stop", str(work / "ms")], cwd=REPO, env=env, timeout=120)
        gone = subprocess.run([*script, "status", str(work / "ms")], cwd=REPO, env=env)
        shutil.rmtree(work, ignore_errors=True)
    assert gone.returncode == 3


def job_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_SUBMIT_OPTS": JIT_OPTS,
            **extra}


def filter_job(lake: Path, corpus: str, uri: str, run_id: str = "",
               spark: tuple[str, ...] = ("--master", "local[1]"), **env: str
               ) -> subprocess.Popen:
    return subprocess.Popen(
        [SUBMIT, *spark, str(REPO / "jobs/filter.py"), "--pair", "zh-en",
         "--corpus", corpus, "--input", *TATOEBA, "--lake", str(lake), "--run-id",
         run_id or f"run-{corpus}", "--set", f"lake.metastore={uri}"],
        cwd=REPO, env=job_env(**env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)


def warm_filter(lake: Path, corpus: str, uri: str, run_id: str = "",
                *args: str) -> subprocess.CompletedProcess:
    """The filter job of `filter_job` in this test worker's warm driver (tests/warm_spark.py),
    for a job that runs alone: a cold JVM costs ~25 CPU-s more, and the metastore service,
    not the driver's JVM, is what these tests are about."""
    return spark_submit("--pair", "zh-en", "--corpus", corpus, *(args or ("--input", *TATOEBA)),
                        "--lake", str(lake), "--run-id", run_id or f"run-{corpus}", "--set",
                        f"lake.metastore={uri}")


class SqlShell:
    """An analyst's `spark-sql` shell, opened with the command the jobs print, typed into one
    query at a time: the runs `filter_stats` holds, again and again until stopped. Keeps what
    it saw and every error it printed."""

    # Named columns: `sluice sql` prints a header line, which must not read as an answer.
    QUERY = ("SELECT 'runs' AS what, concat_ws(',', sort_array(collect_set(run_id))) AS ids "
             "FROM sluice.filter_stats;\n")
    # What an error looks like in its output: an error class ([FILE_NOT_FOUND] ...), a Java
    # exception, or a log line at ERROR.
    ERROR = re.compile(r"^\[[A-Z_.]+\]|Error in query|Exception|^\d\d/\d\d/\d\d \S+ ERROR ")

    def __init__(self, lake: Path, uri: str) -> None:
        words = shlex.split(spark_sql_command(str(lake), metastore=uri))
        self.proc = subprocess.Popen([str(BIN / words[0]), *words[1:]], cwd=REPO,
                                     env=job_env(), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, bufsize=1)
        self.answers: list[set[str]] = []
        self.errors: list[str] = []
        self.typed: list[float] = []  # when each query was typed, in order
        self.stop = threading.Event()
        self.answered = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        self.typist = threading.Thread(target=self._type, daemon=True)
        self.typist.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith("runs\t"):
                self.answers.append(set(filter(None, line.strip().split("\t")[1].split(","))))
                self.answered.set()
            elif self.ERROR.search(line):
                self.errors.append(line.rstrip())
                self.answered.set()  # an error answers too

    def _type(self) -> None:
        while not self.stop.is_set() and self.proc.poll() is None:
            self.answered.clear()
            self.typed.append(time.monotonic())
            self.proc.stdin.write(self.QUERY)
            self.proc.stdin.flush()
            self.answered.wait(timeout=120)
            time.sleep(0.5)

    def answer_typed_after(self, moment: float, timeout: float = 300) -> set[str]:
        """The answer to the first query typed after `moment`: a fixed sleep after the last
        commit is not enough on a loaded machine, where one query can take longer."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            after = [i for i, t in enumerate(self.typed) if t > moment]
            if after and len(self.answers) > after[0]:
                return self.answers[after[0]]
            time.sleep(0.5)
        raise AssertionError(f"no answer to a query typed after the jobs ended: {self.errors}")

    def close(self) -> None:
        self.stop.set()
        self.typist.join(timeout=150)
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


class ParquetReader:
    """A plain Parquet reader (pyarrow, no catalog) counting a table's rows per corpus in a
    loop until stopped; keeps each count and every error."""

    def __init__(self, table: Path) -> None:
        self.table, self.seen, self.errors = table, [], []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        import pyarrow.dataset as ds

        while not self.stop.is_set():
            try:
                if self.table.exists():
                    rows = ds.dataset(self.table, partitioning="hive").to_table(
                        columns=["corpus"]).column("corpus").to_pylist()
                    self.seen.append(Counter(rows))
            except Exception as err:  # a file gone between listing and reading, say
                self.errors.append(f"{type(err).__name__}: {err}")
            time.sleep(0.3)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=60)


def refresh_config(root: Path, lake: Path, uri: str, corpus: str, sources: Path) -> Path:
    path = root / f"refresh-{lake.name}.yaml"
    path.write_text(f"extends: {REPO}/conf/zh-en.yaml\n"
                    f"lake: {{root: {lake}, metastore: '{uri}'}}\n"
                    f"sources:\n  - {{corpus: '{corpus}', path: {sources}, format: tsv}}\n",
                    encoding="utf-8")
    return path


def table(lake: Path, name: str, columns: list[str] | None = None) -> list[dict]:
    import pyarrow.dataset as ds

    return ds.dataset(lake / "tables" / name, partitioning="hive").to_table(
        columns=columns).to_pylist()


def decisions(lake: Path, corpus: str) -> list[tuple]:
    return sorted((r["line"], r["src"], r["tgt"], r["reject_rule"] or "") for r in table(
        lake, "bitext", ["corpus", "line", "src", "tgt", "reject_rule"]) if r["corpus"] == corpus)


def test_the_three_uses_at_once_on_a_standalone_cluster(metastore, tmp_path: Path) -> None:
    """Two filter jobs on different corpora, a scheduled refresh and a selection run at once
    on a standalone cluster, a third filter job is killed mid-commit among them, and an
    analyst's spark-sql shell queries filter_stats all along. Every job commits (the killed
    one rolled forward by the next commit), the shell never errs and sees the runs land, and
    the lake holds what the same jobs leave run one after another."""
    uri, lake = metastore["uri"], tmp_path / "lake"
    crawl = tmp_path / "crawl"
    crawl.mkdir()
    # The refresh deduplicates against the pair's rows in the whole lake: its input shares no
    # side with the filter jobs' and the pool's, so its rows do not depend on which of them
    # committed before it read the lake.
    taken = {side for path in [*TATOEBA, DATA / "select/pool-zh-en.tsv"]
             for line in Path(path).read_text(encoding="utf-8").splitlines()
             for side in line.split("\t")[:2]}
    with gzip.open(DATA / "anki-cmn-zh-en.tsv.gz", "rt", encoding="utf-8") as f:
        anki = [pair for pair in ("\t".join(line.rstrip("\n").split("\t")[:2]) for line in f)
                if not taken & set(pair.split("\t"))]
    (crawl / "a.tsv").write_text("\n".join(anki[:500]) + "\n", encoding="utf-8")
    done = warm_filter(lake, "pool", uri, "pool", "--input", str(DATA / "select/pool-zh-en.tsv"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    select = ["--pair", "zh-en", "--corpus", "pool", "--seed",
              str(DATA / "select/seed-medical.zh"), str(DATA / "select/seed-medical.en"),
              "--method", "moore_lewis", "--top", "100", "--lake", str(lake),
              "--set", f"lake.metastore={uri}"]

    def refresh_args(tag: str, at: tuple[Path, str]) -> list[str]:
        return ["--config", str(refresh_config(tmp_path, *at, "crawl:web", crawl)),
                "--run-id", f"refresh{tag}"]

    def jobs_on(master: str, extra: tuple[str, ...]) -> dict[str, subprocess.Popen]:
        spark = ("--master", master, *extra)

        def submit(script: str, *args: str) -> subprocess.Popen:
            return subprocess.Popen([SUBMIT, *spark, str(REPO / f"jobs/{script}.py"), *args],
                                    cwd=REPO, env=job_env(), stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
        started = {c: filter_job(lake, c, uri, spark=spark) for c in ("a", "b")}
        started["k"] = filter_job(lake, "k", uri, spark=spark, SLUICE_KILL_AT="published bitext")
        started["refresh"] = submit("refresh", *refresh_args("", (lake, uri)))
        started["sel"] = submit("select_data", *select, "--run-id", "sel")
        return started

    def one_after_another() -> dict[str, str]:
        """The same jobs, one at a time in the warm driver (local[2]); the refresh in a lake of
        its own (it would find the first refresh's rows), the others on corpora and runs of
        their own. What each printed."""
        done = {"a-seq": warm_filter(lake, "a-seq", uri),
                "refresh-seq": spark_submit(*refresh_args("-seq", (tmp_path / "seq-lake",
                                                                   "embedded")), job="refresh"),
                "sel-seq": spark_submit(*select, "--run-id", "sel-seq", job="select_data")}
        for name, proc in done.items():
            assert proc.returncode == 0, f"{name}: {proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        return {name: proc.stdout + proc.stderr for name, proc in done.items()}

    def report_while_they_commit(started: dict[str, subprocess.Popen]
                                 ) -> subprocess.CompletedProcess:
        """The pool run's report, made (in the warm driver, its own process) once the first
        of the jobs at once has committed, while the others still run and commit."""
        deadline = time.monotonic() + 600
        while (time.monotonic() < deadline and not any(c in seen for seen in parquet.seen[-1:]
                                                       for c in ("a", "b", "k"))
               and any(p.poll() is None for p in started.values())):
            time.sleep(1)
        return submit_script(REPO / "jobs/report.py", "--lake", str(lake), "--run-id", "pool",
                             "--out", str(tmp_path / "report.html"),
                             conf={"spark.hadoop.hive.metastore.uris": uri})

    shell, parquet = SqlShell(lake, uri), ParquetReader(lake / "tables" / "bitext")
    try:
        with standalone_cluster(tmp_path / "cluster", job_env(), cores=3,
                                memory="3g") as cluster:
            at_once = jobs_on(cluster.url, (
                "--conf", "spark.executor.cores=1", "--conf", "spark.cores.max=1",
                "--executor-memory", "1g", "--conf", "spark.sql.shuffle.partitions=4",
                "--conf", f"spark.executor.extraJavaOptions={JIT_OPTS}"))
            report, said = alongside(
                lambda: report_while_they_commit(at_once),
                lambda: {name: p.communicate(timeout=600)[0] for name, p in at_once.items()})
            assert len(cluster.status()["completedapps"]) == len(at_once)
        committed = time.monotonic()
        last_answer = shell.answer_typed_after(committed)
    finally:
        shell.close()
        parquet.close()
    assert report.returncode == 0, report.stdout[-3000:] + report.stderr[-3000:]
    assert "run pool" in (tmp_path / "report.html").read_text(encoding="utf-8")
    # A plain Parquet reader listing the table again and again: each corpus's unit whole or
    # not there yet, never part of it, and no read failed on a file a commit moved.
    assert parquet.errors == [], parquet.errors[:5]
    assert len(parquet.seen) >= 5
    assert all(n == 1500 for seen in parquet.seen for c, n in seen.items() if c in ("a", "b", "k"))
    assert any("a" not in seen for seen in parquet.seen) and "a" in parquet.seen[-1]
    for name, proc in at_once.items():
        if name == "k":  # SIGKILL (137 through spark-submit)
            assert proc.returncode in (-9, 137), said[name][-3000:]
        else:
            assert proc.returncode == 0, said[name][-3000:]
            assert f"committed run {'run-' if name in 'ab' else ''}{name}" in said[name]
    assert shell.errors == [], shell.errors[:20]
    assert len(shell.answers) >= 5
    assert {"run-a", "run-b", "refresh"} <= last_answer
    assert any(len(seen) < len(shell.answers[-1]) for seen in shell.answers)  # it saw runs land
    # The killed writer's commit was rolled forward by the next job to commit or to open the
    # lake: the report too opens it (and settles it), once the first job at once has published.
    rolled = "rolled forward the interrupted commit of run run-k"
    in_turn = one_after_another()
    printed = [*said.values(), report.stdout + report.stderr, *in_turn.values()]
    assert sum(rolled in out for out in printed) == 1
    runs = {r["run_id"]: r["status"] for r in table(lake, "runs")}
    assert set(runs.values()) == {"succeeded"} and len(runs) == 1 + 5 + 2, runs
    # The lake as the same jobs leave it one after another.
    reference = decisions(lake, "a-seq")
    assert len(reference) == 1500
    for corpus in ("a", "b", "k"):
        assert decisions(lake, corpus) == reference, corpus
    seq_lake = tmp_path / "seq-lake"
    assert decisions(lake, "crawl:web") == decisions(seq_lake, "crawl:web")
    assert len(decisions(lake, "crawl:web")) == 500
    stats = {}
    for r in table(lake, "filter_stats"):
        stats.setdefault(r["run_id"], []).append((r["step"], r["rule"], r["rows_in"],
                                                  r["rows_rejected"]))
    for run in ("run-b", "run-k"):
        assert sorted(stats[run]) == sorted(stats["run-a"])
    assert sorted(stats["run-a"]) == sorted(stats["run-a-seq"])
    assert sorted(stats["refresh"]) == sorted(
        (r["step"], r["rule"], r["rows_in"], r["rows_rejected"])
        for r in table(seq_lake, "filter_stats"))
    chosen = {}
    for r in table(lake, "selected", ["run_id", "row_id", "score", "rank", "selected"]):
        chosen.setdefault(r["run_id"], set()).add((r["row_id"], r["score"], r["rank"],
                                                   r["selected"]))
    assert chosen["sel"] == chosen["sel-seq"] and sum(x[3] for x in chosen["sel"]) == 100


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


def test_a_wrong_password_is_one_line_before_spark_starts(metastore, tmp_path: Path) -> None:
    url = f"jdbc:postgresql://127.0.0.1:{metastore['pg_port']}/sluice"
    started = time.monotonic()
    job = filter_job(tmp_path / "lake", "x", url, SLUICE_METASTORE_PASSWORD="not-it")
    out = job.communicate(timeout=120)[0]
    assert job.returncode == 2, out[-2000:]
    assert [line for line in out.splitlines() if line.startswith("sluice:")] == [
        f"sluice: error: the lake's metastore database {url.removeprefix('jdbc:')} refused "
        "the login of 'sluice' (password authentication failed for user \"sluice\"): check "
        "SLUICE_METASTORE_USER and SLUICE_METASTORE_PASSWORD"]
    assert time.monotonic() - started < 20  # Hive alone retries for ~50 s
    assert not (tmp_path / "lake" / "tables").exists()  # nothing was made


def test_postgresql_stopped_mid_run_is_one_line_and_the_next_job_goes_on(metastore,
                                                                       tmp_path: Path) -> None:
    """The metastore's database goes down while a job reads its input: the job ends with one
    line naming the metastore (no traceback), nothing of it is visible; once PostgreSQL is
    back (`scripts/metastore.sh start` restarts what is down) the next job commits and
    records the cut-short run as failed."""
    lake, uri = tmp_path / "lake", metastore["uri"]
    job = filter_job(lake, "cut", uri, run_id="cut")
    for line in job.stdout:
        if "run cut, lake" in line:  # the lake is open, the run registered as running
            break
    pg_bin = sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1]
    stop = [str(pg_bin / "pg_ctl"), "-D", str(metastore["work"] / "ms/pg"), "-m", "fast",
            "-w", "stop"]
    if os.getuid() == 0:
        stop = ["runuser", "-u", "postgres", "--", *stop]
    subprocess.run(stop, check=True, capture_output=True, timeout=60)
    stopped = time.monotonic()
    try:
        out = job.communicate(timeout=300)[0]
        ended = time.monotonic() - stopped
    finally:
        script = [str(REPO / "scripts/metastore.sh")]
        ms = str(metastore["work"] / "ms")
        down = subprocess.run([*script, "status", ms], cwd=REPO, env=metastore["env"],
                              capture_output=True, text=True)
        subprocess.run([*script, "start", ms], cwd=REPO, env=metastore["env"], check=True,
                       capture_output=True, timeout=180)
    assert down.returncode == 3 and "PostgreSQL" in down.stdout, down.stdout
    assert job.returncode == 1, out[-3000:]
    said = [line for line in out.splitlines() if line.startswith("sluice:")]
    assert len(said) == 1 and said[0].startswith(
        f"sluice: the lake's metastore {uri} failed during the job ("), out[-3000:]
    assert "Traceback" not in out
    assert ended < 45, ended  # the service retries its database 3 times, 1 s apart
    nxt = warm_filter(lake, "next", uri, "next")
    assert nxt.returncode == 0, nxt.stdout[-3000:] + nxt.stderr[-3000:]
    runs = {r["run_id"]: r["status"] for r in table(lake, "runs")}
    assert runs == {"cut": "failed", "next": "succeeded"}
    rows = table(lake, "bitext", ["corpus"])
    assert {r["corpus"] for r in rows} == {"next"}


def test_the_images_metastore_role_serves_a_lake(metastore, tmp_path: Path) -> None:
    """docker/entrypoint.sh `metastore` (compose's metastore service), run here on the
    fixture's PostgreSQL: ready only after its warm-up, then a job commits through it."""
    import pyspark

    port = free_port()
    ready = tmp_path / "ready"
    env = job_env(SLUICE_HOME=str(REPO), SPARK_HOME=str(Path(pyspark.__file__).parent),
                  PATH=f"{BIN}:{os.environ['PATH']}", METASTORE_PORT=str(port),
                  METASTORE_DB_URL=f"jdbc:postgresql://127.0.0.1:{metastore['pg_port']}/sluice",
                  METASTORE_DB_PASSWORD_FILE=str(metastore["work"] / "ms/password"),
                  METASTORE_CONF_DIR=str(tmp_path / "conf"), METASTORE_READY_FILE=str(ready))
    role = subprocess.Popen(["bash", str(REPO / "docker/entrypoint.sh"), "metastore"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and role.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert ready.exists(), role.communicate(timeout=5)[0][-3000:] if role.poll() else ""
        assert "ConnectionPassword" not in subprocess.run(
            ["ps", "-eo", "args"], capture_output=True, text=True).stdout  # in hive-site.xml
        job = warm_filter(tmp_path / "lake", "role", f"thrift://127.0.0.1:{port}")
        assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    finally:
        os.killpg(role.pid, signal.SIGTERM)
        role.wait(timeout=60)
    assert {r["status"] for r in table(tmp_path / "lake", "runs")} == {"succeeded"}

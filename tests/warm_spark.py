"""A warm Spark driver for the tests: runs job scripts one after another in one JVM.

A job's spark-submit in the tests is mostly a cold JVM: the 1,500-pair Tatoeba filter job
costs ~26 CPU-s started cold and ~9 in a JVM that ran a job before (classes loaded, code
compiled). integration_helpers.submit_script sends its jobs here (`WarmDriver`), one server
per test worker; what a job prints, its exit code and its lake are what spark-submit gives.

Each job runs as spark-submit runs it: its entry script as __main__ with its argv and working
directory, on a SparkContext made for it (master local[2], conf/spark-defaults.conf, the
request's --conf settings). When it ends its context is stopped and its lake's embedded Derby
metastore shut down, so the next job builds a session on its own lake and a spark-sql or a job
in another process can open this one.

Not for what needs a process of its own (kill points, environment variables the JVM reads at
start, two jobs at once, the metastore lock a job holds for its life): those tests start
spark-submit. Environment variables the job's Python reads (PYSPARK_PYTHON) are set for the
job's length. Protocol: a JSON request a line on stdin ({"script", "argv", "cwd", "conf",
"env"}), a JSON answer a line on the stdout this process was started with ({"code",
"stdout", "stderr"}).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import runpy
import shutil
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CONNECTION_URL = "spark.hadoop.javax.jdo.option.ConnectionURL"  # jobs/lake/metastore.py


def capture_output(directory: Path) -> tuple:
    """Point fds 1 and 2 at files: this process's prints and the JVM's (it inherits them) land
    there, and a job's share is what was appended while it ran. The answers go to a copy of
    the original stdout."""
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    files = []
    for fd, name in ((1, "stdout"), (2, "stderr")):
        path = directory / name
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(handle, fd)
        os.close(handle)
        files.append(path)
    return answers, files


def note_metastores(opened: list[str]) -> None:
    """Every context this process stops (the job's own `spark.stop()` too) first notes its
    embedded Derby metastore, to be shut down after the job."""
    from pyspark import SparkContext

    stop = SparkContext.stop

    def noting_stop(context: SparkContext) -> None:
        with contextlib.suppress(Exception):  # a context half made: nothing opened
            opened.append(context.getConf().get(CONNECTION_URL, ""))
        stop(context)

    SparkContext.stop = noting_stop


def stop_spark(opened: list[str]) -> None:
    """Stop the job's context; shut down the Derby metastores it opened, which would otherwise
    stay open in this JVM and lock their lakes' catalogs against every other process."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is not None:
        session = SparkSession.getActiveSession() or SparkSession._instantiatedSession
        (session or SparkContext._active_spark_context).stop()
    derby = SparkContext._gateway.jvm.java.sql.DriverManager
    for url in {u for u in opened if u.startswith("jdbc:derby:")}:
        # Derby answers a clean shut-down with an SQLException.
        with contextlib.suppress(Exception):
            derby.getConnection(url.replace(";create=true", "") + ";shutdown=true")
    opened.clear()


def run_job(script: str, argv: list[str], cwd: str, conf: dict[str, str],
            env: dict[str, str], opened: list[str]) -> int:
    from pyspark import SparkContext

    sys.argv = [script, *argv]
    os.chdir(cwd)
    # spark-submit's --conf: JVM system properties, which the job's SparkConf reads; the
    # values they replace come back after the job.
    properties = SparkContext._gateway.jvm.java.lang.System
    replaced_properties = {key: properties.getProperty(key) for key in conf}
    for key, value in conf.items():
        properties.setProperty(key, value)
    # Environment variables the job's Python reads (PYSPARK_PYTHON, as its context starts).
    replaced_env = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        runpy.run_path(script, run_name="__main__")
        return 0
    except SystemExit as done:
        if done.code is None or isinstance(done.code, int):
            return done.code or 0
        print(done.code, file=sys.stderr)
        return 1
    except BaseException:  # noqa: BLE001 spark-submit's Python: the trace, exit 1
        traceback.print_exc()
        return 1
    finally:
        for key, value in replaced_properties.items():
            if value is None:
                properties.clearProperty(key)
            else:
                properties.setProperty(key, value)
        for key, value in replaced_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        try:
            stop_spark(opened)
        except Exception:  # noqa: BLE001 a job that broke its context: said by its output
            traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()


def in_a_new_thread(job: Callable[[], int]) -> int:
    """Each job on a thread of its own, so on a JVM thread of its own (py4j pins one to each
    Python thread): the Hive client keeps per-thread state (the embedded metastore's RawStore,
    its SessionState) that would point the next job at the previous job's catalog."""
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(job()), name="warm-spark-job")
    thread.start()
    thread.join()
    return result[0] if result else 1


def appended(path: Path, offset: int) -> str:
    with path.open("rb") as f:
        f.seek(offset)
        return f.read().decode("utf-8", "replace")


def serve(directory: Path) -> None:
    from pyspark import SparkContext

    answers, files = capture_output(directory)
    # spark-submit passes its Python driver's stderr on to its stdout; the JVM's own log lines
    # stay on stderr (fd 2, which the JVM inherits).
    sys.stderr = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    sys.path.insert(0, str(REPO))
    # The gateway first: a job's session then finds a JVM running and takes no metastore
    # lock for this process's life (jobs/lake/session.py), which would outlive the job.
    SparkContext._ensure_initialized()
    opened: list[str] = []
    note_metastores(opened)
    home = os.getcwd()
    atexit.register(shutil.rmtree, directory, True)  # its output files: stdin closed, done
    for line in sys.stdin:
        request = json.loads(line)
        start = [path.stat().st_size for path in files]
        code = in_a_new_thread(functools.partial(
            run_job, request["script"], request["argv"], request["cwd"], request["conf"],
            request.get("env", {}), opened))
        os.chdir(home)
        out, err = (appended(path, offset) for path, offset in zip(files, start, strict=True))
        answers.write(json.dumps({"code": code, "stdout": out, "stderr": err}) + "\n")
        answers.flush()


if __name__ == "__main__":
    serve(Path(sys.argv[1]))

"""A real Spark standalone cluster from pyspark's own sbin scripts (the pip package ships
`spark-daemon.sh`, which start-master.sh/start-worker.sh wrap): one master and workers with
one core each, bound to 127.0.0.1, with their own work, log and pid directories; stopped on
exit even when the test fails.

Ports are picked free, but another process (a test worker's Spark driver) can take one before
the daemon binds it. So each daemon gets one try per port (Spark would otherwise move to the
next port silently, and the test would talk to whatever holds the first), the master is known
by its own URL in its status, and a cluster whose daemon died starts again on fresh ports."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyspark
from integration_helpers import JIT_OPTS

SPARK_HOME = Path(pyspark.__file__).parent
SBIN = SPARK_HOME / "sbin"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


@dataclass
class Cluster:
    url: str  # spark://127.0.0.1:port
    master_ui: str
    worker_uis: list[str]
    env: dict[str, str]
    work_dirs: list[Path]
    gpu_script: Path | None = None  # the workers' GPU discovery script, where they offer GPUs

    def status(self) -> dict:
        return get_json(f"{self.master_ui}/json/")

    def worker_executors(self) -> list[list[dict]]:
        """Per worker: its executors, running and finished (each names its app id)."""
        out = []
        for ui in self.worker_uis:
            state = get_json(f"{ui}/json/")
            out.append(state.get("executors", []) + state.get("finishedexecutors", []))
        return out

    def executor_commands(self) -> list[str]:
        """The java command line of every executor the workers launched (each executor's
        stderr in the worker's work dir starts with it)."""
        return [line for work in self.work_dirs for stderr in sorted(work.glob("*/*/stderr"))
                for line in stderr.read_text(errors="replace").splitlines()
                if line.startswith("Spark Executor Command:")]


MASTER, WORKER = "org.apache.spark.deploy.master.Master", "org.apache.spark.deploy.worker.Worker"


def _daemon(env: dict[str, str], action: str, role: str, instance: int, *args: str) -> None:
    subprocess.run(["bash", str(SBIN / "spark-daemon.sh"), action, role, str(instance), *args],
                   env=env, check=action == "start", capture_output=True, text=True, timeout=120)


START_ATTEMPTS = 3


class DaemonDied(RuntimeError):
    """A daemon exited while starting: most likely its port was taken meanwhile."""


def _running(env: dict[str, str], role: str, instance: int) -> bool:
    ident = env["SPARK_IDENT_STRING"]
    pid_file = Path(env["SPARK_PID_DIR"]) / f"spark-{ident}-{role}-{instance}.pid"
    try:
        os.kill(int(pid_file.read_text()), 0)
    except (OSError, ValueError):
        return False
    return True


def _wait(what: str, ready, alive, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except (OSError, ValueError):  # not listening yet, or something else answered
            pass
        if not alive():
            raise DaemonDied(f"standalone cluster: {what} exited while starting")
        time.sleep(0.5)
    raise TimeoutError(f"standalone cluster: {what} not ready after {timeout:.0f} s")


def _is_master(status: dict, url: str) -> bool:
    return status["url"] == url and status["status"] == "ALIVE"


def _start(root: Path, env: dict[str, str], workers: int, cores: int, memory: str) -> Cluster:
    port, ui = free_port(), free_port()
    worker_uis = [free_port() for _ in range(workers)]
    url = f"spark://127.0.0.1:{port}"
    work_dirs = [root / "work" / str(i) for i in range(1, workers + 1)]
    cluster = Cluster(url, f"http://127.0.0.1:{ui}", [f"http://127.0.0.1:{p}" for p in worker_uis],
                      env, work_dirs)
    _daemon(env, "start", MASTER, 1, "--host", "127.0.0.1", "--port", str(port),
            "--webui-port", str(ui))
    _wait("master", lambda: _is_master(cluster.status(), url), lambda: _running(env, MASTER, 1))
    for i, web in enumerate(worker_uis, start=1):
        _daemon(env, "start", WORKER, i, "--host", "127.0.0.1", "--webui-port", str(web),
                "--cores", str(cores), "--memory", memory, "--work-dir", str(work_dirs[i - 1]),
                url)
    _wait(f"{workers} workers", lambda: sum(
        w["state"] == "ALIVE" for w in cluster.status()["workers"]) == workers,
        lambda: all(_running(env, role, i) for role, i in
                    [(MASTER, 1), *((WORKER, i) for i in range(1, workers + 1))]))
    return cluster


def _stop(env: dict[str, str], workers: int) -> None:
    for i in range(1, workers + 1):
        _daemon(env, "stop", WORKER, i)
    _daemon(env, "stop", MASTER, 1)


@contextmanager
def standalone_cluster(root: Path, env: dict[str, str], workers: int = 2, cores: int = 1,
                       memory: str = "2g") -> Iterator[Cluster]:
    """`workers` workers offering `cores` cores (more than the machine's, for several
    applications at once) and `memory` each."""
    env = dict(
        env,
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(root / "logs"),
        SPARK_PID_DIR=str(root / "pids"),
        SPARK_IDENT_STRING="sluice-test",
        # One try per port; and no REST submission server, whose fixed port (6066) a second
        # cluster (the other test worker's) would fail to bind. The master and workers
        # compile with C1 only, as every JVM of the tests (conftest.py).
        SPARK_DAEMON_JAVA_OPTS=f"{env.get('SPARK_DAEMON_JAVA_OPTS', '')} {JIT_OPTS} "
        "-Dspark.port.maxRetries=0 -Dspark.master.rest.enabled=false",
    )
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            cluster = _start(root, env, workers, cores, memory)
            break
        except Exception as failed:
            _stop(env, workers)  # whatever started of it
            if not isinstance(failed, DaemonDied) or attempt == START_ATTEMPTS:
                raise
    try:
        yield cluster
    finally:
        _stop(env, workers)

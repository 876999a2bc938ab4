"""Run the real `spark-submit` and `spark-sql` against a lake, as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from jobs.session import embedded_catalog_conf

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def spark_env() -> dict[str, str]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env.pop("SPARK_HOME", None)
    return env


def spark_submit(*args: str, cwd: Path = REPO, job: str = "filter") -> subprocess.CompletedProcess:
    cmd = [str(BIN / "spark-submit"), "--master", "local[2]", str(REPO / f"jobs/{job}.py"), *args]
    return subprocess.run(
        cmd, cwd=cwd, env=spark_env(), capture_output=True, text=True, timeout=900
    )


def spark_sql(lake: Path, query: str) -> list[list[str]]:
    """Rows of a query run by a fresh `spark-sql` shell on the lake's catalog."""
    conf = [x for k, v in embedded_catalog_conf(str(lake)).items() for x in ("--conf", f"{k}={v}")]
    cmd = [str(BIN / "spark-sql"), "--master", "local[1]", *conf, "-S", "-e", query]
    done = subprocess.run(
        cmd, cwd=lake, env=spark_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [line.split("\t") for line in done.stdout.splitlines() if line.strip()]


def query_lake(lake: Path, queries: dict[str, str]) -> dict[str, list[list]]:
    """Named queries answered by one new Spark session on the lake (see query_lake.py)."""
    script = Path(__file__).with_name("query_lake.py")
    done = subprocess.run(
        [sys.executable, str(script), str(lake), json.dumps(queries)],
        cwd=REPO,
        env=dict(spark_env(), PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("JSON:"))
    return json.loads(line.removeprefix("JSON:"))


def submit_to(master: str, job: str, *args: str, spark_args: tuple[str, ...] = (),
              cwd: Path = REPO, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The real `spark-submit --master MASTER [spark_args] jobs/JOB.py [args]`."""
    cmd = [str(BIN / "spark-submit"), "--master", master, *spark_args,
           str(REPO / f"jobs/{job}.py"), *args]
    return subprocess.run(cmd, cwd=cwd, env=env or spark_env(), capture_output=True, text=True,
                          timeout=900)

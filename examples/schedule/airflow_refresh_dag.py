"""Airflow DAG: the hourly incremental refresh of the zh-en corpora (jobs/refresh.py), the
crontab's command (examples/schedule/crontab) run by Airflow's stock BashOperator.

tests/test_schedule_examples.py runs it with a real Airflow (`airflow dags test`, in a venv of
its own: scripts/install_airflow.sh): the first run commits, a run while another refresh holds
the lake lock is skipped. Copy it into the DAGs folder and set:

- SLUICE_HOME (the environment variable, or edit the default below): a checkout with `make
  setup` done in it, on the Airflow worker. The task runs from there (`cwd`), so the config,
  the sources it lists (incoming/zh-en/...) and the lake root (./lake) resolve against it:
  relative paths in a config are relative to the working directory, as for every job.
- SLUICE_SPARK (optional): spark-submit options before the job, e.g. `--master yarn
  --conf spark.pyspark.python=/opt/sluice/bin/python` (the Python the executors run, where they
  run: nothing of the worker's venv is pushed to the cluster). A cluster needs a lake every node
  reaches (--lake hdfs://... or s3a://... after the config).

`sluice` is the project's launcher (.venv/bin/sluice): spark-submit with the venv's Spark and
Python, so no PATH, SPARK_HOME or PYSPARK_PYTHON needs setting on the worker.

Exit codes of jobs/refresh.py: 0 committed, up to date, or a retry of a run that committed
already (success); 2 bad config or input (fails; its retries fail the same way: read the log);
75 another refresh holds the lake lock: `skip_on_exit_code` marks the task skipped, and the
next hour picks up whatever that run did not. max_active_runs=1 keeps this DAG from
overlapping itself; the job takes the lake lock itself, so no pool or external lock is needed.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pendulum

try:  # Airflow 3 (and 2.10 with the standard provider)
    from airflow.providers.standard.operators.bash import BashOperator
except ImportError:  # Airflow 2 before the standard provider
    from airflow.operators.bash import BashOperator
try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2
    from airflow import DAG

SLUICE_HOME = os.environ.get("SLUICE_HOME", "/srv/sluice")
BUSY_EXIT = 75  # jobs/lake/lock.py: another refresh holds the lake lock

with DAG(
    dag_id="sluice_refresh_zh_en",
    description="Incremental refresh of the zh-en corpora into the sluice lake",
    schedule="@hourly",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,  # a refresh takes in everything new at once: missed hours need no backfill
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=10)},
    tags=["sluice"],
) as dag:
    BashOperator(
        task_id="refresh",
        # the crontab's command; SLUICE_SPARK: spark-submit options (default: local[*])
        bash_command=(".venv/bin/sluice ${SLUICE_SPARK:---master local[*]} refresh "
                      "--config conf/refresh-zh-en.yaml"),
        cwd=SLUICE_HOME,
        skip_on_exit_code=BUSY_EXIT,
        execution_timeout=timedelta(hours=6),
    )

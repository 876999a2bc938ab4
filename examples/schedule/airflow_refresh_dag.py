"""Airflow 2 DAG: the hourly incremental refresh of the zh-en corpora (jobs/refresh.py), the
same command as examples/schedule/crontab, through apache-airflow-providers-apache-spark.

An example only: nothing here runs it (no Airflow in the project's environment); the test
suite parses this file (tests/test_schedule_examples.py) to check that it submits the same
job with the same arguments as the crontab. Copy it into the DAGs folder and set:

- SLUICE_HOME (the environment variable, or edit the default below): a checkout with
  `make setup` done in it, on the Airflow worker: .venv/, models/, conf/, jobs/.
- The `spark_default` connection: its host is the master, `local[*]` to run on the worker
  like the crontab, or spark://host:7077 / yarn / k8s://... (Airflow's stock spark_default
  says yarn). A cluster needs a lake every node reaches (--lake hdfs://... or s3a://...).
- `spark-submit` on the worker's PATH, of the same Spark version as the venv's pyspark (the
  venv's own .venv/bin/spark-submit is the simplest: put .venv/bin on PATH). The driver runs
  the venv's Python (PYSPARK_PYTHON below), which has the project's packages.

Exit codes of jobs/refresh.py: 0 committed or "up to date" (success); 2 bad config or input
(fails, and its retries fail the same way: read the log); 75 another refresh holds the lake
lock. max_active_runs=1 keeps this DAG from overlapping itself, so 75 means something else
(a manual run, a crontab) is refreshing the lake: the task is marked skipped, and the next
hour picks up whatever that run did not. The job takes the lake lock itself: no pool or
external lock is needed. SparkSubmitOperator has no "skip on exit code" parameter, so
RefreshOperator reads the exit code off the hook's spark-submit process (`_submit_sp`, a
private attribute, the same in every provider release so far); where that is missing it
stays an ordinary failure, retried below.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pendulum
from airflow import DAG
from airflow.exceptions import AirflowException, AirflowSkipException
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

SLUICE_HOME = os.environ.get("SLUICE_HOME", "/srv/sluice")
BUSY_EXIT = 75  # jobs/lake/lock.py: another refresh holds the lake lock


class RefreshOperator(SparkSubmitOperator):
    """SparkSubmitOperator run from SLUICE_HOME, with exit 75 (lake busy) a skip.

    The job resolves its config, the sources the config lists (incoming/zh-en/...) and the
    lake root (./lake) against its working directory, which spark-submit's driver inherits
    from the task process: the crontab `cd`s there, this changes directory (each Airflow task
    runs in a process of its own, so nothing else sees it)."""

    def execute(self, context):
        os.chdir(SLUICE_HOME)
        try:
            return super().execute(context)
        except AirflowException:
            submit = getattr(getattr(self, "_hook", None), "_submit_sp", None)
            if getattr(submit, "returncode", None) == BUSY_EXIT:
                raise AirflowSkipException(
                    "another refresh holds the lake lock (exit 75); it did nothing") from None
            raise


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
    RefreshOperator(
        task_id="refresh",
        conn_id="spark_default",
        application=f"{SLUICE_HOME}/jobs/refresh.py",
        application_args=["--config", "conf/refresh-zh-en.yaml"],  # the crontab's
        name="sluice-refresh-zh-en",
        env_vars={
            "PYSPARK_PYTHON": f"{SLUICE_HOME}/.venv/bin/python",
            "PYSPARK_DRIVER_PYTHON": f"{SLUICE_HOME}/.venv/bin/python",
        },
        execution_timeout=timedelta(hours=6),
    )

"""What a running job tells its user: Python `logging` lines, Spark jobs named after the sluice
stage that runs them, and a heartbeat with task counts while a stage runs long.

    [sluice 12:00:01] normalize+rules zh-en/news: started
    [sluice 12:00:31] normalize+rules zh-en/news: 30 s, Spark stage 4: 5/8 tasks
    [sluice 12:00:44] normalize+rules zh-en/news: done in 43 s (1,000,000 rows)
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

LOGGER = logging.getLogger("sluice")
HEARTBEAT_S = 30.0


def setup_logging() -> None:
    """One handler on stdout for the `sluice` logger (idempotent)."""
    if LOGGER.handlers:
        return
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("[sluice %(asctime)s] %(message)s", "%H:%M:%S"))
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False


def log(message: str) -> None:
    setup_logging()
    LOGGER.info(message)


def running_tasks(spark: SparkSession) -> str:
    """The active Spark stages and their finished/total tasks, e.g. 'Spark stage 4: 5/8 tasks'."""
    tracker = spark.sparkContext.statusTracker()
    parts = []
    for stage_id in sorted(tracker.getActiveStageIds()):
        info = tracker.getStageInfo(stage_id)
        if info is not None:
            parts.append(f"Spark stage {stage_id}: {info.numCompletedTasks}/{info.numTasks} tasks")
    return ", ".join(parts) or "between Spark stages"


@contextmanager
def stage(spark: SparkSession, job: str, name: str, heartbeat_s: float = HEARTBEAT_S
          ) -> Iterator[None]:
    """Name the Spark jobs run inside (Spark UI, event log: 'sluice filter: normalize+rules
    zh-en/news'), log the start and the elapsed time, and every `heartbeat_s` log the tasks
    done so far, so a long stage is never silent."""
    sc = spark.sparkContext
    sc.setJobGroup(f"sluice-{job}", f"sluice {job}: {name}")
    started = time.monotonic()
    done = threading.Event()

    def beat() -> None:
        while not done.wait(heartbeat_s):
            log(f"{name}: {time.monotonic() - started:.0f} s, {running_tasks(spark)}")

    log(f"{name}: started")
    thread = threading.Thread(target=beat, name="sluice-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        sc.setJobDescription(None)
    log(f"{name}: done in {time.monotonic() - started:.1f} s")

"""What a running job tells its user: Python `logging` lines, Spark jobs named after the sluice
stage that runs them, and a heartbeat with task counts while a stage runs long.

    [sluice 12:00:01] normalize+rules zh-en/news: started
    [sluice 12:00:31] normalize+rules zh-en/news: 30 s, Spark stage 4: 5/8 tasks, 612,000 rows
                      read, ~18 s left
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


def rows_read(spark: SparkSession) -> dict[int, int]:
    """Rows the active Spark stages have read so far (input plus shuffle reads), by stage id:
    Spark's status store, which the UI reads, counts them as tasks finish. PySpark's status
    tracker has no record counts, hence the JVM call; {} where there is no JVM to ask."""
    try:
        stages = spark.sparkContext._jsc.sc().statusStore().activeStages()
        return {(s := stages.apply(i)).stageId(): s.inputRecords() + s.shuffleReadRecords()
                for i in range(stages.size())}
    except Exception:  # a Spark without the store: the heartbeat still counts tasks
        return {}


def running_tasks(spark: SparkSession, first_seen: dict[int, float] | None = None,
                  now: float | None = None) -> str:
    """The active Spark stages, their finished/total tasks and rows read so far, e.g. 'Spark
    stage 4: 5/8 tasks, 612,000 rows read, ~12 s left'. The estimate is the stage's pace so far
    (from when a heartbeat first saw it, `first_seen`, kept between calls) over the tasks left;
    none before a task has finished."""
    tracker = spark.sparkContext.statusTracker()
    rows = rows_read(spark)
    now = time.monotonic() if now is None else now
    seen = {} if first_seen is None else first_seen
    parts = []
    for stage_id in sorted(tracker.getActiveStageIds()):
        info = tracker.getStageInfo(stage_id)
        if info is None:
            continue
        since = seen.setdefault(stage_id, now)
        done, total = info.numCompletedTasks, info.numTasks
        part = f"Spark stage {stage_id}: {done}/{total} tasks"
        if rows.get(stage_id):
            part += f", {rows[stage_id]:,} rows read"
        if 0 < done < total and now > since:
            part += f", ~{(now - since) / done * (total - done):.0f} s left"
        parts.append(part)
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

    first_seen: dict[int, float] = {}  # Spark stage -> when a heartbeat first saw it

    def beat() -> None:
        while not done.wait(heartbeat_s):
            tasks = running_tasks(spark, first_seen)
            log(f"{name}: {time.monotonic() - started:.0f} s, {tasks}")

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

"""A long stage is never silent: its start, a heartbeat with Spark's task counts, and its end
are logged (jobs/kit/progress.py)."""

from __future__ import annotations

import logging
import re
import time

from pyspark.sql import functions as F
from pyspark.sql.types import LongType

from jobs.kit.progress import LOGGER, running_tasks, setup_logging, stage


def test_a_long_stage_logs_its_tasks_while_it_runs(spark, caplog) -> None:
    slow = F.udf(lambda x: time.sleep(0.001) or x, LongType())
    setup_logging()
    LOGGER.propagate = True  # let caplog see the `sluice` logger
    try:
        with (caplog.at_level(logging.INFO, logger="sluice"),
              stage(spark, "test", "slow zh-en/news", heartbeat_s=0.25)):
            # 4,000 rows through a shuffle, then 4 tasks of ~1 s: beats while rows are read
            spark.range(0, 4000, numPartitions=4).repartition(4).select(slow("id")).collect()
    finally:
        LOGGER.propagate = False
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "slow zh-en/news: started"
    beats = [x for x in lines if "tasks" in x]
    assert beats and all(x.startswith("slow zh-en/news: ") for x in beats), lines
    assert any("/4 tasks" in x for x in beats), beats
    read = [int(n.replace(",", "")) for x in beats for n in re.findall(r"([\d,]+) rows read", x)]
    assert read and all(0 < n <= 4000 for n in read), beats  # Spark's own count, as tasks end
    assert lines[-1].startswith("slow zh-en/news: done in ")
    assert spark.sparkContext.getLocalProperty("spark.job.description") is None
    # Spark's progress bar is for terminals only; tests and logs do not get it.
    assert spark.sparkContext.getConf().get("spark.ui.showConsoleProgress") == "false"


class FakeStage:
    def __init__(self, done: int, total: int) -> None:
        self.numCompletedTasks, self.numTasks = done, total  # noqa: N815 - Spark's names


class FakeTracker:
    def __init__(self, stages: dict[int, FakeStage]) -> None:
        self.stages = stages

    def getActiveStageIds(self) -> list[int]:  # noqa: N802 - Spark's name
        return list(self.stages)

    def getStageInfo(self, stage_id: int) -> FakeStage:  # noqa: N802 - Spark's name
        return self.stages[stage_id]


class FakeSpark:
    def __init__(self, tracker: FakeTracker) -> None:
        self.sparkContext = self
        self.tracker = tracker

    def statusTracker(self) -> FakeTracker:  # noqa: N802 - Spark's name
        return self.tracker


def test_the_heartbeat_estimates_the_time_left_from_the_stages_pace() -> None:
    stages = {4: FakeStage(0, 8)}
    spark = FakeSpark(FakeTracker(stages))
    seen: dict[int, float] = {}
    assert running_tasks(spark, seen, now=100.0) == "Spark stage 4: 0/8 tasks"  # no pace yet
    stages[4] = FakeStage(2, 8)
    # 2 tasks in 10 s: 6 left at 5 s each
    assert running_tasks(spark, seen, now=110.0) == "Spark stage 4: 2/8 tasks, ~30 s left"
    assert running_tasks(FakeSpark(FakeTracker({})), seen) == "between Spark stages"

"""The `runs` table: one row per job run (id, job, resolved config and hash, times, status)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from pyspark.sql import SparkSession

from jobs.lake import Flip, Lake, write_staged

RUNS_SCHEMA = (
    "job string, config string, config_hash string, inputs string, started_at timestamp, "
    "finished_at timestamp, status string, error string, run_id string"
)


def now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def new_run_id(config_hash: str) -> str:
    return f"{now():%Y%m%dT%H%M%S%f}-{config_hash[:8]}"


class RunRecord:
    """Writes the run's row at start (running) and end (succeeded/failed)."""

    def __init__(
        self,
        spark: SparkSession,
        lake: Lake,
        run_id: str,
        job: str,
        config: dict,
        config_hash: str,
        inputs: list[dict],
    ) -> None:
        self.spark, self.lake, self.run_id = spark, lake, run_id
        self.fields = dict(
            job=job,
            config=json.dumps(config, sort_keys=True),
            config_hash=config_hash,
            inputs=json.dumps(inputs),
        )
        self.started_at = now()

    def flip(self, status: str, error: str | None = None) -> Flip:
        """Stage this run's row with `status`; the returned Flip makes it visible."""
        finished = None if status == "running" else now()
        row = (*self.fields.values(), self.started_at, finished, status, error, self.run_id)
        df = self.spark.createDataFrame([row], RUNS_SCHEMA)
        path = f"{self.lake.run_dir(self.run_id)}/runs/{status}"
        write_staged(df, path, ["run_id"])
        self.lake.ensure_table("runs", df.schema, ["run_id"])
        return Flip("runs", {"run_id": self.run_id}, f"{path}/run_id={self.run_id}")

    def mark(self, status: str, error: str | None = None) -> None:
        self.lake.commit(f"{self.run_id}-{status}", [self.flip(status, error)])

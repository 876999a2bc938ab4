"""The `runs` table: one row per job run (id, job, resolved config and hash, times, status),
and the frame every job runs in: open the lake (rolling forward an interrupted commit), mark
the run, do the work, commit it all or mark it failed."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobs.kit.config import JobConfig, check_run_id
from jobs.kit.errors import EXIT_DONE, EXIT_FAILED, EXIT_USAGE, ConfigError, InputError
from jobs.kit.launcher import sluice_path
from jobs.kit.progress import log
from jobs.lake import plain_query
from jobs.lake.lock import BUSY_EXIT, LakeBusy, run_alive, run_lease
from jobs.lake.metastore import metastore_conf, metastore_failure
from jobs.lake.session import build_session, spark_sql_command
from jobs.lake.store import Flip, Lake, gc, write_staged
from udfs.paths import is_local_path, local_path

RUNS_SCHEMA = (
    "job string, config string, config_hash string, inputs string, spark string, "
    "started_at timestamp, finished_at timestamp, status string, error string, run_id string"
)
RUNS_COLUMNS = [c.split()[0] for c in RUNS_SCHEMA.split(", ")]
# Settings a run records, to tell later where and how it ran.
RECORDED_CONF = ("spark.sql.shuffle.partitions", "spark.executor.cores", "spark.task.cpus",
                 "spark.submit.deployMode")


def now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def new_run_id(config_hash: str) -> str:
    return f"{now():%Y%m%dT%H%M%S%f}-{config_hash[:8]}"


def spark_facts(spark: SparkSession) -> dict:
    """Where the run ran: master, application id, parallelism and the recorded settings."""
    sc = spark.sparkContext
    conf = {key: spark.conf.get(key, None) for key in RECORDED_CONF}
    return {"master": sc.master, "app_id": sc.applicationId,
            "default_parallelism": sc.defaultParallelism, "conf": conf}


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
            spark=json.dumps(spark_facts(spark)),
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
        part = {"run_id": self.run_id}
        return Flip("runs", part, f"{path}/{self.lake.partition_path(part)}")

    def mark(self, status: str, error: str | None = None) -> None:
        self.lake.commit(f"{self.run_id}-{status}", [self.flip(status, error)])


def open_lake(app_name: str, cfg: JobConfig, run_id: str | None = None,
              beside: bool = False) -> tuple[SparkSession, Lake]:
    """The session and lake of a job config (`lake`, `spark` sections); `beside`: see
    `open_lake_at`."""
    conf = {**metastore_conf(cfg.lake.metastore), **cfg.spark.conf}
    return open_lake_at(app_name, cfg.lake.root, cfg.lake.database, conf, run_id,
                        beside=beside)


# What any lake that ever opened holds (a lake on a shared metastore has no metastore_db).
LAKE_MARKS = ("metastore_db", "tables", "runs")


def check_lake_exists(root: str) -> None:
    """Refuse, before Spark creates anything there, a local lake root that is not there or
    holds no lake. A remote root is left to the job (no file system before Spark)."""
    if not is_local_path(root):
        return
    path = local_path(root)
    if not os.path.isdir(path):
        raise ConfigError(f"no lake at {root}: no such directory")
    if not any(os.path.isdir(os.path.join(path, mark)) for mark in LAKE_MARKS):
        raise ConfigError(f"no lake at {root}: the directory holds none of "
                          f"{', '.join(m + '/' for m in LAKE_MARKS)} (a mistyped --lake?)")


def open_lake_at(app_name: str, root: str, database: str, conf: dict[str, str] | None = None,
                 run_id: str | None = None, existing: bool = False, beside: bool = False
                 ) -> tuple[SparkSession, Lake]:
    """The session and lake at `root`, with interrupted commits rolled forward and dead runs
    marked failed. On a local lake with the embedded metastore the job first takes the
    lake's metastore lock (`run_id` names it to others); LakeBusy if another job has it.
    `existing`: a job that reads or tidies a lake (report, gc) refuses a root holding none,
    so a mistyped --lake does not become a new, empty lake. `beside`: the catalog opens
    (and the lake is settled) in a thread beside the job's work from the lake's first use on;
    work before that must not touch the catalog but through the lake (jobs/lake/beside.py):
    the first rows are staged seconds sooner."""
    if existing:
        check_lake_exists(root)
    log(f"{app_name}: starting Spark")
    spark = build_session(app_name, root, conf=conf, lock=True, run_id=run_id)
    log(f"{app_name}: Spark {spark.version} on {spark.sparkContext.master} "
        f"({spark.sparkContext.defaultParallelism} cores); opening the lake at {root}")
    lake = Lake(spark, root, database, open_catalog=False)
    if beside:
        lake.open_beside(lambda: settle(lake))
    else:
        lake.open_catalog()
        settle(lake)
    return spark, lake


def settle(lake: Lake) -> None:
    """Roll forward interrupted commits; mark failed the runs whose jobs are gone."""
    for run_id in lake.recover():
        log(f"rolled forward the interrupted commit of run {run_id}")
    torn = [re.sub(r"-(running|succeeded|failed)$", "", run_id) for run_id in lake.torn]
    mark_failed(lake, "its commit journal was unreadable", torn)
    # A run left `running` whose job is gone (its lease free, jobs/lake/lock.py RunLease);
    # where no leases are kept (a remote lake), only the embedded metastore tells: it admits
    # one job at a time, so a run still `running` is dead.
    dead = dead_runs(lake)
    if dead or embedded_metastore(lake.spark):
        mark_failed(lake, "killed: found running by a later job", dead)


def dead_runs(lake: Lake) -> list[str] | None:
    """The runs left `running` whose jobs are gone; None where that cannot be told (a remote
    lake keeps no leases)."""
    if run_alive(lake.root, "-") is None or not lake.spark.catalog.tableExists(
            f"{lake.database}.runs"):
        return None
    lake.spark.catalog.refreshTable(f"{lake.database}.runs")
    running = lake.spark.table(lake.qualified("runs")).where("status = 'running'")
    return [r.run_id for r in running.select("run_id").collect()
            if not run_alive(lake.root, r.run_id)]


def embedded_metastore(spark: SparkSession) -> bool:
    """Whether the catalog is an embedded Derby metastore (one job at a time)."""
    if spark.conf.get("spark.hadoop.hive.metastore.uris", None):
        return False
    url = spark.conf.get("spark.hadoop.javax.jdo.option.ConnectionURL", None)
    return url is None or url.startswith("jdbc:derby:")


def mark_failed(lake: Lake, error: str, run_ids: list[str] | None = None) -> None:
    """Record the given runs as failed, or (without ids) every run left `running`."""
    if not lake.spark.catalog.tableExists(f"{lake.database}.runs") or run_ids == []:
        return
    lake.spark.catalog.refreshTable(f"{lake.database}.runs")
    runs = lake.spark.table(lake.qualified("runs"))
    if run_ids is None:
        run_ids = [r.run_id for r in runs.where("status = 'running'").select("run_id").collect()]
    for run_id in sorted(set(run_ids)):
        row = runs.where(F.col("run_id") == run_id).limit(1).collect()
        if row and row[0].status == "succeeded":
            continue
        fields = row[0].asDict() if row else {"run_id": run_id}
        fields.update(status="failed", error=error, finished_at=now())
        df = lake.spark.createDataFrame(
            [tuple(fields.get(name) for name in RUNS_COLUMNS)], RUNS_SCHEMA)
        path = f"{lake.run_dir(run_id)}/runs/failed"
        write_staged(df, path, ["run_id"])
        part = {"run_id": run_id}
        lake.commit(f"{run_id}-failed", [Flip("runs", part, f"{path}/{lake.partition_path(part)}")])
        log(f"run {run_id} marked failed ({error})")


def run_and_commit(spark: SparkSession, lake: Lake, cfg: JobConfig, job: str, run_id: str,
                   inputs: list[dict], execute: Callable[[], list[Flip]], query: str) -> None:
    """Record the run as running, execute it, commit its flips with the `succeeded` record in
    one commit; on a failure before the commit's journal is written record it failed (nothing
    of it became visible) and re-raise. Then print how to look at it: `query` through
    spark-sql on this lake.

    Units are published one by one, so the order is what readers can rely on: the run's data
    first, then its rows in tables keyed by `run_id` alone (its stats), the `runs` row last.
    Seeing a run's stats means its data is in place; `succeeded` means all of it is."""
    check_run_id(run_id)
    record = RunRecord(spark, lake, run_id, job, cfg.resolved(), cfg.hash(), inputs)

    def register() -> None:
        committed = lake.committed_run(run_id)
        if committed is not None and (committed.job, committed.config_hash) == (job, cfg.hash()):
            raise AlreadyCommitted(f"run {run_id} ({job}) has already committed to {lake.root} "
                                   "with this config: nothing to do (a retry)")
        if committed is not None:
            raise ConfigError(f"run id {run_id} has already committed to {lake.root} (a "
                              f"{committed.job} run, config {committed.config_hash}): give a "
                              "new --run-id (or none: one is made up)")
        record.mark("running")
        log(f"run {run_id}, lake {lake.root}")

    with run_lease(lake.root, run_id):  # while it is held, no other job takes the run for dead
        lake.when_ready(register)  # beside the work while a lake opened `beside` opens
        if run_alive(lake.root, run_id) is None:
            # No lease tells other jobs this run is alive (a remote lake): its `running` row
            # must, before it stages anything another job's gc could take for a dead run's.
            lake.ready()
        if lake.exists(lake.journal_path(run_id)):
            # This id's own commit was cut short (a scheduler retrying with a fixed --run-id):
            # its staged units are rolled forward beside, out of the run directory this attempt
            # would write into. Wait for that first (then a retry of it does nothing).
            lake.ready()
        try:
            own = {"run_id": run_id}
            flips = sorted(execute(), key=lambda flip: flip.partition == own)  # stable: data first
            lake.ready()
            # The `succeeded` record is stamped under the commit lock: a run that waited for
            # another's commit finishes after it, so `finished_at` orders the commits.
            with lake.exclusive(run_id):
                lake.commit(run_id, [*flips, record.flip("succeeded")])
        except BaseException as err:
            if (unregistered := lake.failure()) is not None:
                raise unregistered from None  # the lake did not open or take the run: its error
            if not lake.committing(run_id):
                try:
                    record.mark("failed", f"{type(err).__name__}: {err}")
                except Exception as also:  # the lake itself failing (its metastore): err says
                    log(f"run {run_id}: could not be recorded as failed ({type(also).__name__})"
                        "; the next job on this lake marks it so")
            else:  # some units may be published: the run can only go forward, never `failed`
                log(f"run {run_id}: its commit was interrupted ({type(err).__name__}); the next "
                    "job on this lake rolls it forward")
            raise
    log(f"committed run {run_id} to {lake.root} (database `{lake.database}`)")
    gc(lake)  # its staged leftovers and the data it superseded
    log(f"query: {spark_sql_command(cfg.lake.root, query, cfg.lake.metastore)}")
    if without_spark := plain_query.command(cfg.lake.root, query, cfg.lake.database,
                                            sluice_path()):
        log(f"query without Spark (duckdb, no JVM): {without_spark}")


class AlreadyCommitted(Exception):
    """The run's id has committed already, by the same job with the same config: a scheduler's
    retry of a run that did commit. Nothing is done again; the job exits 0."""


def job_main(parse: Callable[[list[str] | None], argparse.Namespace],
             run: Callable[[argparse.Namespace], int]) -> Callable[[list[str] | None], int]:
    """Every job's `main`, the one frame: its flags parsed, a `--run-id` given checked (once,
    here, before Spark starts), then `run`, with its errors turned into exit codes
    (`exit_code`, jobs/kit/errors.py)."""

    def main(argv: list[str] | None = None) -> int:
        args = parse(argv)

        def checked_then_run() -> int:
            if getattr(args, "run_id", None) is not None:
                check_run_id(args.run_id)
            return run(args)

        return exit_code(checked_then_run)

    return main


def exit_code(job: Callable[[], int]) -> int:
    """Run a job's main; a retry of a run that committed already (same id, job and config) is
    one line and exit 0; a problem with its config or input is one line on stderr, exit 2;
    a lake another job holds (LakeBusy) one line, exit 75: nothing done, try again later; a
    shared metastore failing under the job one line, exit 1."""
    try:
        return job()
    except AlreadyCommitted as done:
        print(f"sluice: {done}", file=sys.stderr)
        return EXIT_DONE
    except (ConfigError, InputError) as err:
        print(f"sluice: error: {err}", file=sys.stderr)
        quiet_jvm()
        return EXIT_USAGE
    except LakeBusy as busy:
        print(f"sluice: {busy}", file=sys.stderr)
        return BUSY_EXIT
    except Exception as err:
        if (lost := metastore_failure(err)) is None:
            raise
        print(f"sluice: {lost}", file=sys.stderr)
        return EXIT_FAILED


def quiet_jvm() -> None:
    """Spark's logging off once a job has said its one error line: the catalog may still be
    opening beside it (jobs/lake/beside.py) as the JVM stops, and the Hive client logs that
    cut-short work with stack traces (a truncated gzip input fails seconds in)."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is not None:
        with contextlib.suppress(Exception):  # the JVM may be gone already: nothing to quiet
            context.setLogLevel("OFF")

"""Scheduled, incremental corpus refreshes: only new or changed source files go through the
filter funnel, deduplicated against the whole lake.

    spark-submit jobs/refresh.py --config conf/refresh-zh-en.yaml     # e.g. hourly, from cron
    spark-submit jobs/refresh.py --config conf/refresh-zh-en.yaml --full   # rebuild them all

The config is a filter config (it `extends` one) with `sources:` ({corpus, path, format}: a
directory or glob that grows) and `refresh:` settings (conf/refresh-defaults.yaml). A
refresh lists the sources, compares them with the `input_files` manifest, filters the new
and changed files in one run (conservation check, atomic commit), and replaces those files'
rows and nothing else. With nothing to do it prints "up to date" and exits 0. One refresh
per lake at a time: another exits 75 with who holds the lock (jobs/lake/lock.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import AbstractContextManager
from functools import partial

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.filtering.pair_score_stage import pair_score_model
from jobs.filtering.pair_scores import check_cross_encoder
from jobs.filtering.run import FilterRun
from jobs.filtering.stages import dedup, with_dedup_keys
from jobs.kit.cli import add_config, add_lake, add_run_id, lake_extra
from jobs.kit.config import InputConf
from jobs.kit.errors import ConfigError
from jobs.kit.ingest import RAW_COLUMNS, read_input, union_all
from jobs.kit.progress import log, stage
from jobs.lake.lock import LakeBusy, RemoteLock, local_lock
from jobs.lake.runs import job_main, new_run_id, open_lake, run_and_commit
from jobs.lake.session import MetastoreBusy
from jobs.lake.store import Flip, Lake, write_staged
from jobs.refreshing.config import RefreshConfig, load_refresh_config
from jobs.refreshing.dedup import RefreshDedup, stored_raw, stored_rows
from jobs.refreshing.manifest import (
    MANIFEST,
    MANIFEST_SCHEMA,
    Plan,
    checksum,
    list_sources,
    manifest_rows,
    plan_refresh,
    read_manifest,
    read_manifest_files,
)
from jobs.refreshing.units import SOURCE_COLUMN, SOURCE_FILE, UnitBuilder
from jobs.selection.job import main as select_main
from udfs.paths import is_local_path, local_path


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="jobs/refresh.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_config(p, "refresh-defaults.yaml: sources and filter settings", required=True)
    add_lake(p)
    p.add_argument("--full", action="store_true",
                   help="process every source file again (a full rebuild of these corpora)")
    add_run_id(p)
    return p.parse_args(argv)


class RefreshRun(FilterRun):
    """The filter run over a refresh's new and changed files, committed as units that keep
    every other file's rows (jobs/refreshing/units.py), with the manifest in the same commit."""

    def __init__(self, spark: SparkSession, lake: Lake, cfg: RefreshConfig, run_id: str,
                 plan: Plan) -> None:
        super().__init__(spark, lake, cfg, run_id)
        self.cfg: RefreshConfig = cfg
        self.plan = plan
        self.source_cols = [SOURCE_COLUMN]
        self.lines_per_file: dict[str, int] = {}  # lines read per processed file id
        self.lock: RemoteLock | None = None  # a remote lake's lock, checked before the commit
        self.carried: list[str] = []  # ids of kept files whose rows this run re-decides
        self.near_dup_done = False  # lake-wide near-dup ran with the lake-wide dedup

    def stage(self, name: str) -> AbstractContextManager[None]:
        corpora = ",".join(sorted({f.corpus for f in self.plan.process}))
        return stage(self.spark, "refresh", f"{name} {self.cfg.key}/{corpora}")

    def read_inputs(self) -> DataFrame:
        if not self.plan.process:  # only drops: no rows to read, committed ones re-decided
            rows = stored_raw(self.spark, self.lake, self.layout, self.cfg.key)
            return rows.select(*RAW_COLUMNS, F.lit(None).cast("string").alias(
                SOURCE_COLUMN)).limit(0)
        frames = []
        columns = {source.corpus: source.columns for source in self.cfg.sources}
        for file in self.plan.process:
            log(f"reading {file.corpus} ({self.plan.why[file.file_id]}): {' '.join(file.paths)}")
            inp = InputConf(corpus=file.corpus, paths=file.paths, format=file.format,
                            columns=columns.get(file.corpus) if file.format == "tsv" else None)
            rows = read_input(self.spark, inp, self.cfg.key, self.cfg.ingest.max_line_chars,
                              self.cfg.mono)
            frames.append(rows.withColumn(SOURCE_COLUMN, F.lit(file.file_id)))
        return union_all(frames)

    def deduplicate(self, decided: DataFrame) -> DataFrame:
        """The new rows deduplicated with the committed rows of the whole pair, as a full
        refresh would (jobs/refreshing/dedup.py); kept files whose rows' dedup decisions change
        are carried into this run, re-decided and rewritten."""
        stored = stored_rows(self.spark, self.lake, self.layout, self.cfg.key)
        if not self.cfg.refresh.lake_dedup or stored is None:
            return dedup(decided, self.cfg)
        kept = {e.file_id for e in self.plan.kept}
        redo = RefreshDedup(self.cfg, stored, kept, self.plan.removed)
        near = "+near_dup" if self.cfg.near_dup.enabled else ""
        with self.stage(f"normalize+rules+langid+dedup{near}"):  # staged: read three times
            marked = self.staged(redo.decide(with_dedup_keys(decided, self.cfg)), "stage_dedup")
            self.carried = redo.changed_files(marked)
            if self.cfg.hosts.enabled:  # their websites' features change with the new rows
                hosts = redo.sharing_hosts(marked)
                self.carried = sorted(set(self.carried) | set(hosts))
        self.near_dup_done = self.cfg.near_dup.enabled
        rows = redo.new_rows(marked)
        if not self.carried:
            return rows
        log(f"re-deciding the committed rows of {len(self.carried)} kept file(s) whose "
            "duplicates' survivors or websites' evidence changed")
        return rows.unionByName(redo.carried_rows(self.carried, marked, rows.columns))

    def committed_elsewhere(self, rows: DataFrame) -> DataFrame | None:
        """The committed rows the refresh does not rewrite: every pair's but this pair's rows
        of the files it re-reads, drops or carries."""
        committed = self.committed()
        if committed is None:
            return None
        gone = sorted(self.plan.removed | set(self.carried))
        if not gone:
            return committed
        source = F.regexp_extract(F.col("_metadata.file_name"), SOURCE_FILE.pattern, 1)
        rewritten = (F.col(self.layout.key) == self.cfg.key) & source.isin(gone)
        return committed.where(~rewritten)

    def near_deduplicate(self, rows: DataFrame) -> DataFrame:
        """Done lake-wide with the dedup (jobs/refreshing/near_dup.py), or over the run's
        rows when the lake held none of the pair's yet."""
        return rows if self.near_dup_done else super().near_deduplicate(rows)

    def finish(self, rows_in: DataFrame, decided: DataFrame, raw: DataFrame) -> list[Flip]:
        """As a filter run's, with the carried files' committed raw rows counted in."""
        if self.carried:
            lay = self.layout
            self.spark.catalog.refreshTable(f"{self.lake.database}.{lay.raw}")
            carried = stored_raw(self.spark, self.lake, lay, self.cfg.key).where(
                F.col(SOURCE_COLUMN).isin(self.carried))
            rows_in = rows_in.select("pair", "corpus").unionByName(
                carried.select("pair", "corpus"))
        return super().finish(rows_in, decided, raw)

    def commit_units(self) -> list[Flip]:
        """Everything the refresh publishes: its filter stats, the changed corpora's units
        and the manifest."""
        changes = self.plan.process or self.plan.removed  # a drop re-decides duplicates too
        flips = self.execute(self.read_inputs()) if changes else self.units()
        flips.append(self.manifest_flip())
        if self.lock is not None and self.lock.lost.is_set():
            raise LakeBusy(f"another refresh took over the lake lock {self.lock.path} (this "
                           "one looked dead: no heartbeat); nothing of this run was committed")
        return flips

    def flips(self, keys: list[tuple[str, str]]) -> list[Flip]:
        if self.plan.process:  # lines read per file, counted before the units take them
            raw = self.spark.read.parquet(f"{self.dir}/{self.layout.raw}")
            self.lines_per_file = {r[SOURCE_COLUMN]: r["count"]
                            for r in raw.groupBy(SOURCE_COLUMN).count().collect()}
        stats = {"run_id": self.run_id}
        where = self.lake.partition_path(stats)
        return [Flip("filter_stats", stats, f"{self.dir}/filter_stats/{where}"), *self.units()]

    def units(self) -> list[Flip]:
        """Per changed corpus, its raw rows' unit and its decided rows' unit; a corpus with
        carried files (re-decided, not re-read) only the latter."""
        lay, builder = self.layout, UnitBuilder(self.lake, self.dir, self.plan.removed)
        processed = {f.corpus for f in self.plan.process}
        corpus_of = {e.file_id: e.corpus for e in self.plan.kept}
        carried = {corpus_of[file_id] for file_id in self.carried}
        outcomes = [{"outcome": "clean"}, {"outcome": "rejected"}]
        flips = []
        for corpus in sorted(self.plan.corpora | carried):
            part = {lay.key: self.cfg.key, "corpus": corpus}
            if corpus in self.plan.corpora:
                flips.append(builder.unit(lay.raw, part, [], corpus in processed))
            flips.append(builder.unit(lay.prefix, part, outcomes,
                                      corpus in processed | carried,
                                      self.plan.removed | set(self.carried)))
        self.lake._hook("units assembled")
        return flips

    def manifest_flip(self) -> Flip:
        rows = manifest_rows(self.plan, self.lines_per_file, self.cfg.filter_hash(), self.run_id,
                             self.cfg.key)
        df = self.spark.createDataFrame(rows, MANIFEST_SCHEMA)
        write_staged(df, f"{self.dir}/{MANIFEST}", ["key"])
        self.lake.ensure_table(MANIFEST, df.schema, ["key"])
        part = {"key": self.cfg.key}
        return Flip(MANIFEST, part, f"{self.dir}/{MANIFEST}/{self.lake.partition_path(part)}")


def config_from_args(args: argparse.Namespace) -> RefreshConfig:
    extra = lake_extra(args)
    cfg = load_refresh_config(args.config, args.set, extra)
    cfg.langs  # noqa: B018 - raises ConfigError when neither pair nor lang is set
    return cfg


def refresh(spark: SparkSession, lake: Lake, cfg: RefreshConfig, run_id: str, full: bool,
            lock: RemoteLock | None = None) -> int:
    # A missing pair_score model fails before any file is read, as in a filter run. Not
    # pinned as a filter run pins `latest`: the name is part of the filter hash each file's
    # manifest row keeps, and a pinned one would refilter every file whenever a model is saved.
    if cfg.pair_score.enabled:
        pair_score_model(cfg, lake)
    check_cross_encoder(cfg)
    listed = list_sources(spark, cfg) or []
    manifest = read_manifest(spark, cfg.lake.database, cfg.key)
    plan = plan_refresh(listed, manifest, cfg.filter_hash(), cfg.refresh.missing_files,
                        partial(checksum, spark), full)
    log(f"refresh {cfg.key}: {plan.summary()}")
    for file, why in plan.quarantined:
        print(f"sluice: warning: quarantined {why}; its rows are not refreshed (corpus "
              f"{file.corpus}) until the file is whole", file=sys.stderr)
    if plan.up_to_date:
        say_up_to_date(cfg, len(listed))
        return 0
    job = RefreshRun(spark, lake, cfg, run_id, plan)
    job.lock = lock
    inputs = [{"corpus": f.corpus, "paths": f.paths, "format": f.format,
               "why": plan.why[f.file_id]} for f in plan.process]
    inputs += [{"corpus": e.corpus, "paths": [e.path], "why": "dropped"} for e in plan.dropped]
    inputs += [{"corpus": f.corpus, "paths": f.paths, "why": f"quarantined: {why}"}
               for f, why in plan.quarantined]
    query = (f"SELECT corpus, status, count(*) AS files, sum(rows) AS rows FROM "
             f"{cfg.lake.database}.{MANIFEST} WHERE key = '{cfg.key}' GROUP BY corpus, status")
    run_and_commit(spark, lake, cfg, "refresh", run_id, inputs, job.commit_units, query)
    if cfg.refresh.select and plan.process:
        select_new_rows(cfg, run_id)
    return 0


def say_up_to_date(cfg: RefreshConfig, files: int) -> None:
    print(f"up to date: {files} source files of {cfg.key}, nothing new or changed")


def quick_up_to_date(cfg: RefreshConfig) -> bool:
    """Whether a local lake is up to date, told from the committed manifest files and a
    listing of local sources, before Spark starts (about a second). Only a certain "yes"
    counts: with a commit to roll forward, a file whose size or time changed, or a remote
    path, the refresh starts Spark and decides there."""
    root = cfg.lake.root
    if not is_local_path(root):
        return False
    lake = local_path(root)
    journal = os.path.join(lake, "journal")
    if os.path.isdir(journal) and any(n.endswith(".json") for n in os.listdir(journal)):
        return False
    manifest = read_manifest_files(os.path.join(lake, "tables", MANIFEST, f"key={cfg.key}"))
    listed = list_sources(None, cfg)
    if manifest is None or listed is None:
        return False

    def needs_spark(file: object) -> str:
        raise LookupError  # a checksum is wanted: not certain without reading the file

    try:
        plan = plan_refresh(listed, manifest, cfg.filter_hash(), cfg.refresh.missing_files,
                            needs_spark)
    except LookupError:
        return False
    if plan.up_to_date:
        say_up_to_date(cfg, len(listed))
    return plan.up_to_date


def select_new_rows(cfg: RefreshConfig, run_id: str) -> None:
    """The configured selection job on the rows this refresh added (same Spark session)."""
    log(f"selection on the new rows: {cfg.refresh.select}")
    code = select_main(["--config", cfg.refresh.select, "--lake", cfg.lake.root,
                            "--where", f"run_id = '{run_id}'"])
    if code != 0:
        raise ConfigError(f"the selection ({cfg.refresh.select}) failed after the refresh "
                          f"{run_id} committed (exit {code})")


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    run_id = args.run_id or new_run_id(cfg.hash())  # a given one was checked by job_main
    if not args.full and quick_up_to_date(cfg):
        return 0
    lock = local_lock(cfg.lake.root)  # taken before Spark starts: a busy lake answers at once
    if lock is not None:
        lock.acquire(run_id)
    try:
        try:
            spark, lake = open_lake("sluice-refresh", cfg)
        except MetastoreBusy as busy:  # another job has the lake: try again later, as a lock
            raise LakeBusy(str(busy)) from None
        if lock is None:
            lock = RemoteLock(lake, cfg.refresh.heartbeat_s, cfg.refresh.stale_after_s)
            lock.acquire(run_id)
        remote = lock if isinstance(lock, RemoteLock) else None
        return refresh(spark, lake, cfg, run_id, args.full, remote)
    finally:
        if lock is not None:
            lock.release()


main = job_main(parse_args, run)

"""One filter run (jobs/filter.py): read its inputs, take the rows through the stages, and
the units its commit publishes. A re-decide (jobs/filtering/redecide.py) and a refresh
(jobs/refresh.py) are filter runs with other inputs."""

from __future__ import annotations

from contextlib import AbstractContextManager

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from jobs.filtering.config import FilterConfig
from jobs.filtering.layout import Layout
from jobs.filtering.near_dup import near_dup
from jobs.filtering.stages import dedup
from jobs.filtering.stats import (
    STATS_SCHEMA,
    check_conservation,
    count_outcomes,
    funnel,
    stats_rows,
)
from jobs.filtering.steps import STAGES, WAS, Stage, rule_sequence
from jobs.kit.ingest import read_input, union_all
from jobs.kit.progress import log, stage
from jobs.lake.store import Flip, Lake, write_staged

REJECT_COLUMNS = ["reject_stage", "reject_rule", "dup_of"]


class FilterRun:
    """A run of the filter's stages over input rows, committed as the run's (pair, corpus)
    partitions. A refresh (jobs/refreshing/job.py) feeds it other rows and commits other
    units; a re-decide (jobs/filtering/redecide.py) decides `from_stored` scores."""

    stages: tuple[Stage, ...] = STAGES
    from_stored = False  # decide by a run's stored scores instead of computing them

    def __init__(self, spark: SparkSession, lake: Lake, cfg: FilterConfig, run_id: str) -> None:
        self.spark, self.lake, self.cfg, self.run_id = spark, lake, cfg, run_id
        self.dir = lake.run_dir(run_id)
        self.layout = Layout(cfg.mono)
        self.ingested: DataFrame  # the rows in, as the ingest stage left them
        self.source = ""  # the run whose stored scores a re-decide decides by
        # Columns the staged rows are also partitioned by and the tables do not hold (a
        # refresh keeps each source file's rows in files of their own: jobs/refresh.py).
        self.source_cols: list[str] = []
        # Staged rows are read back in at least as many splits as the ingest wrote partitions
        # (Spark's default, one split per core, left one core idle at the main stage's end).
        spark.conf.set("spark.sql.files.minPartitionNum", str(self.partitions()))

    def read_inputs(self) -> DataFrame:
        frames = []
        for inp in self.cfg.inputs:
            if inp.format == "table" and inp.paths and "." not in inp.paths[0]:
                # a table of the lake's own database (bitext_clean), as a mixture names it
                inp = inp.model_copy(update={"paths": [self.lake.qualified(inp.paths[0])]})
            log(f"reading {inp.corpus}: {' '.join(inp.paths)}")
            frames.append(
                read_input(self.spark, inp, self.cfg.key, self.cfg.ingest.max_line_chars,
                           self.cfg.mono, self.cfg.ingest.follow_symlinks)
            )
        return union_all(frames)

    def staged(
        self, df: DataFrame, name: str, partition_cols: list[str] | None = None
    ) -> DataFrame:
        """Write `df` under the run's directory and read it back: later steps start from the
        files instead of recomputing everything before them."""
        self.lake.check()  # a run that cannot commit (its id taken) stops at the next step
        parts = partition_cols or []
        write_staged(df, f"{self.dir}/{name}", parts)
        # Read with the written types (not inferred from directory names: a corpus `2019`
        # stays a string) and the partition columns last, as Spark puts them; this also
        # reads back a run with no rows (a refresh that only drops files).
        fields = [f for f in df.schema.fields if f.name not in parts]
        schema = StructType(fields + [df.schema[c] for c in parts])
        return self.spark.read.schema(schema).parquet(f"{self.dir}/{name}")

    def stage(self, name: str) -> AbstractContextManager[None]:
        """Name the Spark jobs of a step after it and log its progress (jobs/kit/progress.py)."""
        corpora = ",".join(sorted({inp.corpus for inp in self.cfg.inputs}))
        return stage(self.spark, "filter", f"{name} {self.cfg.key}/{corpora}")

    def partitions(self, input_bytes: int | None = None) -> int:
        """Enough partitions to keep every core busy to the end of the main stage, but no more
        than the input's size allows (`spark.min_partition_bytes` each; unknown: no limit)."""
        cores = self.spark.sparkContext.defaultParallelism
        most = max(1, cores * self.cfg.spark.partitions_per_core)
        least_bytes = self.cfg.spark.min_partition_bytes
        if input_bytes is None or least_bytes == 0:
            return most
        return max(1, min(most, -(-input_bytes // least_bytes)))

    def through_stages(self, rows: DataFrame) -> DataFrame:
        """The rows through `self.stages` in their declared order (jobs/filtering/steps.py),
        each stage scoring and deciding, or in a re-decide (`from_stored`) deciding by the
        scores the source run stored.

        Before a stage that reads its input more than once (a pair scorer samples and counts
        it), the rows worked on since the last staging point are staged: each read would
        otherwise redo every stage before it. A re-decide stages once, before the first such
        stage: what follows are cheap passes over stored scores."""
        self.staging_points: list[str] = []
        since: list[str] = []  # what the rows went through since they were last staged
        for step in self.stages:
            if not step.on(self.cfg):
                continue
            if step.materialised_input and since:
                with self.stage("+".join(since)):
                    rows = self.staged(rows, f"before_{step.name}")
                self.staging_points.append(f"before_{step.name}")
                since = []
            if self.from_stored:
                rows = step.decide(self, rows)
                # up to the staging point; after it, cheap passes over stored scores
                if not step.materialised_input and not self.staging_points:
                    since.append(step.name)
            else:
                rows = step.score(self, rows)
                since = [] if step.stores_output else [*since, step.shows]
        self.unstaged = since
        return rows

    def execute(self, rows: DataFrame) -> list[Flip]:
        """The rows through the stages, staged as the run's decided rows, checked and
        made into the run's flips."""
        lay, key = self.layout, self.layout.key
        decided = self.through_stages(rows).drop(WAS)
        outcome = F.when(F.col("reject_rule").isNull(), "clean").otherwise("rejected")
        decided = decided.withColumn("run_id", F.lit(self.run_id)).withColumn("outcome", outcome)
        last = "+".join(self.unstaged) or ("re-decide" if self.from_stored else "write")
        with self.stage(last):
            parts = [key, "corpus", "outcome", *self.source_cols]
            decided = self.staged(lay.outward(decided), lay.prefix, parts)
        for name in self.staging_points:
            self.lake.delete(f"{self.dir}/{name}")
        return self.finish(self.ingested, decided, self.raw_rows())

    def raw_rows(self) -> DataFrame:
        """Rows with the raw table's columns (its schema, for `ensure_tables`)."""
        return self.layout.outward(self.ingested)

    def finish(self, rows_in: DataFrame, decided: DataFrame, raw: DataFrame) -> list[Flip]:
        """Check that every row of `rows_in` is in `decided` exactly once, stage the run's
        filter_stats, make sure the tables exist (`raw`: the raw table's rows) and return the
        run's flips."""
        with self.stage("conservation check"):
            counts = count_outcomes(rows_in, decided, self.layout.key)
        check_conservation(counts)
        sequence = rule_sequence(self.cfg)
        stats = self.spark.createDataFrame(stats_rows(self.run_id, counts, sequence), STATS_SCHEMA)
        write_staged(stats, f"{self.dir}/filter_stats", ["run_id"])
        self.ensure_tables(raw, decided, stats)
        log("funnel\n" + funnel(counts, sequence))
        return self.flips(sorted(counts.rows_in))

    def deduplicate(self, decided: DataFrame) -> DataFrame:
        """Duplicates among the run's rows (jobs/filtering/stages.py)."""
        return dedup(decided, self.cfg)

    def near_deduplicate(self, rows: DataFrame) -> DataFrame:
        """Near-duplicates among the run's rows (jobs/filtering/near_dup.py)."""
        return near_dup(rows, self.cfg)

    def committed(self) -> DataFrame | None:
        """Every committed decided row of the lake (all pairs), None before any or where the
        lake predates `host` (what the host features count beside the run's rows)."""
        name = f"{self.lake.database}.{self.layout.prefix}"
        if not self.spark.catalog.tableExists(name):
            return None
        self.spark.catalog.refreshTable(name)
        rows = self.spark.table(self.lake.qualified(self.layout.prefix))
        return rows if "host" in rows.columns else None

    def committed_elsewhere(self, rows: DataFrame) -> DataFrame | None:
        """The committed rows this run does not replace: every (pair, corpus) partition but
        those of `rows` (the stages' shape)."""
        committed = self.committed()
        if committed is None:
            return None
        key = self.layout.key
        mine = rows.select(F.col("pair").alias(key), "corpus").distinct()
        return committed.join(mine, [key, "corpus"], "left_anti")

    def ensure_tables(self, raw: DataFrame, decided: DataFrame, stats: DataFrame) -> None:
        """`bitext` (or `mono`) holds clean and rejected rows, partitioned by outcome, so one
        swap publishes both; `bitext_clean`/`bitext_rejected` are views on it."""
        lay = self.layout
        raw, decided = raw.drop(*self.source_cols), decided.drop(*self.source_cols)
        self.lake.ensure_table(lay.raw, raw.schema, [lay.key, "corpus"])
        self.lake.ensure_table(lay.prefix, decided.schema, [lay.key, "corpus", "outcome"])
        self.lake.ensure_table("filter_stats", stats.schema, ["run_id"])
        columns = [c for c in self.spark.table(self.lake.qualified(lay.prefix)).columns
                   if c != "outcome"]
        kept = [c for c in columns if c not in REJECT_COLUMNS]
        self.lake.ensure_view(lay.clean, lay.prefix, kept, "outcome = 'clean'")
        self.lake.ensure_view(lay.rejected, lay.prefix, columns, "outcome = 'rejected'")

    def flips(self, keys: list[tuple[str, str]]) -> list[Flip]:
        lake, lay = self.lake, self.layout
        stats = {"run_id": self.run_id}
        flips = [Flip("filter_stats", stats, f"{self.dir}/filter_stats/"
                      f"{lake.partition_path(stats)}")]
        outcomes = [{"outcome": "clean"}, {"outcome": "rejected"}]
        for key, corpus in keys:
            part = {lay.key: key, "corpus": corpus}
            where = lake.partition_path(part)
            for inner in outcomes:  # an outcome with no rows still needs its directory
                lake.mkdirs(f"{self.dir}/{lay.prefix}/{where}/{lake.partition_path(inner)}")
            lake.mkdirs(f"{self.dir}/{lay.raw}/{where}")
            flips.append(Flip(lay.raw, part, f"{self.dir}/{lay.raw}/{where}"))
            flips.append(Flip(lay.prefix, part, f"{self.dir}/{lay.prefix}/{where}", outcomes))
        return flips

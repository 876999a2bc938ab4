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
from jobs.filtering.pair_score_stage import pair_score_stage
from jobs.filtering.pair_scores import align_stage, choose_aligner, embed_stage
from jobs.filtering.stages import (
    STAGES,
    dedup,
    normalize_and_analyze,
    rule_sequence,
    score_and_decide,
)
from jobs.filtering.stats import (
    STATS_SCHEMA,
    check_conservation,
    count_outcomes,
    funnel,
    stats_rows,
)
from jobs.kit.ingest import read_input, union_all
from jobs.kit.progress import log, stage
from jobs.lake.models import AlignerStore, for_executors
from jobs.lake.store import Flip, Lake, write_staged

REJECT_COLUMNS = ["reject_stage", "reject_rule", "dup_of"]


class FilterRun:
    def __init__(self, spark: SparkSession, lake: Lake, cfg: FilterConfig, run_id: str) -> None:
        self.spark, self.lake, self.cfg, self.run_id = spark, lake, cfg, run_id
        self.dir = lake.run_dir(run_id)
        self.layout = Layout(cfg.mono)
        # Columns the staged rows are also partitioned by and the tables do not hold (a
        # refresh keeps each source file's rows in files of their own: jobs/refresh.py).
        self.source_cols: list[str] = []
        # Staged rows are read back in at least as many splits as the ingest wrote partitions
        # (Spark's default, one split per core, left one core idle at the main stage's end).
        spark.conf.set("spark.sql.files.minPartitionNum", str(self.partitions()))

    def read_inputs(self) -> DataFrame:
        frames = []
        for inp in self.cfg.inputs:
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

    def partitions(self) -> int:
        """Enough partitions to keep every core busy to the end of the main stage."""
        cores = self.spark.sparkContext.defaultParallelism
        return max(1, cores * self.cfg.spark.partitions_per_core)

    def through_stages(self, rows: DataFrame) -> DataFrame:
        """The rows through the filter's stages, in the order `STAGES` declares them: each
        stage is the method `stage_<name>`. The re-decide (jobs/filtering/redecide.py) follows
        the same list with its own step for each; tests/test_stage_list.py checks both."""
        for step in STAGES:
            rows = getattr(self, f"stage_{step.name}")(rows)
        return rows

    def stage_ingest(self, raw: DataFrame) -> DataFrame:
        """The input rows, staged as the run's raw table (read back: later steps start there)."""
        lay = self.layout
        with self.stage(f"ingest into {lay.raw}"):
            # Spread by row id: a gzip file is read as one partition.
            spread = raw.repartition(self.partitions(), "row_id")
            parts = [lay.key, "corpus", *self.source_cols]
            self.rows_in = lay.inward(self.staged(lay.outward(spread), lay.raw, parts))
        return self.rows_in

    def stage_normalize(self, rows: DataFrame) -> DataFrame:
        langid = for_executors(self.spark, self.cfg.langid.model, "fastText language-ID model")
        return normalize_and_analyze(rows, self.cfg, langid)

    def stage_rules(self, rows: DataFrame) -> DataFrame:
        return score_and_decide(rows, self.cfg)

    def stage_dedup(self, rows: DataFrame) -> DataFrame:
        return self.deduplicate(rows)

    def stage_align(self, decided: DataFrame) -> DataFrame:
        """Word alignment on the rows the rules and dedup kept."""
        cfg = self.cfg
        if not (cfg.align.enabled or cfg.embedding.enabled or cfg.pair_score.enabled):
            return decided
        # Before the first pair scorer the rows are staged, so sampling for the aligner (and
        # each scorer's counts) does not recompute the stages before it.
        with self.stage("normalize+rules+langid+dedup"):
            decided = self.staged(decided, "stage_rules")
        if not cfg.align.enabled:
            return decided
        with self.stage(f"aligner (trained on up to {cfg.align.sample_pairs:,} clean pairs)"):
            store = AlignerStore(self.lake, cfg.pair)
            model_dir = choose_aligner(decided, cfg, store, self.run_id)
        log(f"word alignment scores (model {model_dir or 'none: all scores null'})")
        decided = align_stage(decided, cfg, model_dir)
        if cfg.embedding.enabled:  # staged again, or the embed split would align twice
            with self.stage("word alignment"):
                decided = self.staged(decided, "stage_align")
        return decided

    def stage_embed(self, decided: DataFrame) -> DataFrame:
        """Sentence-embedding similarity of the rows still alive."""
        cfg = self.cfg
        if not cfg.embedding.enabled:
            return decided
        enc = cfg.embedding.chosen
        log(f"embedding similarity ({cfg.embedding.encoder}: {enc.backend} {enc.model})")
        model = for_executors(self.spark, enc.model, f"{cfg.embedding.encoder} encoder")
        return embed_stage(decided, cfg, model)

    def stage_pair_score(self, decided: DataFrame) -> DataFrame:
        """The learned pair_score of the rows still alive."""
        cfg = self.cfg
        if not cfg.pair_score.enabled:
            return decided
        if cfg.align.enabled or cfg.embedding.enabled:  # the threshold's fit reads them
            with self.stage("embeddings" if cfg.embedding.enabled else "word alignment"):
                decided = self.staged(decided, "stage_scores")
        log(f"pair_score (model {cfg.pair_score.model})")
        decided, _ = pair_score_stage(decided, cfg, self.lake)
        return decided

    def execute(self, raw: DataFrame) -> list[Flip]:
        lay, key = self.layout, self.layout.key
        decided = self.through_stages(raw)
        outcome = F.when(F.col("reject_rule").isNull(), "clean").otherwise("rejected")
        decided = decided.withColumn("run_id", F.lit(self.run_id)).withColumn("outcome", outcome)
        scorers = (self.cfg.align.enabled or self.cfg.embedding.enabled
                   or self.cfg.pair_score.enabled)
        last = ("pair_score" if self.cfg.pair_score.enabled
                else "embeddings" if self.cfg.embedding.enabled else "write")
        with self.stage(last if scorers else "normalize+rules+langid+dedup"):
            parts = [key, "corpus", "outcome", *self.source_cols]
            decided = self.staged(lay.outward(decided), lay.prefix, parts)
        for step in ("stage_rules", "stage_align", "stage_scores"):  # the scorers' staged inputs
            self.lake.delete(f"{self.dir}/{step}")
        return self.finish(self.rows_in, decided, lay.outward(self.rows_in))

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

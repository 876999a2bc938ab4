"""The filter job: raw bitext -> bitext_raw, bitext_clean, bitext_rejected, filter_stats, runs;
or monolingual text (--lang) -> mono_raw, mono_clean, mono_rejected.

    spark-submit jobs/filter.py --config conf/zh-en.yaml
    spark-submit jobs/filter.py --pair zh-en --corpus news --input raw/news.zh raw/news.en
    spark-submit jobs/filter.py --lang en --corpus news --input raw/news.en   # monolingual

Stages: ingest -> normalize -> rules + language ID (scores stored) -> dedup -> word alignment
-> embedding similarity (the last two when enabled). Every input row ends in exactly one of
clean or rejected; the run checks that before it commits.
"""

from __future__ import annotations

import os
import sys

# spark-submit puts the script's directory (jobs/) first on sys.path, where jobs/select.py
# would shadow the standard library's `select` (imported by socket, subprocess, py4j). The
# jobs package is installed (pip install -e .), so jobs/ is dropped from the path.
_JOBS = os.path.dirname(os.path.realpath(__file__))
sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != _JOBS]

import argparse
from contextlib import AbstractContextManager

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from jobs.config import ConfigError, FilterConfig, load_config
from jobs.ingest import read_input, union_all
from jobs.lake import Flip, Lake, check_run_id, write_staged
from jobs.layout import Layout
from jobs.models import AlignerStore, for_executors
from jobs.pair_score_model import load as load_pair_score_model
from jobs.pair_score_stage import pair_score_stage
from jobs.pair_scores import align_stage, check_aligner, choose_aligner, embed_stage
from jobs.progress import log, stage
from jobs.runs import exit_code, new_run_id, open_lake, run_and_commit
from jobs.stages import dedup, normalize_and_analyze, rule_sequence, score_and_decide
from jobs.stats import STATS_SCHEMA, check_conservation, count_outcomes, funnel, stats_rows

REJECT_COLUMNS = ["reject_stage", "reject_rule", "dup_of"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="jobs/filter.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", help="YAML config (extends conf/defaults.yaml)")
    p.add_argument("--pair", help="language pair, source-target, e.g. zh-en")
    p.add_argument("--lang", help="language of monolingual text (instead of --pair), e.g. en")
    p.add_argument("--corpus", help="corpus name for --input")
    p.add_argument(
        "--input",
        nargs="+",
        metavar="PATH",
        help="one TSV/Parquet path, two Moses files in --pair order, a text file (--lang), "
        "or a table name (--format table)",
    )
    p.add_argument(
        "--format",
        choices=["auto", "tsv", "moses", "parquet", "text", "table"],
        default="auto",
    )
    p.add_argument("--where", help="--format table: a SQL filter on the table's rows")
    p.add_argument("--lake", help="lake root (local path, hdfs://, s3a://)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set rules.max_tokens=200",
    )
    p.add_argument("--run-id", help="run id (default: UTC time + config hash)")
    p.add_argument("--redecide", metavar="RUN_ID",
                   help="re-decide a run from its stored scores with --set/--config "
                   "thresholds, as a new run (jobs/redecide.py)")
    return p.parse_args(argv)


def config_from_args(args: argparse.Namespace) -> FilterConfig:
    extra: dict = {}
    if args.pair:
        extra["pair"] = args.pair
    if args.lang:
        extra["lang"] = args.lang
    if args.lake:
        extra["lake"] = {"root": args.lake}
    if args.input:
        if not args.corpus:
            raise ConfigError("--input needs --corpus NAME")
        extra["inputs"] = [
            {"corpus": args.corpus, "paths": args.input, "format": args.format, "where": args.where}
        ]
    elif args.corpus:
        raise ConfigError("--corpus needs --input PATH [PATH]")
    cfg = load_config(args.config, args.set, extra)
    if not cfg.inputs:
        raise ConfigError("no inputs: list them under `inputs:` in the config or pass --input")
    cfg.langs  # noqa: B018 - raises ConfigError when neither pair nor lang is set
    return cfg


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
        parts = partition_cols or []
        write_staged(df, f"{self.dir}/{name}", parts)
        # Read with the written types (not inferred from directory names: a corpus `2019`
        # stays a string) and the partition columns last, as Spark puts them; this also
        # reads back a run with no rows (a refresh that only drops files).
        fields = [f for f in df.schema.fields if f.name not in parts]
        schema = StructType(fields + [df.schema[c] for c in parts])
        return self.spark.read.schema(schema).parquet(f"{self.dir}/{name}")

    def stage(self, name: str) -> AbstractContextManager[None]:
        """Name the Spark jobs of a step after it and log its progress (jobs/progress.py)."""
        corpora = ",".join(sorted({inp.corpus for inp in self.cfg.inputs}))
        return stage(self.spark, "filter", f"{name} {self.cfg.key}/{corpora}")

    def partitions(self) -> int:
        """Enough partitions to keep every core busy to the end of the main stage."""
        cores = self.spark.sparkContext.defaultParallelism
        return max(1, cores * self.cfg.spark.partitions_per_core)

    def pair_scores(self, decided: DataFrame) -> DataFrame:
        """Word alignment and embedding similarity on the rows the rules and dedup kept."""
        cfg = self.cfg
        if not (cfg.align.enabled or cfg.embedding.enabled or cfg.pair_score.enabled):
            return decided
        # Staged, so sampling for the aligner does not recompute the stages before it.
        with self.stage("normalize+rules+langid+dedup"):
            decided = self.staged(decided, "stage_rules")
        if cfg.align.enabled:
            with self.stage(f"aligner (trained on up to {cfg.align.sample_pairs:,} clean pairs)"):
                store = AlignerStore(self.lake, cfg.pair)
                model_dir = choose_aligner(decided, cfg, store, self.run_id)
            log(f"word alignment scores (model {model_dir or 'none: all scores null'})")
            decided = align_stage(decided, cfg, model_dir)
            if cfg.embedding.enabled:  # staged again, or the embed split would align twice
                with self.stage("word alignment"):
                    decided = self.staged(decided, "stage_align")
        if cfg.embedding.enabled:
            enc = cfg.embedding.chosen
            log(f"embedding similarity ({cfg.embedding.encoder}: {enc.backend} {enc.model})")
            model = for_executors(self.spark, enc.model, f"{cfg.embedding.encoder} encoder")
            decided = embed_stage(decided, cfg, model)
        if cfg.pair_score.enabled:
            if cfg.align.enabled or cfg.embedding.enabled:  # the threshold's fit reads them
                with self.stage("embeddings" if cfg.embedding.enabled else "word alignment"):
                    decided = self.staged(decided, "stage_scores")
            log(f"pair_score (model {cfg.pair_score.model})")
            decided, _ = pair_score_stage(decided, cfg, self.lake)
        return decided

    def execute(self, raw: DataFrame) -> list[Flip]:
        lay, key = self.layout, self.layout.key
        with self.stage(f"ingest into {lay.raw}"):
            # Spread by row id: a gzip file is read as one partition.
            spread = raw.repartition(self.partitions(), "row_id")
            parts = [key, "corpus", *self.source_cols]
            raw = lay.inward(self.staged(lay.outward(spread), lay.raw, parts))

        langid = for_executors(self.spark, self.cfg.langid.model, "fastText language-ID model")
        decided = self.deduplicate(
            score_and_decide(normalize_and_analyze(raw, self.cfg, langid), self.cfg)
        )
        decided = self.pair_scores(decided)
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
        return self.finish(raw, decided, lay.outward(raw))

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
        """Duplicates among the run's rows (jobs/stages.py)."""
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


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    run_id = args.run_id or new_run_id(cfg.hash())  # a given one was checked in main()
    # The catalog opens beside the reading of the input (first row seconds sooner); a
    # catalog table as input waits for it.
    spark, lake = open_lake("sluice-filter", cfg, run_id, beside=True)
    if any(inp.format == "table" for inp in cfg.inputs):
        lake.ready()
    if cfg.pair_score.enabled:  # a missing model fails before any work
        load_pair_score_model(lake, cfg.pair, cfg.pair_score.model)
    inputs = [inp.model_dump() for inp in cfg.inputs]
    check_aligner(lake, cfg)  # a missing align.reference fails here, before the run starts
    job = FilterRun(spark, lake, cfg, run_id)
    raw = job.read_inputs()  # input errors (e.g. Moses line counts) fail here: nothing written
    query = f"SELECT * FROM {cfg.lake.database}.filter_stats WHERE run_id = '{run_id}'"
    run_and_commit(spark, lake, cfg, "filter", run_id, inputs, lambda: job.execute(raw), query)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return exit_code(lambda: run_or_redecide(args))


def run_or_redecide(args: argparse.Namespace) -> int:
    if args.run_id:  # a bad --run-id (of a run or a re-decide) fails before Spark starts
        check_run_id(args.run_id)
    if args.redecide:
        from jobs.redecide import redecide

        return redecide(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())

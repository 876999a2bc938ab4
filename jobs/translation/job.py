"""The translate job: back- and forward-translation with CTranslate2 into the lake.

    spark-submit jobs/translate.py --config conf/bt-zh-en.yaml
    spark-submit jobs/translate.py --model models/en-zh-ct2 --direction en-zh \\
        --method sampling [--input-table sluice.mono_clean] [--corpus news] [--limit 1000000]

A run has one or more streams (one model, direction, method and input each; FTST is a
forward stream plus a back stream, balanced by `balance: true` and their weights). Each
stream reads sentences from a lake table (`mono_clean` by default), decodes them on the
executors (udfs/translate.py) and writes `synthetic` (direction, method and parameters, model
id, round, source row id, score) or, with a reason, `synthetic_rejected`; `translate_stats`
counts them. Every selected sentence ends in exactly one of the two; the run checks that
before it commits, and commits like the filter job (all or nothing).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from jobs.kit.cli import add_config, add_input_table, add_lake, add_run_id, lake_extra
from jobs.kit.errors import ConfigError, ConservationError, InputError
from jobs.kit.ingest import union_all
from jobs.kit.progress import log
from jobs.kit.sampling import first_by_hash, hash_buckets
from jobs.lake.models import for_executors
from jobs.lake.runs import job_main, new_run_id, open_lake, run_and_commit
from jobs.lake.store import Flip, Lake, write_staged
from jobs.translation.config import StreamConf, TranslateConfig, load_translate_config
from udfs.ref_scores import ref_scores
from udfs.text_codec import load_codec
from udfs.translate import METHODS, OUTPUT_SCHEMA, decoder, worker_paths

STATS_SCHEMA = (
    "stream string, direction string, role string, method string, model string, "
    "available long, selected long, synthetic long, rejected long, "
    "rejected_by map<string, bigint>, tgt_tokens long, run_id string"
)
STREAM_FLAGS = ("beam_size", "topk", "temperature", "seed", "target_tag")  # = stream keys


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="jobs/translate.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_config(p, "translate-defaults.yaml")
    p.add_argument("--model", help="CTranslate2 model directory: one stream from the flags")
    p.add_argument("--direction", help="with --model: input-output languages, e.g. en-zh")
    p.add_argument("--method", choices=METHODS, help="with --model (default beam)")
    p.add_argument("--role", choices=["back", "forward"], help="with --model (default back)")
    p.add_argument("--beam-size", type=int, help="with --model: beam size (default 4)")
    p.add_argument("--topk", type=int, help="with --model, sampling: top k (default 10)")
    p.add_argument("--temperature", type=float, help="with --model, sampling (default 1.0)")
    p.add_argument("--seed", type=int, help="with --model: sampling/noise seed (default 1)")
    p.add_argument("--target-tag", help="with --model: <2xx> tag of a multilingual model")
    p.add_argument("--name", help="with --model: stream name (default: role-method)")
    add_input_table(p, "with --model: table to read (sluice.mono_clean)")
    p.add_argument("--corpus", action="append", help="with --model: corpus to read (repeat)")
    p.add_argument("--limit", type=int, help="with --model: translate at most this many")
    p.add_argument("--round", type=int, help="back-translation round (stored per row)")
    add_lake(p)
    add_run_id(p)
    return p.parse_args(argv)


def stream_from_flags(args: argparse.Namespace) -> dict:
    if not args.direction:
        raise ConfigError("--model needs --direction (e.g. en-zh)")
    role = args.role or "back"
    method = args.method or "beam"
    stream: dict = {"name": args.name or f"{role}-{method}", "model": args.model,
                    "direction": args.direction, "role": role, "method": method, "input": {}}
    for flag in STREAM_FLAGS:
        if getattr(args, flag) is not None:
            stream[flag] = getattr(args, flag)
    if args.input_table:
        stream["input"]["table"] = args.input_table
    if args.corpus:
        stream["input"]["corpora"] = args.corpus
    if args.limit:
        stream["input"]["limit"] = args.limit
    return stream


def config_from_args(args: argparse.Namespace) -> TranslateConfig:
    extra: dict = {}
    extra.update(lake_extra(args))
    if args.round:
        extra["round"] = args.round
    stream_only = ["direction", "input_table", "corpus", "limit", "name", "method", "role",
                   *STREAM_FLAGS]
    if args.model:
        extra["streams"] = [stream_from_flags(args)]  # replaces the config's streams
    elif any(getattr(args, flag) is not None for flag in stream_only):
        flags = "/".join("--" + f.replace("_", "-") for f in stream_only)
        raise ConfigError(f"{flags} go with --model")
    cfg = load_translate_config(args.config, args.set, extra)
    if not cfg.streams:
        raise ConfigError("nothing to translate: list `streams:` in the config or pass --model")
    return cfg


def model_id(model_dir: str, extra_files: list[str] | None = None) -> str:
    """A hash of every file in the model directory (names and bytes), and of tokenizer files
    kept elsewhere: which model made a row, however the directory is named or copied."""
    digest = hashlib.sha256()
    paths = []
    for root, dirs, files in os.walk(model_dir):
        dirs.sort()
        paths += [os.path.join(root, name) for name in sorted(files)]
    inside = os.path.abspath(model_dir)
    outside = [f for f in extra_files or []
               if os.path.commonpath([inside, os.path.abspath(f)]) != inside]
    for path in paths + outside:
        digest.update(os.path.relpath(path, model_dir).encode() + b"\0")
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


def with_reference_scores(decoded: DataFrame, conf: StreamConf) -> DataFrame:
    """`ref_bleu`/`ref_chrf` of each synthetic sentence against its reference (null without
    one), and the rows under the stream's `reference.min_bleu`/`min_chrf` rejected."""
    ref = conf.reference
    if not ref.column:
        none = F.lit(None).cast("double")
        return decoded.withColumns({"ref_bleu": none, "ref_chrf": none})
    scores = ref_scores(F.col("tgt"), F.col("reference"), conf.langs[1])
    decoded = decoded.withColumn("_ref", scores).withColumns(
        {"ref_bleu": F.col("_ref.ref_bleu"), "ref_chrf": F.col("_ref.ref_chrf")}).drop("_ref")
    reason = F.col("reject_reason")
    for metric, floor in (("ref_bleu", ref.min_bleu), ("ref_chrf", ref.min_chrf)):
        if floor is not None:
            under = reason.isNull() & (F.col(metric) < floor)
            reason = F.when(under, F.lit(metric)).otherwise(reason)
    return decoded.withColumn("reject_reason", reason)


def quotas(available: dict[str, int], limits: dict[str, int | None],
           weights: dict[str, float], balance: bool) -> dict[str, int]:
    """Sentences each stream translates: its available rows capped by its limit, and with
    `balance` scaled down so the streams' inputs stand in the ratio of their weights (their
    outputs follow, less each method's rejects)."""
    capped = {n: min(a, limits[n]) if limits[n] else a for n, a in available.items()}
    if not balance:
        return capped
    scale = min(capped[n] / weights[n] for n in capped)
    return {n: min(capped[n], int(scale * weights[n])) for n in capped}


@dataclass
class Stream:
    conf: StreamConf
    model_dir: str
    model: str  # model id
    rows: DataFrame  # (stream, source_table, source_corpus, source_row_id, src)
    available: int
    buckets: list[tuple[int, int]]  # jobs/sampling.hash_buckets of rows


class TranslateRun:
    def __init__(self, spark: SparkSession, lake: Lake, cfg: TranslateConfig, run_id: str):
        self.spark, self.lake, self.cfg, self.run_id = spark, lake, cfg, run_id
        self.dir = lake.run_dir(run_id)

    # -- inputs --------------------------------------------------------------------------
    def open_stream(self, conf: StreamConf) -> Stream:
        """Check the model and input of a stream (fail before anything is written)."""
        model_dir = for_executors(self.spark, conf.model, f"stream {conf.name}: model")
        files = {k: for_executors(self.spark, v, f"stream {conf.name}: tokenizer {k}")
                 for k in ("source_model", "target_model") if (v := getattr(conf.tokenizer, k))}
        conf = conf.model_copy(update={"tokenizer": conf.tokenizer.model_copy(update=files)})
        try:  # the driver's copy: the path itself, or what --archives/--files unpacked here
            here, codec = worker_paths(self.cfg.decode_spec(conf, model_dir))
        except FileNotFoundError as err:
            raise InputError(f"stream {conf.name}: {err}") from None
        if not os.path.isdir(here):
            raise InputError(f"stream {conf.name}: model directory not found: {conf.model}")
        try:  # the tokenizer settings are checked here, not in the first task
            load_codec(here, codec)
        except (ValueError, OSError, KeyError) as err:
            raise ConfigError(f"stream {conf.name}: tokenizer: {err}") from None
        rows = self.input_rows(conf)
        # The sample's hash histogram counts the rows too: one pass over the input, not two.
        buckets = hash_buckets(rows, conf.input.sample_seed, "source_row_id")
        available = sum(n for _, n in buckets)
        table = self.cfg.input_table(conf)
        log(f"stream {conf.name}: {available:,} sentences available in {table}")
        if available == 0 and self.cfg.balance:
            raise InputError(f"stream {conf.name}: no sentences in {table} for its filters, "
                             "so balance would translate nothing in any stream")
        model = model_id(here, [f for f in (codec.source_model, codec.target_model) if f])
        return Stream(conf, model_dir, model, rows, available, buckets)

    def input_rows(self, conf: StreamConf) -> DataFrame:
        inp, table = conf.input, self.cfg.input_table(conf)
        if not self.spark.catalog.tableExists(table):
            raise InputError(f"stream {conf.name}: no table {table} in the catalog")
        df = self.spark.table(table)
        missing = [c for c in ("row_id", inp.column) if c not in df.columns]
        if missing:
            raise InputError(f"stream {conf.name}: {table} has no column(s) {missing}")
        if "lang" in df.columns:
            df = df.where(F.col("lang") == (inp.lang or conf.langs[0]))
        if inp.corpora:
            df = df.where(F.col("corpus").isin(inp.corpora))
        if inp.where:
            try:
                df = df.where(inp.where)
            except Exception as err:  # AnalysisException: a bad filter
                raise InputError(f"stream {conf.name}: bad where {inp.where!r}: {err}") from None
        corpus = F.col("corpus") if "corpus" in df.columns else F.lit(None).cast("string")
        ref = conf.reference.column
        if ref and ref not in df.columns:
            raise InputError(f"stream {conf.name}: reference.column {ref!r}: {table} has no "
                             f"such column (it has {', '.join(df.columns)})")
        reference = F.col(ref).cast("string") if ref else F.lit(None).cast("string")
        return df.select(
            F.lit(conf.name).alias("stream"),
            F.lit(table).alias("source_table"),
            corpus.alias("source_corpus"),
            F.col("row_id").alias("source_row_id"),
            F.col(inp.column).alias("src"),
            reference.alias("reference"),
        )

    def select(self, streams: list[Stream]) -> DataFrame:
        """Each stream's quota of its rows, exactly: those with the smallest hash of row id
        and `input.sample_seed` (jobs/kit/sampling.py). The same rows on a rerun; streams with the
        same quota and seed of the same input take the same sentences."""
        wanted = quotas(
            {s.conf.name: s.available for s in streams},
            {s.conf.name: s.conf.input.limit for s in streams},
            {s.conf.name: s.conf.weight for s in streams},
            self.cfg.balance,
        )
        frames = []
        for s in streams:
            n = wanted[s.conf.name]
            share = n / s.available if s.available else 0.0
            log(f"stream {s.conf.name}: translating {n:,} ({share:.1%})")
            if n >= s.available:
                frames.append(s.rows)
            else:
                frames.append(first_by_hash(s.rows, n, s.conf.input.sample_seed,
                                            "source_row_id", s.buckets))
        return union_all(frames)

    # -- decoding ------------------------------------------------------------------------
    def decode(self, s: Stream, rows: DataFrame) -> DataFrame:
        spec = self.cfg.decode_spec(s.conf, s.model_dir)
        out_schema = StructType(rows.schema.fields + StructType.fromDDL(OUTPUT_SCHEMA).fields[1:])
        decoded = with_reference_scores(rows.mapInPandas(decoder(spec), out_schema), s.conf)
        c = s.conf
        return decoded.select(
            F.xxhash64(F.lit(self.run_id), "stream", "source_row_id").alias("row_id"),
            "stream",
            F.lit(c.role).alias("role"),
            "src",
            "tgt",
            "hypothesis",
            "score",
            "src_tokens",
            "tgt_tokens",
            "reference",
            "ref_bleu",
            "ref_chrf",
            F.lit(c.method).alias("method"),
            F.lit(json.dumps(c.params(), sort_keys=True)).alias("params"),
            F.lit(s.model).alias("model"),
            F.lit(c.model).alias("model_path"),
            F.lit(self.cfg.round).alias("round"),
            "source_table",
            "source_corpus",
            "source_row_id",
            "reject_reason",
            F.when(F.col("reject_reason").isNull(), "synthetic")
            .otherwise("rejected")
            .alias("outcome"),
            F.lit(c.direction).alias("direction"),
        )

    def execute(self, streams: list[Stream]) -> list[Flip]:
        parts = self.cfg.decoding.partitions or self.spark.sparkContext.defaultParallelism
        log("staging the selected sentences")
        selected = self.select(streams)
        write_staged(selected, f"{self.dir}/translate_input", ["stream"])
        # Spread over `parts` tasks (file splits would pack small inputs into a few), and
        # length-sorted within each, so every Arrow batch holds sentences of similar length.
        # Placement and order follow the row id, not the read order: a sentence meets the same
        # batch neighbours on every run, and float results depend on the batch it is decoded in.
        # The schema is given: a run that selected nothing has no files to infer it from.
        staged = self.spark.read.schema(selected.schema).parquet(f"{self.dir}/translate_input")
        spread = staged.repartition(parts, "source_row_id").sortWithinPartitions(
            F.length("src"), "source_row_id"
        )
        started = time.time()
        decoded = union_all(
            [self.decode(s, spread.where(F.col("stream") == s.conf.name)) for s in streams]
        )
        methods = ", ".join(f"{s.conf.name}: {s.conf.method}" for s in streams)
        log(f"decoding ({methods}) in {parts} tasks per stream")
        write_staged(decoded, f"{self.dir}/synthetic", ["direction", "outcome"])
        seconds = time.time() - started
        result = self.spark.read.schema(decoded.schema).parquet(f"{self.dir}/synthetic")
        stats = self.stats(streams, staged, result)
        self.lake.delete(f"{self.dir}/translate_input")
        write_staged(stats, f"{self.dir}/translate_stats", ["run_id"])
        self.report(stats, seconds)
        self.ensure_tables(result, stats)
        return self.flips(sorted({s.conf.direction for s in streams}))

    # -- counting and committing ---------------------------------------------------------
    def stats(self, streams: list[Stream], staged: DataFrame, result: DataFrame) -> DataFrame:
        """One row per stream; raises ConservationError unless selected = synthetic + rejected.
        `staged` is the selection as written (counted without the decoding's shuffle)."""
        selected = {r.stream: r["count"] for r in staged.groupBy("stream").count().collect()}
        grouped = result.groupBy("stream", "reject_reason").agg(
            F.count("*").alias("n"), F.sum("tgt_tokens").alias("tokens")
        ).collect()
        rows, problems = [], []
        for s in streams:
            name = s.conf.name
            mine = [g for g in grouped if g.stream == name]
            rejected_by = {g.reject_reason: g.n for g in mine if g.reject_reason is not None}
            synthetic = sum(g.n for g in mine if g.reject_reason is None)
            tokens = sum(g.tokens or 0 for g in mine if g.reject_reason is None)
            n_sel = selected.get(name, 0)
            if n_sel != synthetic + sum(rejected_by.values()):
                problems.append(f"{name}: selected {n_sel} != synthetic {synthetic} + "
                                f"rejected {sum(rejected_by.values())}")
            c = s.conf
            rows.append((name, c.direction, c.role, c.method, s.model, s.available, n_sel,
                         synthetic, sum(rejected_by.values()), rejected_by, tokens, self.run_id))
        if problems:
            raise ConservationError("rows were lost or duplicated: " + "; ".join(problems))
        return self.spark.createDataFrame(rows, STATS_SCHEMA)

    def report(self, stats: DataFrame, seconds: float) -> None:
        lines = []
        total = 0
        for r in stats.collect():
            total += r.tgt_tokens
            why = ", ".join(f"{k} {v:,}" for k, v in sorted(r.rejected_by.items())) or "none"
            lines.append(f"  {r.stream:<16} {r.direction} {r.method:<12} selected "
                         f"{r.selected:>9,}  synthetic {r.synthetic:>9,}  rejected {why}")
        rate = total / seconds if seconds else 0.0
        log(f"decoded {total:,} target tokens in {seconds:.1f} s ({rate:,.0f} tokens/s, "
            "incl. writing)\n" + "\n".join(lines))

    def ensure_tables(self, result: DataFrame, stats: DataFrame) -> None:
        rows = result.drop("outcome").withColumn("run_id", F.lit(self.run_id))
        keys = ["direction", "run_id"]
        self.lake.ensure_table("synthetic", rows.drop("reject_reason").schema, keys)
        self.lake.ensure_table("synthetic_rejected", rows.schema, keys)
        self.lake.ensure_table("translate_stats", stats.schema, ["run_id"])

    def flips(self, directions: list[str]) -> list[Flip]:
        lake, stats = self.lake, {"run_id": self.run_id}
        flips = [Flip("translate_stats", stats,
                      f"{self.dir}/translate_stats/{lake.partition_path(stats)}")]
        for direction in directions:
            part = {"direction": direction, "run_id": self.run_id}
            base = f"{self.dir}/synthetic/{lake.partition_path({'direction': direction})}"
            for table, outcome in (("synthetic", "synthetic"), ("synthetic_rejected", "rejected")):
                location = f"{base}/{lake.partition_path({'outcome': outcome})}"
                lake.mkdirs(location)  # a partition with no rows
                flips.append(Flip(table, part, location))
        return flips


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    run_id = args.run_id or new_run_id(cfg.hash())
    spark, lake = open_lake("sluice-translate", cfg, run_id)
    job = TranslateRun(spark, lake, cfg, run_id)
    streams = [job.open_stream(s) for s in cfg.streams]  # bad input fails before any write
    inputs = [{"stream": s.conf.name, "table": cfg.input_table(s.conf), "model": s.model}
              for s in streams]
    query = (f"SELECT method, model, count(*) FROM {cfg.lake.database}.synthetic "
             f"WHERE run_id = '{run_id}' GROUP BY 1, 2")
    run_and_commit(spark, lake, cfg, "translate", run_id, inputs, lambda: job.execute(streams),
                   query)
    return 0


main = job_main(parse_args, run)

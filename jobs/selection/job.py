"""The selection job: score every clean pair (or sentence) against an in-domain seed and
decide which are in-domain.

    spark-submit jobs/select_data.py --config conf/select-zh-en.yaml
    spark-submit jobs/select_data.py --pair de-en --corpus pool --seed dev.de dev.en \\
        --method moore_lewis --top 5000 --lake /data/lake
    spark-submit jobs/select_data.py --lang en --seed news-dev.en --method embedding_knn \\
        --top-percent 10

Methods (jobs/selection/methods.py): moore_lewis, fasttext_domain, embedding_knn, lm_fluency,
kmeans_domains; several are combined by the mean of their ranks. Every input row lands in
`selected` (partitioned by key = pair or language, and run): its provenance, text, the score
of every method, its rank (1 = most in-domain) and whether it is selected; a row that cannot
be scored carries its reason and is never selected. Score, then decide: any other cut is a
`WHERE rank <= N` away. The models (LMs, classifier, seed vectors, centroids) are saved under
`<lake>/models/select/<key>/<name>/` with a manifest, and `--reuse-models NAME` scores with
them again. `select_stats` counts the run; it commits all or nothing, like the filter job.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.kit.cli import add_config, add_input_table, add_lake, add_run_id, job_parser, lake_extra
from jobs.kit.config import check_run_id
from jobs.kit.errors import ConfigError, ConservationError, InputError
from jobs.kit.progress import log, stage
from jobs.lake.runs import job_main, new_run_id, open_lake, run_and_commit
from jobs.lake.store import Flip, Lake, write_staged
from jobs.selection.config import NEEDS_SEED, SelectConfig, load_select_config
from jobs.selection.methods import LOWER_IS_BETTER, METHOD_CLASSES, Context, with_fold
from jobs.selection.ranking import global_rank
from jobs.selection.seed import Seed, read_seed
from jobs.selection.units import METHODS

STATS_SCHEMA = (
    "key string, method string, seed_name string, seed_hash string, models string, "
    "input_rows long, scored long, unscorable map<string, bigint>, selected long, "
    "cut_score double, run_id string"
)
PROVENANCE = ("corpus", "file", "line")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = job_parser("jobs/select_data.py", __doc__)
    add_config(p, "select-defaults.yaml")
    p.add_argument("--pair", help="select pairs of this pair (src-tgt), e.g. zh-en")
    p.add_argument("--lang", help="select monolingual sentences of this language")
    add_input_table(p, "table to select from (default sluice.bitext_clean "
                   "or sluice.mono_clean)")
    p.add_argument("--corpus", action="append", help="corpus of the input to read (repeat)")
    p.add_argument("--where", help="further SQL filter on the input table")
    p.add_argument("--seed", nargs="+", metavar="FILE",
                   help="in-domain seed: a text file (--lang), a Moses pair or one TSV (--pair)")
    p.add_argument("--seed-table", help="in-domain seed from a lake table (with --seed-where)")
    p.add_argument("--seed-where", help="SQL filter on --seed-table")
    p.add_argument("--seed-name", help="name stored with every row (default: the file names)")
    p.add_argument("--method", action="append", choices=METHODS,
                   help="scoring method (repeat to combine; default moore_lewis)")
    p.add_argument("--top", type=int, help="select the N best rows")
    p.add_argument("--top-percent", type=float, help="select the best P%% of scored rows")
    p.add_argument("--models-name", help="save the trained models under this name")
    p.add_argument("--reuse-models", metavar="NAME", help="score with saved models")
    add_lake(p)
    add_run_id(p)
    return p.parse_args(argv)


def config_from_args(args: argparse.Namespace) -> SelectConfig:
    extra: dict = {}
    extra.update(lake_extra(args))
    if args.pair:
        extra |= {"pair": args.pair, "lang": None}
    if args.lang:
        extra |= {"lang": args.lang, "pair": None}
    inp = {k: v for k, v in (("table", args.input_table), ("corpora", args.corpus),
                             ("where", args.where)) if v}
    if inp:
        extra["input"] = inp
    seed: dict = {}
    if args.seed:
        seed |= {"files": args.seed, "table": None, "where": None}
    if args.seed_table:
        seed |= {"table": args.seed_table, "files": [], "where": args.seed_where}
    elif args.seed_where:
        raise ConfigError("--seed-where goes with --seed-table")
    if args.seed_name:
        seed["name"] = args.seed_name
    if seed:
        extra["seed"] = seed
    if args.method:
        extra["methods"] = args.method
    if args.top is not None:
        extra |= {"top": args.top, "top_percent": None}
    if args.top_percent is not None:
        extra |= {"top_percent": args.top_percent, "top": None}
    models = {k: v for k, v in (("name", args.models_name), ("reuse", args.reuse_models)) if v}
    if models:
        extra["models"] = models
    return load_select_config(args.config, args.set, extra)


def method_label(cfg: SelectConfig) -> str:
    if len(cfg.methods) == 1:
        return cfg.methods[0]
    return f"{cfg.combine}({','.join(cfg.methods)})"


class SelectRun:
    def __init__(self, spark: SparkSession, lake: Lake, cfg: SelectConfig, run_id: str):
        self.spark, self.lake, self.cfg, self.run_id = spark, lake, cfg, run_id
        self.dir = lake.run_dir(run_id)
        self.models_root = f"{lake.root}/models/select/{cfg.key}"
        self.models_name = check_run_id(cfg.models.reuse or cfg.models.name or run_id)

    # -- input ---------------------------------------------------------------------------
    def input_rows(self) -> DataFrame:
        """The pool with provenance: row_id, corpus, file, line, src[, tgt]."""
        cfg, table = self.cfg, self.cfg.input_table()
        if not self.spark.catalog.tableExists(table):
            raise InputError(f"input table {table}: not in the catalog (run jobs/filter.py "
                             "first, or give --input-table)")
        df = self.spark.table(table)
        texts = {"src": "text"} if cfg.mono and "text" in df.columns else {}
        needed = ["row_id", *(texts.get(s, s) for s in cfg.sides)]
        missing = [c for c in needed if c not in df.columns]
        if missing:
            raise InputError(f"input table {table} has no column(s) {missing}")
        key_col = "lang" if cfg.mono else "pair"
        if key_col in df.columns:
            df = df.where(F.col(key_col) == cfg.key)
        if cfg.input.corpora:
            df = df.where(F.col("corpus").isin(cfg.input.corpora))
        if cfg.input.where:
            try:
                df = df.where(cfg.input.where)
            except Exception as err:  # AnalysisException: a bad filter
                raise InputError(f"input table {table}: bad where {cfg.input.where!r}: "
                                 f"{err}") from None
        none = F.lit(None).cast("string")
        cols = [F.col(c) if c in df.columns else none.alias(c) for c in PROVENANCE[:2]]
        line = F.col("line").cast("long") if "line" in df.columns else F.lit(None).cast("long")
        return df.select("row_id", *cols, line.alias("line"),
                         *[F.col(texts.get(s, s)).alias(s) for s in cfg.sides])

    # -- models --------------------------------------------------------------------------
    def check_models_name(self) -> None:
        target = f"{self.models_root}/{self.models_name}"
        if self.cfg.models.reuse:
            if self.lake.read_text(f"{target}/manifest.json") is None:
                saved = sorted(p.rsplit("/", 1)[-1] for p in self.lake.list_dir(self.models_root)
                               if not p.rsplit("/", 1)[-1].startswith("."))
                raise ConfigError(f"models {self.models_name!r}: none saved under "
                                  f"{self.models_root} (saved: {', '.join(saved) or 'none'})")
        elif self.lake.exists(target):
            raise ConfigError(f"models {self.models_name!r} already exist under "
                              f"{self.models_root}: give another models.name, or reuse them")

    def reused_manifest(self) -> dict:
        target = f"{self.models_root}/{self.models_name}"
        manifest = json.loads(self.lake.read_text(f"{target}/manifest.json") or "{}")
        missing = [m for m in self.cfg.methods if m not in manifest.get("methods", {})]
        if missing:
            raise ConfigError(f"models {self.models_name!r} hold {sorted(manifest['methods'])},"
                              f" not {missing}")
        if manifest.get("key") != self.cfg.key:
            raise ConfigError(f"models {self.models_name!r} were trained for "
                              f"{manifest.get('key')}, not {self.cfg.key}")
        return manifest

    def train(self, ctx: Context, seed: Seed | None) -> dict:
        entries = {}
        for name in self.cfg.methods:
            with stage(self.spark, "select", f"train {name}"):
                entries[name] = METHOD_CLASSES[name]().train(ctx)
        for local in sorted(os.listdir(ctx.work)):
            self.lake.put(os.path.join(ctx.work, local), f"{ctx.staging}/{local}")
        manifest = {
            "key": self.cfg.key, "methods": entries, "run_id": self.run_id,
            "seed": {"name": seed.name, "hash": seed.digest, "lines": len(seed)} if seed else None,
            "config": {m: getattr(self.cfg, m).model_dump(mode="json") for m in self.cfg.methods},
        }
        self.lake.write_text(f"{ctx.staging}/manifest.json", json.dumps(manifest, indent=1))
        return manifest

    # -- deciding ------------------------------------------------------------------------
    def rank_by(self, scores: DataFrame, order: list[Column], name: str) -> DataFrame:
        """(row_id, name) for the rows with a score, ranked 1..n in `order` (then row_id)."""
        live = scores.where(F.col("reason").isNull())
        ranked = global_rank(live.select("row_id", *[c for c in scores.columns
                                                      if c not in ("row_id", "reason")]),
                             [*order, F.col("row_id")],
                             f"{self.dir}/work/rank{name}", name)
        return ranked.select("row_id", name)

    def decide(self, pool_ids: DataFrame, scored: dict[str, DataFrame], manifest: dict
               ) -> DataFrame:
        """pool row ids + score, scores, reason, rank, selected, domain_cluster, bucket."""
        cfg = self.cfg
        table = pool_ids
        for name, frame in scored.items():
            extra = ["domain_cluster"] if "domain_cluster" in frame.columns else []
            table = table.join(frame.select(
                "row_id", F.col("score").alias(f"_s_{name}"),
                F.col("reason").alias(f"_r_{name}"), *extra), "row_id", "left")
        reasons = [F.when(F.col(f"_r_{m}").isNotNull(), F.concat(F.lit(f"{m}: "), f"_r_{m}"))
                   for m in cfg.methods]
        unscored = [F.when(F.col(f"_s_{m}").isNull(), F.lit(f"{m}: not_scored"))
                    for m in cfg.methods]
        table = table.withColumn("reason", F.coalesce(*reasons, *unscored))
        write_staged(table, f"{self.dir}/work/joined", [])
        table = self.spark.read.parquet(f"{self.dir}/work/joined")
        live = table.where(F.col("reason").isNull()).count()
        n_cut, cut_rule = self.cut(live, manifest)
        if len(cfg.methods) == 1:
            (m,) = cfg.methods
            table = table.withColumn("score", F.col(f"_s_{m}"))
            direction = F.col("score").asc() if m in LOWER_IS_BETTER else F.col("score").desc()
            order = [direction]
        else:  # rank_mean: the mean of each method's rank over the scored rows, as a share
            table = table.join(self.method_ranks(table, live), "row_id", "left")
            ranks_sum = sum((F.col("_ranks")[m] for m in cfg.methods), F.lit(0))
            table = table.withColumn("score", ranks_sum / F.lit(len(cfg.methods) * max(1, live)))
            order = [F.col("score").asc()]
        write_staged(table, f"{self.dir}/work/decided", [])
        table = self.spark.read.parquet(f"{self.dir}/work/decided")
        ranks = self.rank_by(table.select("row_id", "score", "reason"), order, "rank")
        table = table.join(ranks, "row_id", "left")
        if "lm_fluency" in cfg.methods:
            table = self.with_buckets(table, live)
        if n_cut is not None:
            selected = F.col("rank") <= n_cut
        else:
            assert cut_rule is not None
            column, values = cut_rule
            selected = F.col(column).isin(values)
        scores_map = F.create_map(*[x for m in cfg.methods
                                    for x in (F.lit(m), F.col(f"_s_{m}"))])
        none = F.lit(None)
        return table.select(
            "row_id", "score", scores_map.alias("scores"), "rank",
            F.coalesce(selected & F.col("reason").isNull(), F.lit(False)).alias("selected"),
            "reason",
            (F.col("domain_cluster") if "domain_cluster" in table.columns
             else none.cast("int")).alias("domain_cluster"),
            (F.col("fluency_bucket") if "fluency_bucket" in table.columns
             else none.cast("string")).alias("fluency_bucket"),
        )

    def method_ranks(self, table: DataFrame, live: int) -> DataFrame:
        """(row_id, _ranks: method -> rank among the scored rows) in one sort: the methods'
        scores stacked, each oriented so that ascending is better, ranked by (method, score,
        row_id); method i's ranks are then the global ranks less i x live."""
        scored = table.where(F.col("reason").isNull())
        stacked = None
        for i, m in enumerate(self.cfg.methods):
            s = F.col(f"_s_{m}")
            part = scored.select(F.lit(i).alias("_m"), "row_id",
                                 (s if m in LOWER_IS_BETTER else -s).alias("_o"))
            stacked = part if stacked is None else stacked.unionByName(part)
        assert stacked is not None
        ranked = global_rank(stacked, [F.col("_m"), F.col("_o"), F.col("row_id")],
                             f"{self.dir}/work/method_ranks", "_g")
        names = F.element_at(F.array(*[F.lit(m) for m in self.cfg.methods]), F.col("_m") + 1)
        own = F.struct(names.alias("method"), (F.col("_g") - F.col("_m") * live).alias("rank"))
        return ranked.groupBy("row_id").agg(F.map_from_entries(F.collect_list(own))
                                            .alias("_ranks"))

    def with_buckets(self, table: DataFrame, live: int) -> DataFrame:
        """cc_net buckets from lm_fluency's own rank among the scored rows."""
        b = self.cfg.lm_fluency.buckets
        rank = F.col("_ranks")["lm_fluency"] if "_ranks" in table.columns else F.col("rank")
        share = rank / F.lit(max(live, 1))
        bucket = (F.when(share <= b["head"], "head").when(share <= b["middle"], "middle")
                  .when(share.isNotNull(), "tail"))
        return table.withColumn("fluency_bucket", bucket)

    def cut(self, scorable: int, manifest: dict) -> tuple[int | None, tuple[str, list] | None]:
        cfg = self.cfg
        if cfg.top is not None:
            if cfg.top > scorable:
                raise InputError(f"--top {cfg.top:,} is larger than the pool's {scorable:,} "
                                 "scorable rows")
            return cfg.top, None
        if cfg.top_percent is not None:
            return math.ceil(cfg.top_percent / 100 * scorable), None
        if cfg.methods == ["kmeans_domains"]:
            return None, ("domain_cluster", manifest["methods"]["kmeans_domains"]["seed_clusters"])
        return None, ("fluency_bucket", list(cfg.lm_fluency.keep))

    # -- the run -------------------------------------------------------------------------
    def execute(self, pool: DataFrame, pool_rows: int, seed: Seed | None) -> list[Flip]:
        cfg = self.cfg
        reuse = cfg.models.reuse is not None
        final_models = f"{self.models_root}/{self.models_name}"
        staging = final_models if reuse else f"{self.models_root}/.staging-{self.run_id}"
        texts = with_fold(pool.select("row_id", *cfg.sides))
        with tempfile.TemporaryDirectory(prefix="sluice-select-") as work:
            ctx = Context(self.spark, self.lake, cfg, texts, pool_rows, seed, work, staging,
                          self.dir)
            manifest = self.reused_manifest() if reuse else self.train(ctx, seed)
            scored = {}
            for name in cfg.methods:
                with stage(self.spark, "select", f"score {name}"):
                    frame = METHOD_CLASSES[name]().score(ctx, manifest["methods"][name])
                    write_staged(frame, f"{self.dir}/work/scores/{name}", [])
                scored[name] = self.spark.read.parquet(f"{self.dir}/work/scores/{name}")
        with stage(self.spark, "select", "rank and decide"):
            decided = self.decide(pool.select("row_id"), scored, manifest)
            seed_facts = manifest.get("seed") or {}
            rows = pool.join(decided, "row_id", "left").select(
                "row_id", *PROVENANCE,
                *([F.lit(None).cast("string").alias("src"), F.lit(None).cast("string")
                   .alias("tgt"), F.col("src").alias("text")] if cfg.mono
                  else ["src", "tgt", F.lit(None).cast("string").alias("text")]),
                F.lit(method_label(cfg)).alias("method"),
                F.lit(seed_facts.get("name")).cast("string").alias("seed_name"),
                F.lit(seed_facts.get("hash")).cast("string").alias("seed_hash"),
                "score", "scores", "rank", "selected", "reason", "domain_cluster",
                "fluency_bucket", F.lit(cfg.key).alias("key"),
            )
            write_staged(rows, f"{self.dir}/selected", ["key"])
        result = self.spark.read.parquet(f"{self.dir}/selected")
        stats = self.stats(result, pool_rows, seed_facts)
        self.lake.delete(f"{self.dir}/work")  # scores, ranks and vectors on the way
        write_staged(stats, f"{self.dir}/select_stats", ["run_id"])
        self.ensure_tables(result, stats)
        if not reuse:  # the models appear whole, under their name, before the commit
            self.lake.rename(staging, final_models)
        return self.flips()

    def stats(self, result: DataFrame, pool_rows: int, seed: dict) -> DataFrame:
        """One row; raises ConservationError unless every pool row is there exactly once."""
        counts = result.agg(
            F.count("*").alias("rows"), F.countDistinct("row_id").alias("ids"),
            F.sum(F.col("reason").isNull().cast("long")).alias("scored"),
            F.sum(F.col("selected").cast("long")).alias("selected"),
            F.max(F.when(F.col("selected"), F.col("rank"))).alias("last"),
        ).first()
        if counts.rows != pool_rows or counts.ids != pool_rows:
            raise ConservationError(f"rows were lost or duplicated: pool {pool_rows:,}, "
                                    f"selected table {counts.rows:,} ({counts.ids:,} ids)")
        why = {r.reason.split(":")[-1].strip(): r["count"] for r in result.where(
            F.col("reason").isNotNull()).groupBy("reason").count().collect()}
        cut = result.where(F.col("rank") == counts["last"]).select("score").first()
        log(f"selected {counts.selected or 0:,} of {pool_rows:,} rows "
            f"({method_label(self.cfg)}); unscorable: "
            + (", ".join(f"{k} {v:,}" for k, v in sorted(why.items())) or "none"))
        row = (self.cfg.key, method_label(self.cfg), seed.get("name"), seed.get("hash"),
               self.models_name, pool_rows, counts.scored or 0, why, counts.selected or 0,
               cut.score if cut else None, self.run_id)
        return self.spark.createDataFrame([row], STATS_SCHEMA)

    def ensure_tables(self, result: DataFrame, stats: DataFrame) -> None:
        rows = result.withColumn("run_id", F.lit(self.run_id))
        self.lake.ensure_table("selected", rows.schema, ["key", "run_id"])
        self.lake.ensure_table("select_stats", stats.schema, ["run_id"])

    def flips(self) -> list[Flip]:
        lake, stats = self.lake, {"run_id": self.run_id}
        key = {"key": self.cfg.key}
        return [
            Flip("select_stats", stats, f"{self.dir}/select_stats/{lake.partition_path(stats)}"),
            Flip("selected", {**key, "run_id": self.run_id},
                 f"{self.dir}/selected/{lake.partition_path(key)}"),
        ]


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    cfg = config_from_args(args)
    run_id = args.run_id or new_run_id(cfg.hash())
    spark, lake = open_lake("sluice-select", cfg, run_id)
    job = SelectRun(spark, lake, cfg, run_id)
    job.check_models_name()
    # Bad input fails before anything is written: the pool, the cut, the seed.
    pool = job.input_rows()
    pool_rows = pool.count()
    if pool_rows == 0:
        raise InputError(f"input table {cfg.input_table()}: no rows for {cfg.key}"
                         + (f" in corpora {cfg.input.corpora}" if cfg.input.corpora else ""))
    if cfg.top is not None and cfg.top > pool_rows:
        raise InputError(f"--top {cfg.top:,} is larger than the pool ({pool_rows:,} rows of "
                         f"{cfg.input_table()})")
    wants_seed = not cfg.models.reuse and any(m in NEEDS_SEED for m in cfg.methods)
    seed = read_seed(spark, cfg) if wants_seed else None
    if seed:
        log(f"seed {seed.name}: {len(seed):,} lines (sha256 {seed.digest})")
    inputs = [{"table": cfg.input_table(), "rows": pool_rows, "seed": seed.name if seed else None,
               "seed_hash": seed.digest if seed else None, "models": job.models_name}]
    query = (f"SELECT method, selected, count(*) FROM {cfg.lake.database}.selected "
             f"WHERE run_id = '{run_id}' GROUP BY 1, 2")
    run_and_commit(spark, lake, cfg, "select", run_id, inputs,
                   lambda: job.execute(pool, pool_rows, seed), query)
    log(f"select: {time.monotonic() - started:.0f} s")
    return 0


main = job_main(parse_args, run)

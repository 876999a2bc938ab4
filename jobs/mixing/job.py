"""The mix job: training mixtures from lake tables.

    spark-submit jobs/mix.py --config conf/mix-multi-en.yaml
    spark-submit jobs/mix.py --register-eval wmt22 --pair zh-en --input test.zh test.en

A mixture (conf/mix-*.yaml) lists sources: lake tables (bitext_clean, synthetic, selected,
...) with a `where`, a direction and a weight, fixed count or share, or dev sets registered
in the lake (fine-tuning, with target-side noise). Rows of test sets are removed first
(jobs/mixing/decontaminate.py); then each source is drawn its exact count
(jobs/mixing/sampling.py: temperature over directions or sources, synthetic shares, caps;
copies for up-sampling), tagged (jobs/mixing/tags.py) and staged; stages of a denoising
curriculum keep the rows at or above rising quantiles of a score. Output: `mixture`
(partitioned by mixture and stage, with provenance: source, table, corpus, row_id, run,
tags, copy) and `mixture_stats` (per source: available, decontaminated, eligible, sampled,
effective weight, epochs), committed all or nothing like every job. `--register-eval`
writes one set into `eval_sets` (partition `name`), which every later mixture excludes (a
mixture's own `eval_sets:` section registers sets in its run, before it mixes).

Training reads a mixture as Parquet: `python -m training.train --config ... --mixture
NAME[:STAGE] --lake ROOT`."""

from __future__ import annotations

import argparse
import time

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from jobs.kit.cli import add_config, add_lake, add_run_id, job_parser, lake_extra
from jobs.kit.config import check_name, known_pair
from jobs.kit.errors import ConfigError, ConservationError, InputError
from jobs.kit.ingest import union_all
from jobs.kit.labelled_pairs import read_moses
from jobs.kit.progress import log, stage
from jobs.lake.runs import job_main, new_run_id, open_lake, run_and_commit
from jobs.lake.store import Flip, Lake, write_staged
from jobs.mixing.config import MixConfig, SourceConf, load_mix_config
from jobs.mixing.decontaminate import EVAL_SCHEMA, contamination, norm_col
from jobs.mixing.sampling import Plan, draw, plan, thresholds
from jobs.mixing.tags import source_tags, tag_columns
from udfs.noise import Noise, noise_text

STATS_SCHEMA = (
    "mixture string, source string, direction string, source_table string, synthetic boolean,"
    " available long, decontaminated long, decontaminated_by map<string, bigint>,"
    " flagged long, eligible long, weight double, planned long, sampled long,"
    " distinct_rows long, effective_weight double, epochs double,"
    " stage_rows map<int, bigint>, run_id string"
)
POOL_COLUMNS = ("source", "direction", "synthetic", "source_table", "corpus", "row_id",
                "source_run_id", "src", "tgt", "score", "_key")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = job_parser("jobs/mix.py", __doc__)
    add_config(p, "mix-defaults.yaml")
    p.add_argument("--name", help="the mixture's name (= --set name=NAME)")
    p.add_argument("--register-eval", metavar="NAME",
                   help="register an eval set (with --pair, --input SRC TGT) instead of mixing")
    p.add_argument("--pair", help="with --register-eval: the set's pair, e.g. zh-en")
    p.add_argument("--input", nargs=2, metavar=("SRC", "TGT"),
                   help="with --register-eval: the set's source and target files (one "
                        "segment a line)")
    p.add_argument("--role", choices=["test", "dev"], default="test",
                   help="with --register-eval: test sets are kept out of every mixture; dev "
                        "sets too when named in decontaminate.sets, and may be fine-tuned on")
    add_lake(p)
    add_run_id(p)
    return p.parse_args(argv)


def config_from_args(args: argparse.Namespace) -> MixConfig:
    extra: dict = dict(lake_extra(args))
    if args.name:
        extra["name"] = args.name
    return load_mix_config(args.config, args.set, extra)


# -- eval sets -----------------------------------------------------------------------------
def read_eval_files(src: str, tgt: str) -> list[tuple[int, str, str]]:
    """(line, source, target) of a Moses-style file pair; the files must line up."""
    return [(i, a.strip(), b.strip()) for i, (a, b) in enumerate(read_moses(src, tgt), 1)]


def eval_frame(spark: SparkSession, name: str, pair: str, role: str,
               rows: list[tuple[int, str, str]], run_id: str) -> DataFrame:
    """One eval set's segments as `eval_sets` holds them (a row per side and line)."""
    langs = pair.split("-")
    data = [(pair, role, side, langs[k], line, text, run_id, name)
            for line, *texts in rows
            for k, (side, text) in enumerate(zip(("src", "tgt"), texts, strict=True)) if text]
    frame = spark.createDataFrame(
        data, "pair string, role string, side string, lang string, line long, text string, "
              "run_id string, name string")
    return frame.withColumn("norm", norm_col(F.col("text"))).select(
        *[c.split()[0] for c in EVAL_SCHEMA.split(", ")])


def stage_eval_sets(lake: Lake, frame: DataFrame, names: list[str], run_id: str
                    ) -> list[Flip]:
    """Stage eval sets under the run; the flips that publish each (its `name` partition)."""
    staged = f"{lake.run_dir(run_id)}/eval_sets"
    write_staged(frame, staged, ["name"])
    lake.ensure_table("eval_sets", frame.schema, ["name"])
    return [Flip("eval_sets", {"name": n}, f"{staged}/{lake.partition_path({'name': n})}")
            for n in names]


def register_eval(args: argparse.Namespace) -> int:
    name = check_name("eval set name", args.register_eval)
    if not args.pair or not args.input:
        raise ConfigError("--register-eval needs --pair and --input SRC TGT")
    try:
        known_pair(args.pair)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    rows = read_eval_files(*args.input)
    if not rows:
        raise InputError(f"{args.input[0]}: no segments")
    cfg = config_from_args(args)
    run_id = args.run_id or new_run_id(cfg.hash())
    spark, lake = open_lake("sluice-mix", cfg, run_id)
    frame = eval_frame(spark, name, args.pair, args.role, rows, run_id)

    def execute() -> list[Flip]:
        return stage_eval_sets(lake, frame, [name], run_id)

    inputs = [{"eval_set": name, "pair": args.pair, "role": args.role, "files": args.input,
               "segments": len(rows)}]
    query = (f"SELECT name, role, side, count(*) FROM {cfg.lake.database}.eval_sets "
             "GROUP BY 1, 2, 3")
    run_and_commit(spark, lake, cfg, "register-eval", run_id, inputs, execute, query)
    log(f"eval set {name}: {len(rows):,} segments of {args.pair} ({args.role})")
    return 0


# -- the mixture ---------------------------------------------------------------------------
class MixRun:
    def __init__(self, spark: SparkSession, lake: Lake, cfg: MixConfig, run_id: str):
        self.spark, self.lake, self.cfg, self.run_id = spark, lake, cfg, run_id
        self.dir = lake.run_dir(run_id)
        self.name = cfg.name or ""
        self.scored: list[str] = []  # sources whose table has the stages' score column
        self.new_evals: DataFrame | None = None  # eval sets this run registers
        self.evals: DataFrame | None = None  # all eval sets (`registered`)

    def open_evals(self, files: dict[str, list[tuple[int, str, str]]]) -> None:
        """The eval sets this run registers (`files`: their segments, read before Spark)."""
        frames = [eval_frame(self.spark, e.name, e.pair, e.role, files[e.name], self.run_id)
                  for e in self.cfg.eval_sets]
        self.new_evals = union_all(frames) if frames else None
        self.evals = self.registered()

    def table(self, name: str) -> DataFrame:
        if not self.spark.catalog.tableExists(name):
            raise InputError(f"table {name}: not in the catalog")
        return self.spark.table(name)

    def source_rows(self, s: SourceConf) -> DataFrame:
        """A source's rows in the pool's shape; bad tables, columns and filters fail here."""
        table = self.cfg.table_name(s)
        if s.eval_set is not None:
            if self.evals is None:
                raise InputError(f"source {s.name}: no eval set is registered in {table}")
            return self.eval_rows(s, self.evals, table)
        df = self.table(table)
        missing = [c for c in ("row_id", "src", "tgt") if c not in df.columns]
        if missing:
            raise InputError(f"source {s.name}: {table} has no column(s) {missing}")
        for column in ("pair", "direction", "key"):  # bitext / synthetic / selected
            if column in df.columns:
                df = df.where(F.col(column) == s.table_direction)
                break
        if s.where:
            try:
                df = df.where(s.where)
            except Exception as err:  # AnalysisException: a bad filter
                raise InputError(f"source {s.name}: bad where {s.where!r}: "
                                 f"{str(err).splitlines()[0]}") from None
        src, tgt = ("tgt", "src") if s.swap else ("src", "tgt")
        corpus = next((F.col(c) for c in ("corpus", "source_corpus") if c in df.columns),
                      F.lit(None).cast("string"))
        run = F.col("run_id") if "run_id" in df.columns else F.lit(None).cast("string")
        key = F.xxhash64("row_id", "run_id") if "run_id" in df.columns else F.col("row_id")
        return df.select(*self.shaped(s, table, corpus, F.col("row_id").cast("long"), run,
                                      F.col(src), F.col(tgt), df.columns, key))

    def eval_rows(self, s: SourceConf, df: DataFrame, table: str) -> DataFrame:
        """A registered dev set as pairs (its two sides joined on the line)."""
        sides = df.where((F.col("name") == s.eval_set) & (F.col("pair") == s.table_direction))
        if not sides.limit(1).collect():
            raise InputError(f"source {s.name}: no eval set {s.eval_set!r} of pair "
                             f"{s.table_direction} is registered in {table}")
        a = sides.where(F.col("side") == "src").select("line", "run_id", F.col("text").alias("a"))
        b = sides.where(F.col("side") == "tgt").select("line", F.col("text").alias("b"))
        pairs = a.join(b, "line")
        src, tgt = ("b", "a") if s.swap else ("a", "b")
        return pairs.select(*self.shaped(
            s, table, F.lit(s.eval_set), F.col("line").cast("long"), F.col("run_id"),
            F.col(src), F.col(tgt), [], F.xxhash64(F.lit(s.eval_set), "line")))

    def shaped(self, s: SourceConf, table: str, corpus: Column, row_id: Column, run: Column,
               src: Column, tgt: Column, columns: list[str], key: Column) -> list[Column]:
        score_col = self.cfg.stages.column
        score = F.lit(None).cast("double")
        if score_col and score_col in columns:
            score = F.col(score_col).cast("double")
            self.scored.append(s.name)
        return [F.lit(s.name).alias("source"), F.lit(s.direction).alias("direction"),
                F.lit(self.cfg.is_synthetic(s)).alias("synthetic"),
                F.lit(table).alias("source_table"), corpus.alias("corpus"),
                row_id.alias("row_id"), run.alias("source_run_id"), src.alias("src"),
                tgt.alias("tgt"), score.alias("score"), key.alias("_key")]

    def registered(self) -> DataFrame | None:
        """Every eval set: those in the lake, and those this run registers (they replace
        sets of the same name)."""
        table = f"{self.cfg.lake.database}.eval_sets"
        frames = []
        if self.spark.catalog.tableExists(table):
            own = [e.name for e in self.cfg.eval_sets]
            frames.append(self.table(table).where(~F.col("name").isin(*own)) if own
                          else self.table(table))
        if self.new_evals is not None:
            frames.append(self.new_evals)
        return union_all(frames) if frames else None

    def eval_sets(self) -> DataFrame | None:
        """The eval segments every row is checked against (None: nothing to check)."""
        dc = self.cfg.decontaminate
        if not dc.enabled:
            return None
        evals = self.evals
        if evals is None:
            if dc.sets:
                raise InputError(f"decontaminate.sets {dc.sets}: no eval set is registered "
                                 "(jobs/mix.py --register-eval NAME --pair P --input SRC TGT)")
            log("decontaminate: no eval sets registered; nothing to check against")
            return None
        if dc.sets is None:
            return evals.where(F.col("role") == "test")
        known = {r.name for r in evals.select("name").distinct().collect()}
        unknown = sorted(set(dc.sets) - known)
        if unknown:
            raise InputError(f"decontaminate.sets: {unknown} not registered "
                             f"(registered: {', '.join(sorted(known)) or 'none'})")
        return evals.where(F.col("name").isin(dc.sets))

    def pool(self) -> DataFrame:
        frames = [self.source_rows(s) for s in self.cfg.sources]
        st = self.cfg.stages
        if st.scored and not self.scored:
            raise InputError(f"stages.column {st.column!r}: no source's table has it, so "
                             "every stage would hold every row")
        return union_all(frames)

    # -- the run ---------------------------------------------------------------------------
    def execute(self, pool: DataFrame, evals: DataFrame | None) -> list[Flip]:
        cfg = self.cfg
        with stage(self.spark, "mix", "decontaminate"):
            checked = self.decontaminate(pool, evals)
            write_staged(checked, f"{self.dir}/work/pool", [])
        checked = self.spark.read.parquet(f"{self.dir}/work/pool")
        facts = self.count_pool(checked)
        eligible = {name: f["eligible"] for name, f in facts.items()}
        plans = plan(cfg, eligible)
        for p in plans.values():
            log(f"source {p.source}: {p.eligible:,} eligible rows, drawing {p.count:,}"
                + (f" (planned {p.planned:,}, capped)" if p.planned != p.count else ""))
        with stage(self.spark, "mix", "draw"):
            drawn = draw(self.spark, checked.where(~F.col("_excluded")), plans, cfg.seed)
            write_staged(self.finish(drawn), f"{self.dir}/work/drawn", [])
        drawn = self.spark.read.parquet(f"{self.dir}/work/drawn")
        counts = {r.source: (r.n, r.distinct) for r in drawn.groupBy("source").agg(
            F.count("*").alias("n"),
            F.sum((F.col("copy") == 0).cast("long")).alias("distinct")).collect()}
        with stage(self.spark, "mix", "stages"):
            staged = self.stages(drawn)
            write_staged(staged, f"{self.dir}/mixture", ["mixture", "stage"])
        # Read with the written schema: a partition value like `2024` must stay a string.
        result = self.spark.read.schema(staged.schema).parquet(f"{self.dir}/mixture")
        stats = self.stats(result, facts, plans, counts)
        self.lake.delete(f"{self.dir}/work")
        write_staged(stats, f"{self.dir}/mixture_stats", ["run_id"])
        self.lake.ensure_table("mixture", result.schema, ["mixture", "stage"])
        self.lake.ensure_table("mixture_stats", stats.schema, ["run_id"])
        flips = self.flips()
        if self.new_evals is not None:
            names = [e.name for e in self.cfg.eval_sets]
            flips = stage_eval_sets(self.lake, self.new_evals, names, self.run_id) + flips
        return flips

    def decontaminate(self, pool: DataFrame, evals: DataFrame | None) -> DataFrame:
        """The pool with `_excluded` and `contamination` (the eval sets of a flagged row)."""
        dc = self.cfg.decontaminate
        empty = F.array().cast("array<string>")
        if evals is None:
            return pool.select("*", F.lit(False).alias("_excluded"), empty.alias("_exact"),
                               empty.alias("_overlap"), empty.alias("contamination"))
        langs = F.split("direction", "-")
        rows = pool.withColumn("_uid", F.xxhash64("source", "_key")).withColumn(
            "_src_lang", langs[0]).withColumn("_tgt_lang", langs[1])
        out = contamination(rows, evals, dc.ngram, dc.min_containment)
        own = {s.name: s.eval_set for s in self.cfg.sources if s.eval_set is not None}
        if own:  # a dev set fine-tuned on is not contamination of itself
            mine = F.array(F.create_map(*[F.lit(x) for kv in own.items() for x in kv])
                           [F.col("source")])
            for column in ("_exact", "_overlap"):
                out = out.withColumn(column, F.array_except(column, mine))
        hit = F.size("_overlap") > 0
        exclude = F.size("_exact") > 0
        if dc.ngram_action == "exclude":
            exclude = exclude | hit
        flagged = F.when(hit & ~exclude, F.col("_overlap")).otherwise(empty)
        return out.select(*POOL_COLUMNS, exclude.alias("_excluded"), "_exact", "_overlap",
                          flagged.alias("contamination"))

    def count_pool(self, checked: DataFrame) -> dict[str, dict]:
        """Per source: available, decontaminated (and by which sets), flagged, eligible."""
        removed = F.when(F.col("_excluded"), F.array_union(
            F.col("_exact"), F.col("_overlap") if self.cfg.decontaminate.ngram_action ==
            "exclude" else F.array().cast("array<string>")))
        by_set: dict[str, dict[str, int]] = {}
        for r in (checked.where(F.col("_excluded"))
                  .select("source", F.explode(removed).alias("set"))
                  .groupBy("source", "set").count().collect()):
            by_set.setdefault(r.source, {})[r.set] = r["count"]
        counted = {r.source: r for r in checked.groupBy("source").agg(
            F.count("*").alias("available"),
            F.sum(F.col("_excluded").cast("long")).alias("excluded"),
            F.sum((F.size("contamination") > 0).cast("long")).alias("flagged")).collect()}
        facts = {}
        for s in self.cfg.sources:
            r = counted.get(s.name)
            available, excluded = (r.available, r.excluded) if r else (0, 0)
            if not available:
                log(f"WARNING source {s.name}: no rows in {self.cfg.table_name(s)} for its "
                    "direction and filter")
            facts[s.name] = {"available": available, "decontaminated": excluded,
                             "by_set": by_set.get(s.name, {}), "flagged": r.flagged if r else 0,
                             "eligible": available - excluded}
            if excluded:
                sets = ", ".join(f"{k} {v:,}" for k, v in sorted(facts[s.name]["by_set"].items()))
                log(f"source {s.name}: {excluded:,} rows of {available:,} removed as "
                    f"contaminated ({sets})")
        return facts

    def finish(self, drawn: DataFrame) -> DataFrame:
        """Tags on the source side, noise on the target side where asked."""
        cfg = self.cfg
        by_source = {s.name: source_tags(cfg.tags, s.langs[1], cfg.is_synthetic(s))
                     for s in cfg.sources}
        src, applied = tag_columns(by_source)
        noisy = {s.name: (s.langs[1], Noise(**s.noise.model_dump())) for s in cfg.sources
                 if s.noise is not None}
        columns = [src.alias("src"), F.col("tgt"), "direction", "source", "source_table",
                   "corpus", "row_id", "source_run_id", "synthetic", applied.alias("tags"),
                   F.col("copy"), F.lit(False).alias("noised"), "score", "contamination", "_key"]
        if not noisy:
            return drawn.select(*columns)
        seed = cfg.seed

        def noised_text(text, name, key):  # no hints: pyspark would take it for pandas
            return noise_text(text, noisy[name][0], noisy[name][1], seed, key) if text else text

        # Only the noisy sources' rows go through Python (Spark evaluates a Python UDF on
        # every row, even under `when`); the others pass by in the JVM.
        to_noise = F.col("source").isin(*noisy)
        noised = drawn.where(to_noise).select(*columns).withColumn(
            "tgt", F.udf(noised_text, StringType())(F.col("tgt"), F.col("source"),
                                                     F.xxhash64("_key", "copy"))
        ).withColumn("noised", F.lit(True))
        return drawn.where(~to_noise).select(*columns).unionByName(noised)

    def stages(self, drawn: DataFrame) -> DataFrame:
        """The rows of each stage (jobs/mixing/config.py `StagesConf`): by a quantile of the
        score (per direction or over the mixture) or an absolute floor, and the stage's own
        directions and sources; with nothing set one stage holds every row."""
        st = self.cfg.stages
        base = drawn.withColumn("mixture", F.lit(self.name)).withColumn(
            "run_id", F.lit(self.run_id))
        group = F.col("direction") if st.per == "direction" else F.lit("all")
        floors = self.stage_floors(drawn, group) if st.scored else {}
        frames = []
        for k in range(st.count):
            keep = F.lit(True)
            if floors:
                lookup = F.create_map(*[x for g, values in floors.items()
                                        for x in (F.lit(g), F.lit(values[k]).cast("double"))])
                floor = lookup[group if st.quantiles else F.col("direction")]
                scored = F.coalesce(floor.isNull() | (F.col("score") >= floor), F.lit(False))
                keep = scored | F.col("score").isNull() if st.unscored == "keep" else \
                    scored & F.col("score").isNotNull()
            for column, chosen in (("direction", st.directions), ("source", st.sources)):
                if chosen and chosen[k] is not None:
                    keep = keep & F.col(column).isin(*chosen[k])
            frames.append(base.where(keep).withColumn("stage", F.lit(k + 1)))
        return union_all(frames).drop("_key")

    def stage_floors(self, drawn: DataFrame, group: Column) -> dict[str, list[float | None]]:
        """Each group's floor of the score in each stage (None: no floor), logged."""
        st = self.cfg.stages
        if st.quantiles:
            distinct = drawn.where(F.col("copy") == 0).withColumn("_g", group)  # each row once
            floors = thresholds(distinct, "_g", "score", st.quantiles)
        else:  # absolute: one list, or per direction over it
            directions = sorted({s.direction for s in self.cfg.sources})
            default = st.floors or [None] * st.count
            floors = {d: st.floors_by_direction.get(d, default) for d in directions}
        for g, values in sorted(floors.items()):
            shown = ", ".join("-" if v is None else f"{v:.4g}" for v in values)
            log(f"stages of {g}: {st.column} >= {shown}")
        return floors

    def stats(self, result: DataFrame, facts: dict[str, dict], plans: dict[str, Plan],
              counts: dict[str, tuple[int, int]]) -> DataFrame:
        """One row per source; raises ConservationError unless every source was drawn its
        planned count exactly (`counts`: rows drawn and distinct rows, per source)."""
        per_stage: dict[str, dict[int, int]] = {}
        for r in result.groupBy("source", "stage").count().collect():
            per_stage.setdefault(r.source, {})[r.stage] = r["count"]
        total = sum(p.count for p in plans.values())
        rows, problems = [], []
        for s in self.cfg.sources:
            p, f = plans[s.name], facts[s.name]
            sampled, distinct = counts.get(s.name, (0, 0))
            if sampled != p.count or distinct != min(p.count, p.eligible):
                problems.append(f"{s.name}: drew {sampled:,} ({distinct:,} distinct), "
                                f"planned {p.count:,}")
            rows.append((self.name, s.name, s.direction, self.cfg.table_name(s),
                         self.cfg.is_synthetic(s), f["available"], f["decontaminated"],
                         f["by_set"], f["flagged"], f["eligible"], s.weight, p.planned,
                         sampled, distinct, sampled / total if total else 0.0,
                         sampled / p.eligible if p.eligible else 0.0,
                         per_stage.get(s.name, {}), self.run_id))
        if problems:
            raise ConservationError("the mixture's counts are off: " + "; ".join(problems))
        return self.spark.createDataFrame(rows, STATS_SCHEMA)

    def flips(self) -> list[Flip]:
        lake, part = self.lake, {"mixture": self.name}
        flips = []
        for k in self.cfg.stage_numbers():
            unit = {**part, "stage": str(k)}
            location = f"{self.dir}/mixture/{lake.partition_path(unit)}"
            lake.mkdirs(location)  # a stage with no rows
            flips.append(Flip("mixture", unit, location))
        # Stages a former run of this mixture had beyond this one's become empty.
        published = f"{lake.table_dir('mixture')}/{lake.partition_path(part)}"
        for path in lake.list_dir(published):
            leaf = path.rstrip("/").rsplit("/", 1)[-1]
            if leaf.startswith("stage=") and leaf[6:].isdigit() and \
                    int(leaf[6:]) not in self.cfg.stage_numbers():
                unit = {**part, "stage": leaf[6:]}
                location = f"{self.dir}/empty/{lake.partition_path(unit)}"
                lake.mkdirs(location)
                flips.append(Flip("mixture", unit, location))
        stats = {"run_id": self.run_id}
        flips.append(Flip("mixture_stats", stats,
                          f"{self.dir}/mixture_stats/{lake.partition_path(stats)}"))
        return flips


def mix(args: argparse.Namespace) -> int:
    started = time.monotonic()
    cfg = config_from_args(args)
    if not cfg.name:
        raise ConfigError("the mixture has no name: set `name:` in its config or --name")
    if not cfg.sources:
        raise ConfigError("the mixture has no sources: list `sources:` in its config")
    files = {e.name: read_eval_files(*e.files) for e in cfg.eval_sets}  # before Spark starts
    run_id = args.run_id or new_run_id(cfg.hash())
    spark, lake = open_lake("sluice-mix", cfg, run_id)
    job = MixRun(spark, lake, cfg, run_id)
    job.open_evals(files)
    pool = job.pool()  # bad tables and filters fail before anything is written
    evals = job.eval_sets()
    inputs = [{"source": s.name, "table": cfg.table_name(s), "where": s.where,
               "eval_set": s.eval_set} for s in cfg.sources]
    inputs += [{"eval_set": e.name, "pair": e.pair, "role": e.role, "files": e.files,
                "segments": len(files[e.name])} for e in cfg.eval_sets]
    query = (f"SELECT stage, source, count(*) FROM {cfg.lake.database}.mixture "
             f"WHERE mixture = '{cfg.name}' GROUP BY 1, 2 ORDER BY 1, 2")
    run_and_commit(spark, lake, cfg, "mix", run_id, inputs, lambda: job.execute(pool, evals),
                   query)
    log(f"mix: {time.monotonic() - started:.0f} s")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.register_eval:
        return register_eval(args)
    if args.pair or args.input:
        raise ConfigError("--pair and --input go with --register-eval")
    return mix(args)


main = job_main(parse_args, run)

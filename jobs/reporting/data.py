"""What the run report (jobs/report.py) shows, read from the lake with Spark: the run's record,
its funnel and the corpora's earlier runs (`filter_stats`, `runs`), and from the run's stored
scores only aggregates (histograms, kept shares, what-if counts) and small samples. Nothing
whole is collected to the driver: every score is binned and counted in Spark."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import reduce
from operator import and_
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.filtering.config import FilterConfig, stored_filter_config
from jobs.filtering.layout import Layout
from jobs.filtering.near_dup import JACCARD
from jobs.filtering.pair_score_model import load as load_pair_score_model
from jobs.filtering.pair_score_stage import THRESHOLD_COLUMN
from jobs.kit.errors import ConfigError
from jobs.lake.store import Lake
from jobs.reporting.thresholds import (
    Threshold,
    grouped,
    rule_score_names,
    rule_thresholds,
    scorer_thresholds,
    what_if_grid,
)

HIST_BINS = 40  # bins of a histogram (integer scores of a small range: one bin per value)
CLIP = (0.005, 0.995)  # quantiles a histogram's range spans; values beyond go in its edge bins
SAMPLES = 10  # sample pairs per rule and per threshold
TOP_VALUES = 10  # most frequent values shown of a text score (url_email_html, src_lang)
# Scores the pair scorers store (jobs/filtering/steps.py: the lm, align, embed, cross_encoder,
# english_lm and pair_score stages), after the rules' own (udfs/rules.py).
SCORER_COLUMNS = ("lm_src", "lm_tgt", "align_fwd_logprob", "align_rev_logprob",
                  "align_coverage", "embed_cosine", "embed_margin", "cross_encoder", "mt_human",
                  "english_lm", "pair_score")
NUMERIC = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
           T.DecimalType, T.BooleanType)
INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.BooleanType)
# Histogram groups of a score's rows.
KEPT, REJECTED_HERE, REJECTED_ELSEWHERE = "kept", "rejected by its rule", "rejected by another"


@dataclass(frozen=True)
class Run:
    """A run's row of the `runs` table, its config parsed."""

    run_id: str
    job: str
    status: str
    config: dict[str, Any]
    config_hash: str
    inputs: list[dict[str, Any]]
    spark: dict[str, Any]
    started_at: str
    finished_at: str
    error: str | None

    def filter_config(self) -> FilterConfig | None:
        """The resolved config as the filter read it; None if this version cannot read it."""
        # A refresh's config is a filter config plus its `sources` and `refresh` sections.
        own = {k: v for k, v in self.config.items() if k in FilterConfig.model_fields}
        try:
            return FilterConfig.model_validate(stored_filter_config(own))
        except ValueError:
            return None


@dataclass
class ScoreStats:
    """One score column of one pair: its histogram, threshold and kept share."""

    pair: str
    column: str
    rule: str | None  # the rule that cuts it (None: no single threshold)
    threshold: Threshold | None
    integral: bool
    bins: list[dict[str, Any]] = field(default_factory=list)  # bin_start, bin_end, group, rows
    alive: int | None = None  # rows alive when its rule ran
    kept_at_threshold: int | None = None  # of those, rows whose score passes


@dataclass
class WhatIf:
    pair: str
    threshold: Threshold
    alive: int
    rows: list[dict[str, Any]]  # value, label, kept, current


@dataclass
class ReportData:
    run: Run
    funnel: list[dict[str, Any]]  # filter_stats rows of the run, in step order
    history: list[dict[str, Any]]  # per earlier/later run of the same corpora: kept share
    rows_in_lake: dict[tuple[str, str], int]  # (pair, corpus) -> the run's rows still stored
    scores: list[ScoreStats]
    text_scores: list[dict[str, Any]]  # pair, column, value, outcome, rows (top values)
    what_ifs: list[WhatIf]
    rejected_samples: list[dict[str, Any]]
    near_samples: list[dict[str, Any]]
    notes: list[str]
    lake_root: str = ""  # where the run's lake is (the what-ifs' re-decide commands)
    hosts: list[dict[str, Any]] = field(default_factory=list)  # the run's biggest websites


# --- The run -------------------------------------------------------------------------------


def table(spark: SparkSession, lake: Lake, name: str) -> DataFrame | None:
    qualified = lake.qualified(name)
    if not spark.catalog.tableExists(qualified):
        return None
    return spark.table(qualified)


# Runs whose rows are in bitext/mono and filter_stats: a re-decide (new thresholds) and a
# refresh (a filter run over the new files of its sources) are filter runs too.
FILTER_JOBS = ("filter", "redecide", "refresh")
# Every job kind the report knows: the filter's, and the selection's, translation's and
# mixture's (their own modules: jobs/reporting/select_data.py, translate_data.py, mix_data.py).
REPORTED_JOBS = (*FILTER_JOBS, "select", "translate", "mix")


def find_run(spark: SparkSession, lake: Lake, run_id: str | None, pair: str | None,
             corpus: str | None) -> Run:
    """The run named (any job the report knows: REPORTED_JOBS), or the latest succeeded filter
    run (of `pair` / `corpus` if given). A re-decided run (`filter.py --redecide`) is a filter
    run too: same tables, new thresholds."""
    runs = table(spark, lake, "runs")
    if runs is None:
        raise ConfigError(f"no runs in the lake at {lake.root}")
    if run_id is not None:
        rows = (runs.where(F.col("run_id") == run_id)
                .orderBy(F.col("finished_at").desc_nulls_last()).limit(1).collect())
        if not rows:
            raise ConfigError(f"unknown run id {run_id} in the lake at {lake.root}")
        if rows[0].job not in REPORTED_JOBS:
            raise ConfigError(f"run {run_id} is a {rows[0].job} run, a job the report does not "
                              f"know (it reports {', '.join(REPORTED_JOBS)} runs)")
        return to_run(rows[0])
    candidates = runs.where(F.col("job").isin(*FILTER_JOBS) & (F.col("status") == "succeeded"))
    stats = table(spark, lake, "filter_stats")
    if (pair or corpus) and stats is not None:
        wanted = stats
        if pair:
            wanted = wanted.where(F.col("pair") == pair)
        if corpus:
            wanted = wanted.where(F.col("corpus") == corpus)
        candidates = candidates.join(wanted.select("run_id").distinct(), "run_id", "left_semi")
    rows = candidates.orderBy(F.col("started_at").desc()).limit(1).collect()
    if not rows:
        which = " ".join(f"{k} {v}" for k, v in (("pair", pair), ("corpus", corpus)) if v)
        raise ConfigError(f"no succeeded filter run{' of ' + which if which else ''} "
                          f"in the lake at {lake.root}")
    return to_run(rows[0])


def to_run(row: Any) -> Run:
    return Run(run_id=row.run_id, job=row.job, status=row.status,
               config=json.loads(row.config or "{}"), config_hash=row.config_hash or "",
               inputs=json.loads(row.inputs or "[]"), spark=json.loads(row.spark or "{}"),
               started_at=str(row.started_at), finished_at=str(row.finished_at),
               error=row.error)


def funnel_rows(spark: SparkSession, lake: Lake, run_id: str) -> list[dict[str, Any]]:
    stats = table(spark, lake, "filter_stats")
    if stats is None:
        return []
    rows = stats.where(F.col("run_id") == run_id).orderBy("pair", "corpus", "step").collect()
    return [r.asDict() for r in rows]


def history_rows(spark: SparkSession, lake: Lake,
                 corpora: set[tuple[str, str]]) -> list[dict[str, Any]]:
    """Every succeeded run of the run's (pair, corpus): rows in, kept, its start."""
    stats, runs = table(spark, lake, "filter_stats"), table(spark, lake, "runs")
    if stats is None or runs is None or not corpora:
        return []
    wanted = reduce(lambda a, b: a | b, [(F.col("pair") == p) & (F.col("corpus") == c)
                                         for p, c in sorted(corpora)])
    per_run = (stats.where(wanted).groupBy("run_id", "pair", "corpus")
               .agg(F.max("rows_in").alias("rows_in"),
                    F.sum("rows_rejected").alias("rows_rejected")))
    done = runs.where(F.col("status") == "succeeded").select("run_id", "started_at")
    rows = per_run.join(done, "run_id").orderBy("pair", "corpus", "started_at").collect()
    out = []
    for r in rows:
        kept = r.rows_in - r.rows_rejected
        out.append({"run_id": r.run_id, "pair": r.pair, "corpus": r.corpus,
                    "started_at": str(r.started_at), "rows_in": r.rows_in, "kept": kept,
                    "kept_share": kept / r.rows_in if r.rows_in else 0.0})
    return out


# --- Scores --------------------------------------------------------------------------------


def passing(column: Column, kind: str, value: float | tuple[float, float]) -> Column:
    """True where the score is kept at `value` (a null score passes, as in the rules)."""
    if kind == "max":
        cond = column <= value
    elif kind == "min":
        cond = column >= value
    else:
        low, high = value  # type: ignore[misc]
        cond = (column >= low) & (column <= high)
    return F.coalesce(cond, F.lit(True))


def all_pass(t: Threshold, value: float | tuple[float, float]) -> Column:
    return reduce(and_, [passing(F.col(c).cast("double"), t.kind, value) for c in t.columns])


class RunScores:
    """The run's decided rows and what is computed over them."""

    def __init__(self, df: DataFrame, key: str, cfg: FilterConfig | None,
                 funnel: list[dict[str, Any]], pair_score_threshold: float | None) -> None:
        self.df, self.key, self.cfg = df, key, cfg
        # Where a rejected row left the funnel: rows alive at a rule are the clean ones and
        # those a rule at or after it rejected.
        steps: dict[str, int] = {}
        for r in funnel:
            steps.setdefault(r["rule"], r["step"])
        self.steps = steps
        step_map = F.create_map(*[F.lit(x) for kv in steps.items() for x in kv]) if steps \
            else None
        self.exit_step = (F.element_at(step_map, F.col("reject_rule")) if step_map is not None
                          else F.lit(None).cast("int"))
        self.pair_score_threshold = pair_score_threshold

    def columns(self) -> tuple[list[str], list[str]]:
        """(numeric, text) stored score columns of the run, rules' first (udfs/rules.py order,
        restricted to the rules that ran), then the pair scorers'."""
        types = {f.name: f.dataType for f in self.df.schema.fields}
        names: list[str] = []
        if self.cfg is not None:
            for rule in self.cfg.rules_run:
                names += [n for n in rule_score_names(rule, self.cfg.mono) if n not in names]
        names += [c for c in SCORER_COLUMNS if c not in names]
        present = [n for n in names if n in types]
        numeric = [n for n in present if isinstance(types[n], NUMERIC)]
        text = [n for n in present if isinstance(types[n], T.StringType)]
        return numeric, text

    def thresholds(self, pair: str) -> dict[str, Threshold]:
        if self.cfg is None:
            return {}
        langs = (self.cfg.lang, self.cfg.lang) if self.cfg.mono else tuple(pair.split("-", 1))
        found = rule_thresholds(self.cfg.rules_run, self.cfg.rule_settings, langs,  # type: ignore[arg-type]
                                self.cfg.mono)
        found.update(scorer_thresholds(self.cfg, self.pair_score_threshold))
        return found

    def alive_at(self, rule: str) -> Column:
        step = self.steps.get(rule)
        if step is None:
            return F.lit(True)
        return F.col("reject_rule").isNull() | (self.exit_step >= step)

    def score_stats(self, pair: str) -> tuple[list[ScoreStats], list[WhatIf]]:
        """Histograms, kept shares and what-if counts of every numeric score of `pair`."""
        df = self.df.where(F.col(self.key) == pair)
        numeric, _ = self.columns()
        if not numeric:
            return [], []
        types = {f.name: f.dataType for f in df.schema.fields}
        thresholds = self.thresholds(pair)
        stats = [ScoreStats(pair, c, thresholds[c].rule if c in thresholds else None,
                            thresholds.get(c), isinstance(types[c], INTEGRAL)) for c in numeric]
        ranges = self._ranges(df, stats)
        self._histograms(df, stats, ranges)
        what_ifs = self._counts(df, stats, grouped(thresholds), pair)
        return stats, what_ifs

    def _ranges(self, df: DataFrame, stats: list[ScoreStats]) -> dict[str, tuple[float, float]]:
        """Each score's histogram range: its 0.5-99.5th percentiles (one Spark job for all),
        widened to show its threshold."""
        aggs = []
        for i, s in enumerate(stats):
            col = F.col(s.column).cast("double")
            aggs += [F.min(col).alias(f"lo{i}"), F.max(col).alias(f"hi{i}"),
                     F.percentile_approx(col, list(CLIP), 1000).alias(f"q{i}")]
        row = df.agg(*aggs).collect()[0]
        ranges: dict[str, tuple[float, float]] = {}
        for i, s in enumerate(stats):
            if row[f"lo{i}"] is None:
                continue  # no row has this score (e.g. a scorer that skipped)
            lo, hi = row[f"q{i}"] if row[f"q{i}"] else (row[f"lo{i}"], row[f"hi{i}"])
            if s.threshold is not None:
                lo, hi = min([lo, *s.threshold.bounds()]), max([hi, *s.threshold.bounds()])
            if s.integral:
                lo, hi = float(int(lo)), float(int(hi))
            if hi <= lo:
                hi = lo + 1
            ranges[s.column] = (lo, hi)
        return ranges

    def _histograms(self, df: DataFrame, stats: list[ScoreStats],
                    ranges: dict[str, tuple[float, float]]) -> None:
        """Rows per bin and group (kept / rejected by the score's rule / by another), all
        scores in one Spark job: each row becomes one (score, bin) entry per score."""
        entries, widths = [], {}
        for s in stats:
            if s.column not in ranges:
                continue
            lo, hi = ranges[s.column]
            unit = s.integral and hi - lo < HIST_BINS  # one bin per value, centred on it
            bins = int(hi - lo) + 1 if unit else HIST_BINS
            width = 1.0 if unit else (hi - lo) / HIST_BINS
            widths[s.column] = (lo - 0.5 if unit else lo, width)
            value = F.least(F.greatest(F.col(s.column).cast("double"), F.lit(lo)), F.lit(hi))
            bin_index = F.least(F.floor((value - lo) / width), F.lit(bins - 1)).cast("int")
            group = (F.when(F.col("outcome") == "clean", KEPT)
                     .when(F.col("reject_rule") == (s.rule or ""), REJECTED_HERE)
                     .otherwise(REJECTED_ELSEWHERE))
            entries.append(F.struct(F.lit(s.column).alias("score"), bin_index.alias("bin"),
                                    group.alias("grp")))
        if not entries:
            return
        counts = (df.select(F.explode(F.array(*entries)).alias("e"))
                  .where(F.col("e.bin").isNotNull())
                  .groupBy("e.score", "e.bin", "e.grp").count().collect())
        by_column = {s.column: s for s in stats}
        for r in counts:
            lo, width = widths[r.score]
            by_column[r.score].bins.append({
                "bin_start": lo + r.bin * width, "bin_end": lo + (r.bin + 1) * width,
                "group": r.grp, "rows": r["count"]})
        for s in stats:
            s.bins.sort(key=lambda b: (b["bin_start"], b["group"]))

    def _counts(self, df: DataFrame, stats: list[ScoreStats], groups: list[Threshold],
                pair: str) -> list[WhatIf]:
        """Kept shares at the thresholds and the what-if grids, one Spark job for all."""
        aggs: list[Column] = []
        for i, s in enumerate(stats):
            if s.threshold is None:
                continue
            alive = self.alive_at(s.threshold.rule)
            aggs += [F.count_if(alive).alias(f"alive_s{i}"),
                     F.count_if(alive & passing(F.col(s.column).cast("double"), s.threshold.kind,
                                                s.threshold.value)).alias(f"kept_s{i}")]
        grids = [what_if_grid(t) for t in groups]
        for g, (t, grid) in enumerate(zip(groups, grids, strict=True)):
            alive = self.alive_at(t.rule)
            aggs.append(F.count_if(alive).alias(f"alive_g{g}"))
            aggs += [F.count_if(alive & all_pass(t, v)).alias(f"kept_g{g}_{j}")
                     for j, v in enumerate(grid)]
        if not aggs:
            return []
        row = df.agg(*aggs).collect()[0]
        for i, s in enumerate(stats):
            if s.threshold is not None:
                s.alive, s.kept_at_threshold = row[f"alive_s{i}"], row[f"kept_s{i}"]
        out = []
        for g, (t, grid) in enumerate(zip(groups, grids, strict=True)):
            rows = [{"value": v, "label": t.with_value(v).label().split(" = ")[1],
                     "kept": row[f"kept_g{g}_{j}"], "current": v == t.value}
                    for j, v in enumerate(grid)]
            out.append(WhatIf(pair, t, row[f"alive_g{g}"], rows))
        return out

    def text_scores(self) -> list[dict[str, Any]]:
        """The most frequent values of each text score (src_lang, url_email_html...)."""
        _, text = self.columns()
        if not text:
            return []
        entries = F.array(*[F.struct(F.lit(c).alias("score"), F.col(c).alias("value"))
                            for c in text])
        counts = (self.df.select(self.key, "outcome", F.explode(entries).alias("e"))
                  .where(F.col("e.value").isNotNull())
                  .groupBy(self.key, "e.score", "e.value", "outcome").count())
        rank = Window.partitionBy(self.key, "score").orderBy(F.col("count").desc(), "value")
        top = counts.withColumn("n", F.row_number().over(rank)).where(F.col("n") <= TOP_VALUES)
        return [{"pair": r[self.key], "column": r.score, "value": r.value, "outcome": r.outcome,
                 "rows": r["count"]} for r in top.orderBy(self.key, "score", "n").collect()]

    def rejected_samples(self, shown: list[str], table: DataFrame | None = None
                         ) -> list[dict[str, Any]]:
        """SAMPLES rejected pairs per rule, picked by a hash of the row id (the same every
        time), with the scores in `shown`. A row_number <= k filter is planned as a window
        group limit (Spark 3.5+): each task keeps its top k per rule before the shuffle. A
        duplicate comes with the row it duplicates (`dup`: where and text), looked up in
        `table` (the whole table: a refresh's survivor may be an earlier run's row)."""
        pick = Window.partitionBy(self.key, "reject_rule").orderBy(F.xxhash64("row_id"))
        rows = [r.asDict() for r in (
            self.df.where(F.col("outcome") == "rejected")
            .withColumn("n", F.row_number().over(pick)).where(F.col("n") <= SAMPLES)
            .select(self.key, "corpus", "line", "reject_stage", "reject_rule", "dup_of",
                    *[c for c in (JACCARD,) if c in self.df.columns and c not in shown],
                    *self._text_columns(), *shown)
            .orderBy(self.key, "reject_rule", "n").collect())]
        survivors = sorted({r["dup_of"] for r in rows if r.get("dup_of") is not None})
        if survivors:
            found = {s.row_id: s.asDict() for s in (table if table is not None else self.df)
                     .where(F.col("row_id").isin(survivors))
                     .select("row_id", "corpus", "line", *self._text_columns()).collect()}
            for r in rows:
                r["dup"] = found.get(r.get("dup_of"))
        return rows

    def near_samples(self, pair: str, thresholds: dict[str, Threshold]) -> list[dict[str, Any]]:
        """SAMPLES kept pairs per score nearest its threshold (one Spark job for all)."""
        if not thresholds:
            return []
        entries = []
        for column, t in thresholds.items():
            value = F.col(column).cast("double")
            distance = F.least(*[F.abs(value - b) for b in t.bounds()]) \
                if len(t.bounds()) > 1 else F.abs(value - t.bounds()[0])
            entries.append(F.struct(F.lit(column).alias("score"), value.alias("value"),
                                    distance.alias("distance")))
        near = (self.df.where((F.col(self.key) == pair) & (F.col("outcome") == "clean"))
                .select("row_id", self.key, "corpus", "line", *self._text_columns(),
                        F.explode(F.array(*entries)).alias("e"))
                .where(F.col("e.distance").isNotNull()))
        pick = Window.partitionBy("e.score").orderBy("e.distance", F.xxhash64("row_id"))
        rows = (near.withColumn("n", F.row_number().over(pick)).where(F.col("n") <= SAMPLES)
                .select(self.key, "corpus", "line", *self._text_columns(), "e.score",
                        "e.value", "e.distance", "n")
                .orderBy("score", "n").collect())
        return [r.asDict() for r in rows]

    def _text_columns(self) -> list[str]:
        return [c for c in ("src", "tgt", "text") if c in self.df.columns]

    def rows_in_lake(self) -> dict[tuple[str, str], int]:
        counts = self.df.groupBy(self.key, "corpus").count().collect()
        return {(r[self.key], r.corpus): r["count"] for r in counts}


def pair_score_model_threshold(lake: Lake, run: Run) -> float | None:
    """The calibrated threshold of the run's pair_score model, where the config left it to
    the model (pair_score.min_score null). `latest` is read as the newest model now."""
    ps = run.config.get("pair_score") or {}
    if not ps.get("enabled") or ps.get("min_score") is not None or not run.config.get("pair"):
        return None
    try:
        return float(load_pair_score_model(
            lake, run.config["pair"], ps["model"],
            run.config.get("embedding", {}).get("encoder"))["threshold"])
    except (ConfigError, KeyError, OSError, ValueError):
        return None


def pair_score_run_threshold(lake: Lake, run: Run, rows: DataFrame,
                             notes: list[str]) -> float | None:
    """The pair_score threshold the run's rows were judged by: stored with them where the run
    fitted it to its corpora (one value, or the model's with a note when they differ), else
    the model's (`pair_score_model_threshold`)."""
    if THRESHOLD_COLUMN not in rows.columns:
        return pair_score_model_threshold(lake, run)
    found = (rows.where(F.col(THRESHOLD_COLUMN).isNotNull())
             .groupBy("corpus").agg(F.min(THRESHOLD_COLUMN).alias("t")).collect())
    values = {r.corpus: r.t for r in found}
    if len(set(values.values())) == 1:
        return next(iter(values.values()))
    if values:
        notes.append("pair_score thresholds fitted per corpus: " + ", ".join(
            f"{c} {t:.3f}" for c, t in sorted(values.items())) + "; the model's is drawn.")
    return pair_score_model_threshold(lake, run)


def collect_report(spark: SparkSession, lake: Lake, run: Run) -> ReportData:
    notes: list[str] = []
    funnel = funnel_rows(spark, lake, run.run_id)
    if not funnel:
        notes.append(f"filter_stats holds no rows of run {run.run_id} (status {run.status}).")
    corpora = {(r["pair"], r["corpus"]) for r in funnel}
    history = history_rows(spark, lake, corpora)
    cfg = run.filter_config()
    if cfg is None:
        notes.append("This version cannot read the run's stored config: no thresholds drawn.")
    layout = Layout(bool(run.config.get("lang")))
    decided = table(spark, lake, layout.prefix)
    empty = ReportData(run, funnel, history, {}, [], [], [], [], [], notes)
    if decided is None:
        notes.append(f"The lake has no {layout.prefix} table.")
        return empty
    df = decided.where(F.col("run_id") == run.run_id)
    scores = RunScores(df, layout.key, cfg, funnel, pair_score_run_threshold(lake, run, df, notes))
    in_lake = scores.rows_in_lake()
    for pair, corpus in sorted(corpora):
        if not in_lake.get((pair, corpus)):
            notes.append(f"{pair}/{corpus}: the run's rows are no longer in {layout.prefix} "
                         "(a later run re-filtered the corpus): funnel only.")
    score_stats: list[ScoreStats] = []
    what_ifs: list[WhatIf] = []
    near: list[dict[str, Any]] = []
    for pair in sorted({p for p, _ in in_lake}):
        s, w = scores.score_stats(pair)
        score_stats += s
        what_ifs += w
        near += scores.near_samples(pair, scores.thresholds(pair))
    numeric, text = scores.columns()
    shown = numeric + text
    return ReportData(run, funnel, history, in_lake, score_stats, scores.text_scores(),
                      what_ifs, scores.rejected_samples(shown, decided) if in_lake else [], near,
                      notes, lake.root, biggest_hosts(df, layout.key))


MOST_HOSTS_SHOWN = 20


def biggest_hosts(rows: DataFrame, key: str) -> list[dict[str, Any]]:
    """The run's websites with the most pairs (a crawl's `host`, README "Crawled corpora"):
    pairs, kept share, and the mean pair_score where the run has one. Empty where no row has
    a host. One aggregate on the executors; only the top rows reach the driver."""
    if "host" not in rows.columns:
        return []
    measures = [F.count("*").alias("pairs"),
                F.sum(F.when(F.col("outcome") == "clean", 1).otherwise(0)).alias("kept")]
    if "pair_score" in rows.columns:
        measures.append(F.avg("pair_score").alias("mean_pair_score"))
    top = (rows.where(F.col("host").isNotNull())
           .groupBy(F.col(key).alias("key"), "host").agg(*measures)
           .orderBy(F.desc("pairs"), "host").limit(MOST_HOSTS_SHOWN))
    return [r.asDict() for r in top.collect()]

"""What the report of a selection run (jobs/select_data.py) shows, read from the lake with
Spark: the run's `select_stats` row(s), the pool's counts from `selected` (rows, scored,
selected, not selected, unscorable by reason), a histogram of every method's score (and of the
combined score) over the selected and the not-selected rows with the cut drawn where the cut
is a score, the rows per KMeans cluster and per fluency bucket where the run has them, and the
seed it was trained on. Only counts reach the driver. select_stats holds no precision-type
numbers (the run has no labels to measure them by): the report shows none."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.lake.store import Lake
from jobs.reporting.bins import Bins, binned_counts, clipped_ranges
from jobs.reporting.data import Run, ScoreStats, table
from jobs.reporting.thresholds import Threshold
from jobs.selection.units import BY_NAME

SELECTED, NOT_SELECTED = "selected", "not selected"  # histogram groups, stacked in this order
COMBINED = "score"  # the combined score's column (rank_mean of several methods)


@dataclass
class SelectReport:
    run: Run
    stats: list[dict[str, Any]]  # the run's select_stats rows
    counts: list[dict[str, Any]]  # per key: pool, scored, selected, not_selected, unscorable
    histograms: list[ScoreStats]  # pair = key, column = method (or COMBINED); groups above
    clusters: list[dict[str, Any]]  # key, domain_cluster, rows, selected
    buckets: list[dict[str, Any]]  # key, fluency_bucket, rows, selected
    seed: dict[str, Any] | None  # name, hash, where it was read from
    cut: str  # how the run cut: top N, top P%, the seed's clusters, fluency buckets
    notes: list[str] = field(default_factory=list)


def methods_of(run: Run) -> list[str]:
    return list(run.config.get("methods") or [])


def cut_rule(config: dict[str, Any]) -> str:
    """How a selection config decides (jobs/selection/job.py `SelectRun.cut`), in words."""
    if config.get("top") is not None:
        return f"the {config['top']:,} best-ranked rows (top)"
    if config.get("top_percent") is not None:
        return f"the best {config['top_percent']:g}% of the scored rows (top_percent)"
    if list(config.get("methods") or []) == ["kmeans_domains"]:
        return "the rows in the seed's KMeans clusters (kmeans_domains)"
    keep = (config.get("lm_fluency") or {}).get("keep") or []
    return f"the rows in the fluency buckets {', '.join(keep)} (lm_fluency.keep)"


def cut_is_a_score(config: dict[str, Any], column: str) -> bool:
    """Whether the selected rows are those on one side of a value of `column`: a rank cut
    (top, top_percent) on the score the run ranked by, or lm_fluency's buckets alone (its
    rank again). A cluster cut is not."""
    methods = list(config.get("methods") or [])
    ranked_by = methods[0] if len(methods) == 1 else COMBINED
    if column != ranked_by:
        return False
    return (config.get("top") is not None or config.get("top_percent") is not None
            or methods == ["lm_fluency"])


def seed_facts(run: Run, stats: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The seed the run trained on, as its inputs and stats record it (None: no seed, e.g.
    lm_fluency alone or reused models)."""
    recorded = next((i for i in run.inputs if i.get("seed")), None)
    name = recorded.get("seed") if recorded else next(
        (s["seed_name"] for s in stats if s.get("seed_name")), None)
    if not name:
        return None
    digest = (recorded or {}).get("seed_hash") or next(
        (s["seed_hash"] for s in stats if s.get("seed_hash")), None)
    seed = run.config.get("seed") or {}
    source = (f"table {seed['table']}" + (f" where {seed['where']}" if seed.get("where") else "")
              if seed.get("table") else ", ".join(seed.get("files") or []))
    return {"name": name, "hash": digest, "source": source}


def pool_counts(rows: DataFrame) -> list[dict[str, Any]]:
    """Per key: pool rows, scored, selected, not selected, and the unscorable by reason (the
    reason less its method, as select_stats counts it, and whole)."""
    totals = rows.groupBy("key").agg(
        F.count("*").alias("pool"),
        F.count_if(F.col("reason").isNull()).alias("scored"),
        F.count_if(F.col("selected")).alias("selected"),
    ).orderBy("key").collect()
    reasons = (rows.where(F.col("reason").isNotNull()).groupBy("key", "reason").count()
               .orderBy("key", "reason").collect())
    out = []
    for t in totals:
        out.append({"key": t.key, "pool": t.pool, "scored": t.scored, "selected": t.selected,
                    "not_selected": t.pool - t.selected,
                    "unscorable": {r.reason: r["count"] for r in reasons if r.key == t.key}})
    return out


def score_histograms(rows: DataFrame, run: Run, stats: list[dict[str, Any]]
                     ) -> list[ScoreStats]:
    """A histogram per method score (the `scores` map's entries) and, for several methods, of
    the combined score: its rows split into selected / not selected, the cut drawn where the
    cut is a score (select_stats' cut_score: the score of the last selected row)."""
    methods = methods_of(run)
    values: dict[str, Column] = {m: F.col("scores")[m] for m in methods}
    if len(methods) > 1:
        values[COMBINED] = F.col(COMBINED)
    keys = sorted({s["key"] for s in stats}) or [
        r.key for r in rows.select("key").distinct().collect()]
    out = []
    group = F.when(F.col("selected"), F.lit(SELECTED)).otherwise(F.lit(NOT_SELECTED))
    for key in sorted(keys):
        part = rows.where(F.col("key") == key)
        cut = next((s["cut_score"] for s in stats if s["key"] == key), None)
        cuts = {c: Threshold("cut score", "", direction(c), float(cut), (c,))
                for c in values if cut is not None and cut_is_a_score(run.config, c)}
        ranges = clipped_ranges(part, values, {c: t.bounds() for c, t in cuts.items()})
        entries = {c: (values[c], group, Bins.over(*ranges[c])) for c in values if c in ranges}
        counted = binned_counts(part, [], entries)
        for c in values:
            out.append(ScoreStats(key, c, None, cuts.get(c), False, counted.get((c,), [])))
    return out


def direction(column: str) -> str:
    """A cut score keeps the rows at or below it (lower is better) or at or above it."""
    unit = BY_NAME.get(column)
    return "max" if unit is None or unit.lower_is_better else "min"  # combined: rank share


def grouped_counts(rows: DataFrame, column: str) -> list[dict[str, Any]]:
    """Rows and selected rows per value of `column` (a cluster, a bucket) and key."""
    found = (rows.where(F.col(column).isNotNull()).groupBy("key", column)
             .agg(F.count("*").alias("rows"), F.count_if(F.col("selected")).alias("selected"))
             .orderBy("key", column).collect())
    return [r.asDict() for r in found]


def collect_select(spark: SparkSession, lake: Lake, run: Run) -> SelectReport:
    notes: list[str] = []
    stats_table = table(spark, lake, "select_stats")
    stats = ([r.asDict() for r in stats_table.where(F.col("run_id") == run.run_id)
              .orderBy("key").collect()] if stats_table is not None else [])
    if not stats:
        notes.append(f"select_stats holds no rows of run {run.run_id} (status {run.status}).")
    seed = seed_facts(run, stats)
    cut = cut_rule(run.config)
    selected = table(spark, lake, "selected")
    if selected is None:
        notes.append("The lake has no selected table.")
        return SelectReport(run, stats, [], [], [], [], seed, cut, notes)
    rows = selected.where(F.col("run_id") == run.run_id)
    counts = pool_counts(rows)
    if not counts:
        notes.append(f"selected holds no rows of run {run.run_id}.")
        return SelectReport(run, stats, [], [], [], [], seed, cut, notes)
    return SelectReport(run, stats, counts, score_histograms(rows, run, stats),
                        grouped_counts(rows, "domain_cluster"),
                        grouped_counts(rows, "fluency_bucket"), seed, cut, notes)

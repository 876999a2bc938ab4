"""What the report of a mixture run (jobs/mix.py) shows, read from the lake with Spark: the
run's `mixture_stats` rows (per source: direction, table, synthetic, available,
decontaminated and by which eval set, flagged, eligible, weight, planned, sampled, distinct
rows, effective weight, epochs, rows per stage); per temperature group (direction, or source)
the realized share against the temperature formula's p ∝ n^(1/T) x weight, recomputed from
the run's config in `runs`; from `mixture`: the rows per tag combination and stage, per stage
and direction the rows, the scored rows and the lowest score kept (the stage's threshold: the
job cuts at a score some drawn row has, and does not store it), and a few sample rows per
source with their tags; the eval sets of `eval_sets` the run checked against. Only counts
and the samples reach the driver.

Which sources temperature sampling sized, and the formula's shares, are the mixing job's own
(jobs/mixing/config.py `pooled`, sampling.py `temperature_shares`), applied to the config
the run stored: the report sits above what it reports on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from jobs.lake.store import Lake
from jobs.mixing.config import MixConfig
from jobs.mixing.sampling import temperature_shares
from jobs.reporting.data import Run, table

SAMPLE_ROWS = 5  # sample rows per source


@dataclass
class MixReport:
    run: Run
    name: str
    sources: list[dict[str, Any]]  # mixture_stats rows of the run, in the config's order
    temperature: list[dict[str, Any]]  # per group: n, weight, formula, planned, realized share
    tags: list[dict[str, Any]]  # tags (tuple), sources, rows per stage
    stages: list[dict[str, Any]]  # stage, direction, quantile, rows, scored, lowest score
    eval_sets: list[dict[str, Any]]  # name, pair, role, segments, run_id, checked
    samples: list[dict[str, Any]]  # SAMPLE_ROWS rows of stage 1 per source
    notes: list[str] = field(default_factory=list)


def pooled(config: Mapping[str, Any]) -> list[str]:
    """The names of the sources temperature sampling sized, by the mixing job's own rule
    applied to the run's stored config."""
    return [s.name for s in MixConfig.model_validate(config).pooled()]


def temperature_rows(config: Mapping[str, Any], stats: list[dict[str, Any]]
                     ) -> list[dict[str, Any]]:
    """Per temperature group (a direction, or a source with `temperature_over: source`) of
    the pooled sources: eligible rows n, weight, the formula's share, and the planned
    (before caps) and realized (sampled) shares of the pooled rows."""
    by_source = config.get("temperature_over") == "source"
    names = pooled(config)
    configured = {s["name"]: s for s in config.get("sources") or []}
    facts = {s["source"]: s for s in stats}
    groups: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        if name not in facts:
            continue
        s = facts[name]
        groups.setdefault(name if by_source else s["direction"], []).append(s)
    sizes = {g: sum(s["eligible"] for s in members) for g, members in groups.items()}
    weights = {g: (float(configured[members[0]["source"]].get("weight") or 1.0) if by_source
                   else float((config.get("direction_weights") or {}).get(g, 1.0)))
               for g, members in groups.items()}
    formula = temperature_shares(sizes, weights, float(config.get("temperature") or 1.0))
    planned = {g: sum(s["planned"] for s in members) for g, members in groups.items()}
    sampled = {g: sum(s["sampled"] for s in members) for g, members in groups.items()}
    all_planned, all_sampled = sum(planned.values()), sum(sampled.values())
    return [{"group": g, "sources": [s["source"] for s in groups[g]], "eligible": sizes[g],
             "weight": weights[g], "formula": formula[g], "planned": planned[g],
             "planned_share": planned[g] / all_planned if all_planned else 0.0,
             "sampled": sampled[g],
             "realized": sampled[g] / all_sampled if all_sampled else 0.0}
            for g in sorted(groups)]


def stage_thresholds(config: Mapping[str, Any]) -> tuple[str | None, list[float], str]:
    """The stages' score column, quantiles (one stage, no quantile: []) and where the
    quantiles were taken (per direction or over the mixture)."""
    st = config.get("stages") or {}
    return st.get("column"), list(st.get("quantiles") or []), st.get("per") or "direction"


def in_config_order(config: Mapping[str, Any], rows: list[dict[str, Any]]
                    ) -> list[dict[str, Any]]:
    order = {s["name"]: i for i, s in enumerate(config.get("sources") or [])}
    return sorted(rows, key=lambda r: (order.get(r["source"], len(order)), r["source"]))


def tag_label(tags: list[str] | tuple[str, ...] | None) -> str:
    """A tag combination as the page shows it: the tags in the order they are prepended."""
    return " ".join(t.strip() for t in tags or []) or "(no tags)"


# -- from the lake ---------------------------------------------------------------------------
def source_tag_counts(rows: DataFrame) -> list[dict[str, Any]]:
    """Rows per source, tag combination and stage (a source's tags are the same on all its
    rows: a few rows per source)."""
    found = rows.groupBy("source", "tags", "stage").count().collect()
    return [{"source": r.source, "tags": tuple(r.tags or []), "stage": r.stage,
             "rows": r["count"]} for r in found]


def tag_counts(counted: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows per tag combination and stage, with the sources that carry it (from
    `source_tag_counts`)."""
    out: dict[tuple[str, ...], dict[str, Any]] = {}
    for r in counted:
        entry = out.setdefault(r["tags"], {"tags": r["tags"], "sources": set(), "rows": {}})
        entry["sources"].add(r["source"])
        entry["rows"][r["stage"]] = entry["rows"].get(r["stage"], 0) + r["rows"]
    return [{**e, "sources": sorted(e["sources"]),
             "rows": dict(sorted(e["rows"].items()))} for _, e in sorted(out.items())]


def stage_mismatches(stats: list[dict[str, Any]], counted: list[dict[str, Any]]) -> list[str]:
    """Sources whose mixture_stats rows per stage are not what `mixture` holds."""
    held: dict[str, dict[int, int]] = {}
    for r in counted:
        per = held.setdefault(r["source"], {})
        per[r["stage"]] = per.get(r["stage"], 0) + r["rows"]
    out = []
    for s in stats:
        stored = {k: v for k, v in s["stage_rows"].items() if v}
        if stored != held.get(s["source"], {}):
            out.append(f"source {s['source']}: mixture_stats counts {stored} rows per stage, "
                       f"mixture holds {held.get(s['source'], {})}.")
    return out


def stage_counts(rows: DataFrame, quantiles: list[float], per: str) -> list[dict[str, Any]]:
    """Per stage and direction: rows, scored rows, the lowest score kept (the stage's
    threshold in its group) and rows that are a copy; a stage's `all` row sums them (its
    lowest score is the threshold where the quantiles were taken over the mixture)."""
    found = (rows.groupBy("stage", "direction")
             .agg(F.count("*").alias("rows"),
                  F.count_if(F.col("score").isNotNull()).alias("scored"),
                  F.min("score").alias("lowest"),
                  F.count_if(F.col("copy") > 0).alias("copies"))
             .orderBy("stage", "direction").collect())
    out = []
    for stage in sorted({r.stage for r in found}):
        mine = [r for r in found if r.stage == stage]
        q = quantiles[stage - 1] if 0 < stage <= len(quantiles) else None
        lows = [r.lowest for r in mine if r.lowest is not None]
        for r in mine:
            out.append({"stage": stage, "direction": r.direction, "quantile": q,
                        "rows": r["rows"], "scored": r.scored, "copies": r.copies,
                        "lowest": r.lowest, "threshold": per == "direction" and q is not None})
        out.append({"stage": stage, "direction": "all", "quantile": q,
                    "rows": sum(r["rows"] for r in mine), "scored": sum(r.scored for r in mine),
                    "copies": sum(r.copies for r in mine),
                    "lowest": min(lows) if lows else None,
                    "threshold": per == "mixture" and q is not None})
    return out


def sample_rows(rows: DataFrame) -> list[dict[str, Any]]:
    """SAMPLE_ROWS rows of stage 1 (every drawn row a stage holds is in it) per source,
    picked by a hash of the row (the same every time)."""
    pick = Window.partitionBy("source").orderBy(
        F.xxhash64("row_id", "source_run_id", "copy"), "row_id", "copy")
    found = (rows.where(F.col("stage") == 1).withColumn("n", F.row_number().over(pick))
             .where(F.col("n") <= SAMPLE_ROWS)
             .select("source", "direction", "corpus", "row_id", "copy", "tags", "src", "tgt",
                     "noised", "score", "contamination", "n")
             .orderBy("source", "n").collect())
    return [r.asDict() for r in found]


def eval_set_rows(spark: SparkSession, lake: Lake, run: Run) -> list[dict[str, Any]]:
    """The registered eval sets (as `eval_sets` holds them now): segments, and whether the
    run's decontamination checked against them (its `sets`, or every test set)."""
    evals = table(spark, lake, "eval_sets")
    if evals is None:
        return []
    dc = run.config.get("decontaminate") or {}
    found = (evals.groupBy("name", "pair", "role", "run_id")
             .agg(F.countDistinct("line").alias("segments")).orderBy("name", "pair").collect())
    sets = dc.get("sets")
    out = []
    for r in found:
        checked = bool(dc.get("enabled")) and (r.name in sets if sets is not None
                                               else r.role == "test")
        out.append({"name": r.name, "pair": r.pair, "role": r.role, "run_id": r.run_id,
                    "segments": r.segments, "checked": checked})
    return out


def collect_mix(spark: SparkSession, lake: Lake, run: Run) -> MixReport:
    notes: list[str] = []
    name = run.config.get("name") or ""
    stats_table = table(spark, lake, "mixture_stats")
    stats = ([{**r.asDict(), "decontaminated_by": dict(r.decontaminated_by or {}),
               "stage_rows": dict(r.stage_rows or {})}
              for r in stats_table.where(F.col("run_id") == run.run_id).collect()]
             if stats_table is not None else [])
    stats = in_config_order(run.config, stats)
    if not stats:
        notes.append(f"mixture_stats holds no rows of run {run.run_id} (status {run.status}).")
    temperature = temperature_rows(run.config, stats)
    evals = eval_set_rows(spark, lake, run)
    _, quantiles, per = stage_thresholds(run.config)
    mixture = table(spark, lake, "mixture")
    rows = (mixture.where((F.col("mixture") == name) & (F.col("run_id") == run.run_id))
            if mixture is not None else None)
    if rows is None or not rows.limit(1).collect():
        notes.append(f"mixture holds no rows of run {run.run_id} in its partition "
                     f"mixture={name} (a later run of the mixture replaces them): "
                     "no tags, stages or samples.")
        return MixReport(run, name, stats, temperature, [], [], evals, [], notes)
    stages = stage_counts(rows, quantiles, per)
    counted = source_tag_counts(rows)
    notes += stage_mismatches(stats, counted)
    return MixReport(run, name, stats, temperature, tag_counts(counted), stages, evals,
                     in_config_order(run.config, sample_rows(rows)), notes)


def sized_by(config: Mapping[str, Any], source: str) -> str:
    """How the mix job sized a source, in words: temperature, the synthetic share of its
    direction, a fixed count or a share of the whole mixture (then its cap, max_epochs)."""
    s = next((x for x in config.get("sources") or [] if x["name"] == source), None)
    if s is None:
        return ""
    if s.get("count") is not None:
        how = f"count {s['count']:,}"
    elif s.get("share") is not None:
        how = f"share {s['share']:g} of the mixture"
    elif source in pooled(config):
        how = "temperature"
    else:
        by = config.get("synthetic_share_by_direction") or {}
        how = f"synthetic share {by.get(s['direction'], config.get('synthetic_share')):g}"
    limits = [f"{k} {s[k]:,}" if isinstance(s[k], int) else f"{k} {s[k]:g}"
              for k in ("cap", "max_epochs") if s.get(k) is not None]
    return ", ".join([how, *limits])

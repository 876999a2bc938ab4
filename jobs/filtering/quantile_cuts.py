"""Quantile cuts: reject the worst share of rows by any stored score ("about 10% filtered by
fast_align", HW-TSC WMT21 triangular), where a paper gives a share instead of a threshold.

The threshold is the exact percentile of the score over the run's alive rows that have one
(`percentile`, not `percentile_approx`: an approximate summary merges per partition, so its
answer could change with the cluster's shape). A row exactly at the threshold is kept; a row
without the score (never scored) passes. Cuts apply in the configured order, each over the
rows the previous one kept. A re-decide computes them again over the rows its new rules keep,
as a full run would."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.filtering.config import FilterConfig, QuantileCut
from jobs.filtering.stages import alive, reject_where
from jobs.kit.errors import ConfigError
from jobs.kit.progress import log

STAGE = "quantile"


def quantile_rules(cfg: FilterConfig) -> list[tuple[str, str]]:
    return [(STAGE, cut.rule) for cut in cfg.cuts.quantile]


def threshold(rows: DataFrame, cut: QuantileCut) -> float | None:
    """The score at the cut's quantile over the alive rows that have the score (None: none)."""
    score = F.col(cut.score)
    at = cut.drop if cut.worst == "low" else 1 - cut.drop
    value = rows.where(alive() & score.isNotNull() & ~F.isnan(score.cast("double"))) \
        .agg(F.percentile(score.cast("double"), F.lit(at))).first()[0]
    return None if value is None else float(value)


def apply_quantile_cuts(rows: DataFrame, cfg: FilterConfig) -> DataFrame:
    for i, cut in enumerate(cfg.cuts.quantile):
        if cut.score not in rows.columns:
            stored = ", ".join(c for c in rows.columns if not c.startswith("_"))
            raise ConfigError(f"cuts.quantile[{i}].score: {cut.score!r} is not a score this run "
                              f"stores (is its rule or scorer on?); the columns are: {stored}")
        value = threshold(rows, cut)
        if value is None:
            log(f"quantile cut on {cut.score}: no row has the score, nothing rejected")
            continue
        log(f"quantile cut: {cut.score} {'<' if cut.worst == 'low' else '>'} {value:.4g} "
            f"rejected (the worst {cut.drop:.0%} of the scored rows)")
        score = F.col(cut.score)
        failing = score < value if cut.worst == "low" else score > value
        rows = reject_where(rows, failing, STAGE, cut.rule)
    return rows

"""Cuts: a decision on any stored score, after the pair scorers, where a paper states its
filter as a share ("about 10% filtered by fast_align", HW-TSC WMT21 triangular) or as a bound
on a score sluice stores without a rule of its own (fast_align's log-probabilities, an n-gram
LM's score of a side: DiDi WMT20).

A cut on a share (`drop`) rejects the rows beyond the exact percentile of the score over the
run's alive rows that have one (`percentile`, not `percentile_approx`: an approximate summary
merges per partition, so its answer could change with the cluster's shape); a row exactly at
it is kept. A cut on a bound (`min`, `max`) rejects the rows outside it. A row without the
score (never scored) passes. Cuts apply in the configured order, each over the rows the ones
before kept; a re-decide computes them again over the rows its new rules keep, as a full run
would."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.filtering.config import Cut, FilterConfig
from jobs.filtering.stages import alive, reject_where
from jobs.kit.errors import ConfigError
from jobs.kit.progress import log

STAGE = "cut"


def cut_rules(cfg: FilterConfig) -> list[tuple[str, str]]:
    return [(STAGE, cut.rule) for cut in cfg.cuts]


def percentile(rows: DataFrame, cut: Cut) -> float | None:
    """The score at the cut's quantile over the alive rows that have it (None: no such row)."""
    score = F.col(cut.score).cast("double")
    at = cut.drop if cut.worst == "low" else 1 - cut.drop
    scored = rows.where(alive() & score.isNotNull() & ~F.isnan(score))
    value = scored.agg(F.percentile(score, F.lit(at))).first()[0]
    return None if value is None else float(value)


def failing(rows: DataFrame, cut: Cut) -> Column | None:
    """Where a row fails the cut (None: the cut rejects nothing)."""
    score = F.col(cut.score)
    if cut.drop is None:
        low = score < cut.min if cut.min is not None else F.lit(False)
        high = score > cut.max if cut.max is not None else F.lit(False)
        return low | high
    value = percentile(rows, cut)
    if value is None:
        log(f"cut on {cut.score}: no row has the score, nothing rejected")
        return None
    log(f"cut: {cut.score} {'<' if cut.worst == 'low' else '>'} {value:.4g} rejected (the "
        f"worst {cut.drop:.0%} of the scored rows)")
    return score < value if cut.worst == "low" else score > value


def apply_cuts(rows: DataFrame, cfg: FilterConfig) -> DataFrame:
    for i, cut in enumerate(cfg.cuts):
        if cut.score not in rows.columns:
            stored = ", ".join(c for c in rows.columns if not c.startswith("_"))
            raise ConfigError(f"cuts[{i}].score: {cut.score!r} is not a score this run stores "
                              f"(is its rule or scorer on?); the columns are: {stored}")
        fails = failing(rows, cut)
        if fails is not None:
            rows = reject_where(rows, fails, STAGE, cut.rule)
    return rows

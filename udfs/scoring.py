"""Score only the rows still alive: the pair scorers' shared plumbing."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F


def score_where(
    df: DataFrame,
    alive: Column,
    columns: Sequence[str],
    score: Callable[[DataFrame], DataFrame],
) -> DataFrame:
    """`score` on the rows where `alive` is true; every other row (alive false or null) gets
    `columns` as null doubles and never crosses into Python: less Arrow traffic, and nullable
    longs such as `dup_of` cannot be rounded through pandas' float64. `df` is read twice
    (one branch each), so stage it first when it is expensive to compute."""
    clash = [c for c in columns if c in df.columns]
    if clash:
        raise ValueError(f"columns already present: {clash}")
    if not {"src", "tgt"} <= set(df.columns):
        raise ValueError(f"scoring needs columns src and tgt, got {df.columns}")
    live = F.coalesce(alive, F.lit(False))
    scored = score(df.where(live))
    dead = df.where(~live).withColumns({c: F.lit(None).cast("double") for c in columns})
    return scored.unionByName(dead)

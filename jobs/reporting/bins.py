"""Histograms of the select and translate reports, counted in Spark: uniform bins whose index
is the same number in Python (`Bins.index`: the tests' reference) and in Spark
(`Bins.column`), and one Spark job that bins and counts any number of values by group. Only
the counts reach the driver."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.reporting.data import CLIP, HIST_BINS


@dataclass(frozen=True)
class Bins:
    """`count` bins of `width` from `start`; a value beyond either end goes in the edge bin."""

    start: float
    width: float
    count: int

    @staticmethod
    def over(lo: float, hi: float, count: int = HIST_BINS) -> Bins:
        if not hi > lo:
            hi = lo + 1.0
        return Bins(lo, (hi - lo) / count, count)

    def index(self, value: float) -> int:
        """The bin of `value` (the same arithmetic as `column`, so the same bin)."""
        return min(max(math.floor((value - self.start) / self.width), 0), self.count - 1)

    def column(self, value: Column) -> Column:
        """The bin of `value` in Spark (null for a null value)."""
        i = F.floor((value - F.lit(self.start)) / F.lit(self.width))
        return F.least(F.greatest(i, F.lit(0)), F.lit(self.count - 1)).cast("int")

    def edges(self, index: int) -> tuple[float, float]:
        return self.start + index * self.width, self.start + (index + 1) * self.width


def clipped_ranges(df: DataFrame, values: dict[str, Column],
                   widen: dict[str, list[float]] | None = None) -> dict[str, tuple[float, float]]:
    """Each value's range over `df`: its 0.5th-99.5th percentiles (one Spark job for all),
    widened to include `widen`'s points (a cut drawn on it); a value no row has is left out."""
    if not values:
        return {}
    aggs = []
    names = list(values)
    for i, name in enumerate(names):
        col = values[name].cast("double")
        aggs += [F.min(col).alias(f"lo{i}"), F.max(col).alias(f"hi{i}"),
                 F.percentile_approx(col, list(CLIP), 1000).alias(f"q{i}")]
    row = df.agg(*aggs).collect()[0]
    out: dict[str, tuple[float, float]] = {}
    for i, name in enumerate(names):
        if row[f"lo{i}"] is None:
            continue
        lo, hi = row[f"q{i}"] if row[f"q{i}"] else (row[f"lo{i}"], row[f"hi{i}"])
        points = (widen or {}).get(name, [])
        lo, hi = min([lo, *points]), max([hi, *points])
        out[name] = (float(lo), float(hi) if hi > lo else float(lo) + 1.0)
    return out


def binned_counts(df: DataFrame, keys: list[str],
                  entries: dict[str, tuple[Column, Column, Bins]]) -> dict[tuple, list[dict]]:
    """Rows per bin and group of every value in `entries` (name -> (value, group, bins)), per
    `keys` of `df`, in one Spark job (each row becomes one entry per value): (*key values,
    name) -> [{bin_start, bin_end, group, rows}] in bin order. Null values are not counted."""
    if not entries:
        return {}
    structs = [F.struct(F.lit(name).alias("name"), bins.column(value.cast("double")).alias("bin"),
                        group.cast("string").alias("grp"))
               for name, (value, group, bins) in entries.items()]
    counts = (df.select(*keys, F.explode(F.array(*structs)).alias("e"))
              .where(F.col("e.bin").isNotNull())
              .groupBy(*keys, "e.name", "e.bin", "e.grp").count().collect())
    out: dict[tuple, list[dict[str, Any]]] = {}
    for r in counts:
        bins = entries[r["name"]][2]
        start, end = bins.edges(r["bin"])
        out.setdefault((*[r[k] for k in keys], r["name"]), []).append(
            {"bin_start": start, "bin_end": end, "group": r["grp"], "rows": r["count"]})
    for rows in out.values():
        rows.sort(key=lambda b: (b["bin_start"], b["group"]))
    return out

"""How many rows each source gives, and which: exact counts, the same rows for a seed on any
partitioning, with only counts on the driver.

Sizing (pure, `plan`): temperature sampling over directions or sources, p_g ∝ (n_g)^(1/T) x
weight_g (T = 1: natural proportions; large T: towards uniform), apportioned by largest
remainder so the counts add up to the total exactly; within a direction its sources split
its count in proportion to rows x weight. Synthetic sources of a direction with a
`synthetic_share` s are sized from its natural rows C as C·s/(1-s); fixed `count`s and
`share`s come last; `cap` and `max_epochs` cut a source's count (what they cut is not given
to others).

Drawing (Spark, `draw`): a source drawn c times from n rows gives every row c // n times
(copies 0, 1, ...) and c mod n more rows, those with the smallest xxhash64(seed, source,
row key, copy): down-sampling is the case c < n, without replacement. The remainder is cut
exactly without a global sort, as jobs/kit/sampling.py does: a histogram of the hash's top
16 bits finds the bucket the cut falls in, and only that bucket is ranked.

Quantiles (`thresholds`): exact, by a histogram over [min, max] and a rank inside the one
bin each cut falls in (an approximate sketch would depend on the partitioning)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from jobs.kit.sampling import BUCKET_SHIFT  # the hash sampler's buckets, cut per source here
from jobs.mixing.config import MixConfig

QUANTILE_BINS = 65536


@dataclass(frozen=True)
class Plan:
    """One source's draw: `count` rows (copies included) out of `eligible`."""

    source: str
    eligible: int
    planned: int  # before cap / max_epochs
    count: int

    @property
    def epochs(self) -> int:
        """Full copies of every row."""
        return self.count // self.eligible if self.eligible else 0

    @property
    def remainder(self) -> int:
        """Rows drawn once more, by hash."""
        return self.count % self.eligible if self.eligible else 0


def temperature_shares(sizes: Mapping[Hashable, int], weights: Mapping[Hashable, float],
                       temperature: float) -> dict[Hashable, float]:
    """p_g = n_g^(1/T) w_g / sum; a group without rows gets nothing."""
    q = {g: (n ** (1.0 / temperature)) * weights.get(g, 1.0) if n > 0 else 0.0
         for g, n in sizes.items()}
    total = sum(q.values())
    return {g: (v / total if total else 0.0) for g, v in q.items()}


def apportion(total: int, shares: Mapping[Hashable, float]) -> dict[Hashable, int]:
    """Integers in proportion to `shares` that add up to `total` exactly (largest remainder;
    ties go to the first key). All-zero shares give zeros."""
    s = sum(shares.values())
    if s <= 0 or total <= 0:
        return dict.fromkeys(shares, 0)
    exact = {g: total * v / s for g, v in shares.items()}
    out = {g: math.floor(x) for g, x in exact.items()}
    left = total - sum(out.values())
    order = sorted(shares, key=lambda g: (-(exact[g] - out[g]), list(shares).index(g)))
    for g in order[:left]:
        out[g] += 1
    return out


def plan(cfg: MixConfig, eligible: Mapping[str, int]) -> dict[str, Plan]:
    """Each source's count, from the eligible rows counted per source."""
    n = {s.name: eligible.get(s.name, 0) for s in cfg.sources}
    pooled = cfg.pooled()
    counts: dict[str, int] = {}
    # Temperature over groups; a direction's count split by rows x weight.
    by_source = cfg.temperature_over == "source"
    groups: dict[str, list] = {}
    for s in pooled:
        groups.setdefault(s.name if by_source else s.direction, []).append(s)
    sizes = {g: sum(n[s.name] for s in members) for g, members in groups.items()}
    weights = {g: (members[0].weight if by_source else cfg.direction_weights.get(g, 1.0))
               for g, members in groups.items()}
    shares = temperature_shares(sizes, weights, cfg.temperature)
    if cfg.total == "largest":  # the largest group keeps its size, the rest in proportion
        top = max(sizes, key=lambda g: sizes[g])
        group_counts = {top: sizes[top]} | apportion(
            round(sizes[top] / shares[top]) - sizes[top] if shares[top] else 0,
            {g: v for g, v in shares.items() if g != top})
    else:
        group_counts = apportion(cfg.total if cfg.total is not None else sum(sizes.values()),
                                 shares)
    for g, c in group_counts.items():
        members = groups[g]
        split = apportion(c, {s.name: n[s.name] * (1.0 if by_source else s.weight)
                              for s in members})
        counts.update(split)
    # Synthetic rows sized by their direction's natural rows and synthetic share.
    for direction in sorted({s.direction for s in cfg.sources}):
        share = cfg.share_of_synthetic(direction)
        if share is None:
            continue
        natural = sum(counts[s.name] for s in pooled if s.direction == direction)
        want = round(natural * share / (1.0 - share))
        synth = [s for s in cfg.sources if cfg.balanced(s) and s.direction == direction]
        counts.update(apportion(want, {s.name: n[s.name] * s.weight for s in synth}))
    for s in cfg.sources:
        if s.count is not None:
            counts[s.name] = s.count
        if s.epochs is not None:
            counts[s.name] = round(n[s.name] * s.epochs)
    shares = {s.name: s.share for s in cfg.sources if s.share is not None}
    if shares:  # a share of the whole mixture: the rest is the other (1 - sum) of it
        rest = sum(counts.values())
        whole = round(rest / (1.0 - sum(shares.values())))
        counts.update(apportion(whole - rest, shares))
    plans = {}
    for s in cfg.sources:
        want = counts.get(s.name, 0)
        got = want if n[s.name] else 0
        if s.cap is not None:
            got = min(got, s.cap)
        if s.max_epochs is not None:
            got = min(got, math.floor(s.max_epochs * n[s.name]))
        plans[s.name] = Plan(s.name, n[s.name], want, got)
    return plans


# -- drawing ----------------------------------------------------------------------------------
def row_hash(seed: int, copy: Column) -> Column:
    """The draw order of a row: its source, its key and the copy it would be."""
    return F.xxhash64(F.lit(seed), F.col("source"), F.col("_key"), copy)


def cuts(histogram: list[tuple[str, int, int]], need: Mapping[str, int]
         ) -> dict[str, tuple[int, int]]:
    """Per source, (bucket the cut falls in, rows to take from it) from (source, bucket,
    rows) counts: every row of the buckets below is taken."""
    per: dict[str, list[tuple[int, int]]] = {}
    for source, bucket, rows in histogram:
        per.setdefault(source, []).append((bucket, rows))
    out = {}
    for source, want in need.items():
        taken = 0
        for bucket, rows in sorted(per.get(source, [])):
            if taken + rows >= want:
                out[source] = (bucket, want - taken)
                break
            taken += rows
    return out


def draw(spark: SparkSession, pool: DataFrame, plans: Mapping[str, Plan], seed: int
         ) -> DataFrame:
    """`pool` (rows with `source` and a unique `_key` per source) drawn as planned, with the
    column `copy` (0-based)."""
    table = spark.createDataFrame(
        [(p.source, p.epochs, p.remainder) for p in plans.values() if p.count > 0],
        "source string, _epochs int, _rem long")
    joined = pool.join(F.broadcast(table), "source")
    full = joined.where(F.col("_epochs") > 0).withColumn(
        "copy", F.explode(F.sequence(F.lit(0), F.col("_epochs") - 1)))
    rest = joined.where(F.col("_rem") > 0).withColumn("_h", row_hash(seed, F.col("_epochs")))
    rest = rest.withColumn("_b", F.shiftright("_h", BUCKET_SHIFT))
    need = {p.source: p.remainder for p in plans.values() if p.remainder > 0}
    parts = [full.withColumn("copy", F.col("copy").cast("int"))]
    if need:
        histogram = [(r.source, r._b, r["count"])
                     for r in rest.groupBy("source", "_b").count().collect()]
        cut = spark.createDataFrame([(s, b, k) for s, (b, k) in cuts(histogram, need).items()],
                                    "source string, _cut long, _need long")
        rest = rest.join(F.broadcast(cut), "source")
        below = rest.where(F.col("_b") < F.col("_cut"))
        order = Window.partitionBy("source", "_b").orderBy("_h", "_key", "src", "tgt")
        edge = rest.where(F.col("_b") == F.col("_cut")).withColumn(
            "_r", F.row_number().over(order)).where(F.col("_r") <= F.col("_need")).drop("_r")
        parts.append(below.unionByName(edge).drop("_h", "_b", "_cut", "_need")
                     .withColumn("copy", F.col("_epochs").cast("int")))
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out.drop("_epochs", "_rem")


# -- exact quantiles ------------------------------------------------------------------------
def thresholds(rows: DataFrame, group: str, score: str, quantiles: list[float]
               ) -> dict[str, list[float | None]]:
    """Per value of `group`, the score at each quantile q: the (floor(q n) + 1)-th smallest
    of the group's n non-null scores, so `score >= it` keeps at least n - floor(q n) rows and
    a higher q keeps a subset. None where a group has no scores."""
    scored = rows.where(F.col(score).isNotNull()).select(
        F.col(group).alias("_g"), F.col(score).cast("double").alias("_s"))
    facts = {r._g: r for r in scored.groupBy("_g").agg(
        F.count("*").alias("n"), F.min("_s").alias("lo"), F.max("_s").alias("hi")).collect()}
    if not facts:
        return {}
    spark = rows.sparkSession
    bounds = spark.createDataFrame([(g, float(r.lo), float(r.hi)) for g, r in facts.items()],
                                   "_g string, _lo double, _hi double")
    width = F.col("_hi") - F.col("_lo")
    binned = scored.join(F.broadcast(bounds), "_g").withColumn("_bin", F.when(
        width > 0, F.least(F.floor((F.col("_s") - F.col("_lo")) / width * QUANTILE_BINS),
                           F.lit(QUANTILE_BINS - 1))).otherwise(F.lit(0)).cast("long"))
    hist: dict[str, list[tuple[int, int]]] = {}
    for r in binned.groupBy("_g", "_bin").count().collect():
        hist.setdefault(r._g, []).append((r._bin, r["count"]))
    wanted = []  # (group, q index, bin, 1-based position inside the bin)
    for g, r in facts.items():
        for i, q in enumerate(quantiles):
            m = math.floor(q * r.n)  # 0-based index of the cut in ascending order
            below = 0
            for b, k in sorted(hist[g]):
                if below + k > m:
                    wanted.append((g, i, b, m - below + 1))
                    break
                below += k
    want = spark.createDataFrame(wanted, "_g string, _q int, _bin long, _pos long")
    cells = want.select("_g", "_bin").distinct()
    ranked = binned.join(F.broadcast(cells), ["_g", "_bin"]).withColumn(
        "_pos", F.row_number().over(Window.partitionBy("_g", "_bin").orderBy("_s")).cast("long"))
    found = ranked.join(F.broadcast(want), ["_g", "_bin", "_pos"]).select("_g", "_q", "_s")
    out: dict[str, list[float | None]] = {g: [None] * len(quantiles) for g in facts}
    for r in found.collect():
        out[r._g][r._q] = r._s
    return out

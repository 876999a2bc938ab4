"""Near-duplicate pairs (issue 40): MinHash LSH on Spark, after exact dedup.

Exact dedup folds case, whitespace and punctuation; a web crawl also repeats itself with a
number, a date or a product name changed. Each alive row's text (the pair, or one side) is cut
into shingles (word n-grams; character n-grams for unspaced scripts, zh/ja/th), hashed; its
MinHash signature of b x r values is cut into b bands of r, and rows that share a band are
candidates. Each candidate is verified by the true Jaccard of the two shingle sets, and the
verified edges are joined into groups by min-label propagation (hash-min: each row takes the
smallest id among its neighbours' labels until none changes; a join and a group-by per round,
never collected to the driver). In each group the first row by (corpus, file, line) survives,
as exact dedup chooses, so the result is the same on any cluster shape; the others get
reject_rule `near_dup`, `dup_of` the survivor's row_id and `near_dup_jaccard` their Jaccard
to it.

Shingle hashes and the signatures' permutations `(a*h + c) mod p` in numpy over Arrow batches
(udfs/minhash.py: as Spark SQL lambdas they were interpreted value by value, 25x the CPU);
candidates, verification and groups as Spark joins and aggregations.
A candidate bucket gives star edges (each row to the bucket's smallest id), so a bucket of k
rows costs k edges, not k^2. Every join is a sort-merge join, never a broadcast, so memory per
executor stays flat as the rows grow: Spark sizes an array column at one element and a
checkpointed table by its plan, so the shingles, bucket keys and edges of 1M rows looked small
enough to broadcast and filled a 1 GB heap (bench/downstream/near_dup.py scale).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from functools import cache

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.filtering.config import FilterConfig, NearDupConf
from jobs.filtering.stages import alive, reject_where
from jobs.kit.errors import ConfigError
from jobs.kit.progress import log
from udfs.minhash import PRIME
from udfs.scripts import unspaced

SEED = 40
MAX_ROUNDS = 50  # label propagation; a near-dup group's diameter is a few edges
JACCARD = "near_dup_jaccard"
KEYS = "near_dup_keys"  # an alive row's MinHash band keys, stored with it for refreshes
SHINGLES, FIXED = "_sh", "_fixed"


# How the bands are chosen: a missed near-duplicate stays in the corpus, a false candidate
# costs one Jaccard check (every candidate is verified), so misses weigh nine times more.
# At Jaccard 0.8 and 64 values: 9 bands x 7 rows, 88% of pairs at exactly 0.8 become
# candidates, 97% at 0.85 (equal weights, datasketch's default, would give 6 x 10: 49%, 73%).
MISS_WEIGHT, FALSE_CANDIDATE_WEIGHT = 0.9, 0.1


@cache
def bands(threshold: float, num_perm: int) -> tuple[int, int]:
    """(b, r) with b*r <= num_perm minimising the weighted areas under the S-curve
    1 - (1 - s^r)^b: false candidates below `threshold`, misses above it."""
    def candidate(s: float, b: int, r: int) -> float:  # P(a pair of Jaccard s is one)
        return 1 - (1 - s ** r) ** b

    def area(b: int, r: int, lo: float, hi: float, miss: bool, steps: int = 200) -> float:
        width = (hi - lo) / steps
        points = (candidate(lo + (i + 0.5) * width, b, r) for i in range(steps))
        return sum(1 - p if miss else p for p in points) * width

    best, chosen = math.inf, (1, num_perm)
    for b in range(1, num_perm + 1):
        r = num_perm // b
        false_pos = area(b, r, 0.0, threshold, miss=False)
        false_neg = area(b, r, threshold, 1.0, miss=True)
        cost = FALSE_CANDIDATE_WEIGHT * false_pos + MISS_WEIGHT * false_neg
        if cost < best:
            best, chosen = cost, (b, r)
    return chosen


def permutations(num_perm: int) -> list[tuple[int, int]]:
    rng = random.Random(SEED)
    return [(rng.randrange(1, PRIME), rng.randrange(0, PRIME)) for _ in range(num_perm)]


def text_of(cfg: NearDupConf, mono: bool, src: Column | None = None,
            tgt: Column | None = None) -> Column:
    """What is compared: the pair (both sides), or one side; lower-cased."""
    side = "src" if mono else cfg.side
    src = F.col("src") if src is None else src
    tgt = F.col("tgt") if tgt is None else tgt
    text = {"pair": F.concat_ws(" \t ", src, tgt), "src": src, "tgt": tgt}[side]
    return F.lower(text)


def shingles(text: Column, cfg: NearDupConf, by_chars: bool) -> Column:
    """The distinct 31-bit hashes of the text's shingles (udfs/minhash.py): character
    n-grams of the text without spaces where `by_chars`, else word n-grams. A text shorter
    than one shingle is one shingle."""
    n = cfg.char_ngram if by_chars else cfg.word_ngram

    @F.pandas_udf("array<long>")
    def hashes(texts: pd.Series) -> pd.Series:
        from udfs.minhash import shingle_hashes

        return shingle_hashes(texts, n, by_chars)

    return hashes(text)


def band_keys(hashes: Column, cfg: NearDupConf) -> Column:
    """The b band keys of the MinHash signature of `hashes` (udfs/minhash.py: numpy over
    Arrow batches; the permutations as Spark lambdas are interpreted value by value)."""
    b, r = bands(cfg.threshold, cfg.num_perm)
    perms = np.array(permutations(b * r), dtype=np.int64)
    a, c = perms[:, 0], perms[:, 1]

    @F.pandas_udf("array<int>")
    def keys(h: pd.Series) -> pd.Series:
        from udfs.minhash import band_keys as numpy_band_keys

        return numpy_band_keys(h, a, c, r)

    return keys(hashes)


def jaccard(a: Column, b: Column) -> Column:
    return F.size(F.array_intersect(a, b)) / F.size(F.array_union(a, b))


def components(edges: DataFrame) -> DataFrame:
    """(id, label): each id of `edges` (a, b) with the smallest id it is connected to."""
    both = edges.select("a", "b").union(edges.select(F.col("b").alias("a"), F.col("a").alias("b")))
    both = both.localCheckpoint()
    labels = (both.groupBy("a").agg(F.least(F.min("b"), F.col("a")).alias("label"))
              .withColumnRenamed("a", "id").localCheckpoint())
    for _ in range(MAX_ROUNDS):
        offered = (both.hint("merge").join(labels, both.a == labels.id).groupBy("b")
                   .agg(F.min("label").alias("offer")))
        moved = (labels.hint("merge").join(offered, labels.id == offered.b, "left")
                 .select("id", F.col("label").alias("before"),
                         F.least("label", F.coalesce("offer", "label")).alias("label"))
                 .localCheckpoint())
        labels = moved.select("id", "label")
        if moved.where(F.col("label") != F.col("before")).isEmpty():
            return labels
    raise ConfigError(f"near_dup: groups still merging after {MAX_ROUNDS} rounds")


def by_characters(cfg: FilterConfig) -> bool:
    """Whether the compared text is cut into character n-grams: a side compared, or either
    side of a pair, is in an unspaced script (zh, ja, th)."""
    side = cfg.near_dup.side
    compared = cfg.langs if side == "pair" or cfg.mono else [cfg.langs[side == "tgt"]]
    return any(unspaced(lang) for lang in compared)


def near_dup(rows: DataFrame, cfg: FilterConfig) -> DataFrame:
    """`rows` with the near-duplicates among the alive ones rejected (module docstring), and
    each alive row's band keys in `near_dup_keys` (stored: a refresh compares new rows with
    them, jobs/refreshing/near_dup.py)."""
    announce(cfg)
    shingle = Shingler(cfg)
    hashed = rows.where(alive()).select("row_id", "corpus", "file", "line",
                                        shingle(F.col("src"), F.col("tgt")))
    keyed = hashed.select("*", F.lit(False).alias(FIXED),
                          shingle.keys(F.col(SHINGLES)).alias(KEYS)).localCheckpoint()
    # Every row's shingles are at hand: no need to pick the candidates' out.
    decided = decisions(keyed, lambda ids: keyed.select("row_id", SHINGLES),
                        cfg.near_dup.threshold)
    return apply(rows, keyed, decided)


def announce(cfg: FilterConfig) -> None:
    nd = cfg.near_dup
    b, r = bands(nd.threshold, nd.num_perm)
    log(f"near_dup: Jaccard >= {nd.threshold} of {nd.side} shingles, MinHash {b} bands x "
        f"{r} rows (the S-curve's 50% point at {(1 / b) ** (1 / r):.2f})")


class Shingler:
    """The run's shingles (`SHINGLES`, from the src and tgt columns) and band keys."""

    def __init__(self, cfg: FilterConfig) -> None:
        self.nd, self.mono, self.by_chars = cfg.near_dup, cfg.mono, by_characters(cfg)

    def __call__(self, src: Column, tgt: Column) -> Column:
        text = text_of(self.nd, self.mono, src, tgt)
        return shingles(text, self.nd, self.by_chars).alias(SHINGLES)

    def keys(self, hashes: Column) -> Column:
        return band_keys(hashes, self.nd)


def decisions(keyed: DataFrame, shingles_of: Callable[[DataFrame], DataFrame],
              threshold: float) -> DataFrame:
    """(row_id, _survivor, _j) of each near-duplicate among `keyed` (row_id, corpus, file,
    line, `FIXED`, `KEYS`, and `SHINGLES` where the caller has them): its group's survivor and
    its Jaccard to it. `shingles_of(ids)` gives (row_id, `SHINGLES`) of at least the rows
    `ids` (those sharing a bucket with another). A `FIXED` row (one a refresh cannot rewrite)
    survives, and first in its group."""
    # Star edges, each row to the smallest id of a bucket it shares: the buckets' first ids
    # by plain aggregation, then joined back (a list of each bucket's ids, collect_set, falls
    # back to sorting object rows at a million rows and ran out of a 1 GB heap).
    exploded = keyed.select("row_id", F.posexplode(KEYS)).localCheckpoint()
    firsts = (exploded.groupBy("pos", "col").agg(F.min("row_id").alias("a"),
                                                 F.count("*").alias("_n"))
              .where(F.col("_n") > 1).drop("_n"))
    edges = (exploded.hint("merge").join(firsts, ["pos", "col"])
             .where(F.col("row_id") != F.col("a"))
             .select("a", F.col("row_id").alias("b")).distinct())
    ids = (edges.select(F.col("a").alias("row_id")).union(edges.select(F.col("b"))).distinct()
           .hint("merge"))  # joined with every row's shingles or text
    sh = shingles_of(ids).hint("merge")
    verified = (edges.join(sh.toDF("a", "_sa"), "a").join(sh.toDF("b", "_sb"), "b")
                .where(jaccard(F.col("_sa"), F.col("_sb")) >= threshold).select("a", "b"))
    groups = components(verified)
    first = F.min(F.struct(~F.col(FIXED), "corpus", "file", "line", "row_id"))
    placed = keyed.hint("merge").join(groups, keyed.row_id == groups.id).drop("id")
    survivors = placed.groupBy("label").agg(first["row_id"].alias("_survivor"))
    dups = (placed.hint("merge").join(survivors, "label")
            .where((F.col("row_id") != F.col("_survivor")) & ~F.col(FIXED)))
    if SHINGLES not in dups.columns:
        dups = dups.join(sh.toDF("row_id", SHINGLES), "row_id")
    return (dups.join(sh.toDF("_survivor", "_ss"), "_survivor")
            .select("row_id", "_survivor", jaccard(F.col(SHINGLES), F.col("_ss")).alias("_j")))


def apply(rows: DataFrame, keyed: DataFrame, decided: DataFrame) -> DataFrame:
    """`rows` with the alive ones' `KEYS` from `keyed` and the near-duplicates in `decided`
    (`decisions`) rejected, with `dup_of` their survivor and `near_dup_jaccard`."""
    if "dup_of" not in rows.columns:  # exact dedup off
        rows = rows.withColumn("dup_of", F.lit(None).cast("long"))
    fates = keyed.select("row_id", F.col(KEYS).alias("_keys")).join(
        decided.hint("merge"), "row_id", "left")
    out = (rows.drop(KEYS, JACCARD).join(fates.hint("merge"), "row_id", "left")
           .select(*[c for c in rows.columns if c not in (KEYS, JACCARD)], "_keys",
                   "_survivor", "_j"))
    is_dup = alive() & F.col("_survivor").isNotNull()
    out = out.withColumns({
        "dup_of": F.when(is_dup, F.col("_survivor")).otherwise(F.col("dup_of")),
        JACCARD: F.when(is_dup, F.col("_j").cast("double")),
        KEYS: F.when(alive(), F.col("_keys")),
    })
    return reject_where(out, is_dup, "near_dup", "near_dup").drop("_survivor", "_j", "_keys")

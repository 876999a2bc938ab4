"""Exactly N rows of a DataFrame, the same ones on every run, without a global sort.

Rows are ordered by a seeded hash of their id; the N smallest are taken. A histogram of the
hash's top 16 bits (at most 65,536 counts) finds the bucket where the cut falls; every row of
the buckets below it is taken, and only that one bucket (about rows/65,536) is ranked. The
result is a uniform sample that is nested (the first 10 are among the first 20) and stable
across reruns and machines, given stable ids.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

BUCKET_SHIFT = 48  # the top 16 bits of the 64-bit hash


def id_hash(seed: int, id_col: str) -> Column:
    """The seeded hash a row is drawn by: its id's."""
    return F.xxhash64(id_col, F.lit(seed))


def hashed(rows: DataFrame, key: Column) -> DataFrame:
    """`rows` with their hash (`_h`) and its bucket (`_b`)."""
    return rows.withColumn("_h", key).withColumn("_b", F.shiftright("_h", BUCKET_SHIFT))


def hash_buckets(rows: DataFrame, seed: int, id_col: str) -> list[tuple[int, int]]:
    """(bucket, rows in it), ascending. Their sum is the row count: one pass for both."""
    return key_buckets(rows, id_hash(seed, id_col))


def key_buckets(rows: DataFrame, key: Column) -> list[tuple[int, int]]:
    counts = hashed(rows, key).groupBy("_b").count().collect()
    return sorted((r["_b"], r["count"]) for r in counts)


def first_by_hash(rows: DataFrame, quota: int, seed: int, id_col: str,
                  buckets: list[tuple[int, int]] | None = None) -> DataFrame:
    """The `quota` rows with the smallest xxhash64(id, seed); all rows if there are fewer.
    `buckets`: hash_buckets() of the same rows and seed, if already counted."""
    return first_by_key(rows, quota, id_hash(seed, id_col), [id_col], buckets)


def first_by_key(rows: DataFrame, quota: int, key: Column, ties: Sequence[str],
                 buckets: list[tuple[int, int]] | None = None) -> DataFrame:
    """The `quota` rows with the smallest `key` (a 64-bit hash), ties broken by the columns
    `ties`; all rows if there are fewer. `buckets`: key_buckets() of the same rows and key."""
    cut, need, taken = None, 0, 0
    for bucket, n in buckets if buckets is not None else key_buckets(rows, key):
        if taken + n >= quota:
            cut, need = bucket, quota - taken
            break
        taken += n
    if cut is None:  # fewer rows than the quota
        return rows
    with_hash = hashed(rows, key)
    rank = F.row_number().over(Window.partitionBy("_b").orderBy("_h", *ties))
    edge = with_hash.where(F.col("_b") == cut).withColumn("_r", rank).where(F.col("_r") <= need)
    below = with_hash.where(F.col("_b") < cut)
    return below.unionByName(edge.drop("_r")).drop("_h", "_b")

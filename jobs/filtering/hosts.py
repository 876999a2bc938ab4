"""Evidence from a pair's website (its `host`, README "Crawled corpora"): what the other pairs
from the same site say. A site that machine-translated its pages did so for most of them,
so the MT detector's mean over a pair's site (`host_mt`) is a pair_score input of the shipped
crawl model (docs/measurements/crawl-evidence.md). Big multilingual sites are where MT'd
pages come from; `host_langs` and `host_pairs` count that, on a lake's scale, for models
trained on a user's own lake.

Per row with a host, over the run's rows and the lake's committed rows of every pair (those
the run does not rewrite), whatever their outcome:

- `host_pairs`: the host's other pairs (0 for a site seen once);
- `host_langs`: the language pairs (or languages) the host has;
- `host_mt`: the mean `mt_human` of the host's other scored pairs, leave-one-out (null where
  there is none, or no MT detector ran).

One aggregate by host and a join, on the executors: no collect. A refresh that adds pairs to
a host re-decides the pair's committed files that share a host with the new rows, so their
features are what a full run would give (jobs/refreshing/job.py); rows of other language
pairs are brought up to date when their own pair is next filtered or refreshed.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

HOST_FEATURES = ("host_pairs", "host_langs", "host_mt")
MT_SCORE = "mt_human"  # the MT detector's (jobs/filtering/steps.py `MtDetector`)
_KEY, _MT, _N, _SUM, _SCORED = "_h_key", "_h_mt", "_h_n", "_h_sum", "_h_scored"


def host_rows(df: DataFrame, key: str) -> DataFrame:
    """(host, key, mt) of the rows with a host: what the aggregate counts."""
    mt = F.col(MT_SCORE) if MT_SCORE in df.columns else F.lit(None).cast("double")
    return df.where(F.col("host").isNotNull()).select(
        "host", F.col(key).alias(_KEY), mt.cast("double").alias(_MT))


def with_host_features(rows: DataFrame, key: str, others: DataFrame | None) -> DataFrame:
    """`rows` plus HOST_FEATURES (null where a row has no host). `others`: the lake's
    committed rows the run does not rewrite (None: the run's rows alone); `key`: the column
    naming the language pair (or language)."""
    pool = host_rows(rows, key)
    if others is not None:
        pool = pool.unionByName(host_rows(others, key))
    stats = pool.groupBy("host").agg(
        F.count("*").alias(_N), F.countDistinct(_KEY).alias("host_langs"),
        F.sum(_MT).alias(_SUM), F.count(_MT).alias(_SCORED))
    own = F.col(MT_SCORE) if MT_SCORE in rows.columns else F.lit(None).cast("double")
    others_scored = F.col(_SCORED) - F.when(own.isNotNull(), 1).otherwise(0)
    out = rows.drop(*[c for c in HOST_FEATURES if c in rows.columns]).join(
        stats, "host", "left")
    return out.select(
        *[c for c in rows.columns if c not in HOST_FEATURES],
        (F.col(_N) - 1).cast("long").alias("host_pairs"),
        F.col("host_langs").cast("long").alias("host_langs"),
        F.when(others_scored > 0, (F.col(_SUM) - F.coalesce(own, F.lit(0.0))) / others_scored)
        .alias("host_mt"))

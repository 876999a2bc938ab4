"""Lake-wide near-duplicates for a refresh (issue 40), decided as a `--full` refresh of the
sources as they are now would decide them.

After the refresh's exact dedup (jobs/refreshing/dedup.py) the rows compared are its new rows
alive there and the committed rows of kept files alive there again, with the clean rows of
files no refresh wrote as fixed survivors. Committed rows bring their stored band keys
(`near_dup_keys`: no MinHash again); only rows without them (committed before they were
stored, or a plain filter run's rows, whose near_dup settings may differ) are hashed from
their stored text. Candidates and groups are then computed over all of them as the filter job
computes them (jobs/filtering/near_dup.py), so a new row can take a committed survivor's place
and a group whose bridge went can split. Shingles are recomputed only for the rows that share
a bucket, to verify their Jaccard. A committed row whose decision changes has its file carried
as for exact dedup.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.filtering.config import FilterConfig
from jobs.filtering.near_dup import FIXED, KEYS, Shingler, announce, apply, decisions
from jobs.filtering.stages import alive

ORDER = ["row_id", "corpus", "file", "line"]


def lake_near_dup(marked: DataFrame, stored: DataFrame, fixed: DataFrame,
                  cfg: FilterConfig, committed: str) -> DataFrame:
    """`marked` (new and committed rows after exact dedup; committed ones flagged by the
    boolean column `committed`) with the near-duplicates among its alive rows rejected.
    `stored`: the committed rows still in the lake (their text); `fixed`: those of them that
    survive whatever the refresh finds."""
    announce(cfg)
    shingle = Shingler(cfg)
    texts = (marked.where(~F.col(committed)).select("row_id", "src", "tgt")
             .unionByName(stored.select("row_id", "src", "tgt")))
    known = F.col(KEYS) if KEYS in marked.columns else F.lit(None).cast("array<int>")
    compared = (marked.where(alive())
                .select(*ORDER, F.lit(False).alias(FIXED),
                        F.when(F.col(committed), known).alias(KEYS))
                .unionByName(fixed.select(*ORDER, F.lit(True).alias(FIXED),
                                          F.lit(None).cast("array<int>").alias(KEYS))))
    hashed = (compared.where(F.col(KEYS).isNull()).drop(KEYS)
              .join(texts.hint("merge"), "row_id")
              .select(*ORDER, FIXED, shingle.keys(shingle(F.col("src"), F.col("tgt"))).alias(KEYS)))
    keyed = compared.where(F.col(KEYS).isNotNull()).unionByName(hashed).localCheckpoint()

    def shingles_of(ids: DataFrame) -> DataFrame:  # staged: each is read three times
        return ids.join(texts.hint("merge"), "row_id").select(
            "row_id", shingle(F.col("src"), F.col("tgt"))).localCheckpoint()

    return apply(marked, keyed, decisions(keyed, shingles_of, cfg.near_dup.threshold))

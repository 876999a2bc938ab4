"""Exact ranks over a whole DataFrame without moving it into one task.

A Window with no partition sorts every row in one task. Here the rows are range-partitioned
on the order and sorted within each partition; each row's position in its partition comes
from `monotonically_increasing_id` (partition index in the upper bits, position in the lower
33); the rank is the partition's offset (rows in the partitions before it) plus that position.
The order must be total (end it with a unique column), so the ranks are 1..n, each once, the
same on every run.
"""

from __future__ import annotations

from itertools import accumulate

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

POSITION_BITS = 33


def global_rank(rows: DataFrame, order: list[Column], work_dir: str, name: str = "rank"
                ) -> DataFrame:
    """`rows` plus `name` (1..n in `order`). `work_dir` holds the sorted rows once (read
    twice: to count each partition, then to number it)."""
    parts = max(1, rows.rdd.getNumPartitions())
    ordered = rows.repartitionByRange(parts, *order).sortWithinPartitions(*order)
    ordered.withColumn("_pos", F.monotonically_increasing_id()).write.mode(
        "overwrite").parquet(work_dir)
    staged = rows.sparkSession.read.parquet(work_dir).withColumns({
        "_part": F.shiftright("_pos", POSITION_BITS),
        "_local": F.col("_pos").bitwiseAND(F.lit((1 << POSITION_BITS) - 1)),
    })
    counts = sorted((r["_part"], r["count"]) for r in staged.groupBy("_part").count().collect())
    offsets = [0, *accumulate(n for _, n in counts)]
    if not counts:
        return staged.withColumn(name, F.lit(None).cast("long")).drop("_pos", "_part", "_local")
    lookup = F.create_map(*[x for (part, _), off in zip(counts, offsets, strict=False)
                            for x in (F.lit(part), F.lit(off))])
    return staged.withColumn(name, F.element_at(lookup, F.col("_part")) + F.col("_local") + 1
                             ).drop("_pos", "_part", "_local")

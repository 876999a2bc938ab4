"""The one hash sampler (jobs/kit/sampling.py) as the aligner's training sample draws with it:
exactly the n pairs of smallest seeded text hash, in that order, on any partitioning."""

from __future__ import annotations

from pyspark.sql import functions as F

from jobs.filtering.pair_scores import training_sample

DATA_PAIRS = "tatoeba-zh-en"


def pairs(spark, data_dir, partitions: int):
    zh = (data_dir / f"{DATA_PAIRS}.zh").read_text(encoding="utf-8").splitlines()
    en = (data_dir / f"{DATA_PAIRS}.en").read_text(encoding="utf-8").splitlines()
    rows = [(z, e, "too_long" if i % 7 == 0 else None)  # every 7th pair rejected: not drawn
            for i, (z, e) in enumerate(zip(zh, en, strict=True))]
    return spark.createDataFrame(rows, "src string, tgt string, reject_rule string").repartition(
        partitions)


def by_brute_force(df, n: int, seed: int) -> list[tuple[str, str]]:
    """Every alive pair's hash computed, sorted on the driver: what the sampler must equal."""
    rows = (df.where(F.col("reject_rule").isNull())
            .select("src", "tgt", F.xxhash64(F.lit(seed), "src", "tgt").alias("h")).collect())
    return [(r.src, r.tgt) for r in sorted(rows, key=lambda r: (r.h, r.src, r.tgt))[:n]]


def test_the_training_sample_is_the_smallest_hashes_on_any_partitioning(spark, data_dir):
    one, five = pairs(spark, data_dir, 1), pairs(spark, data_dir, 5)
    expected = by_brute_force(one, 300, seed=13)
    assert len(expected) == 300 and len(set(expected)) > 290
    assert training_sample(one, 300) == expected
    assert training_sample(five, 300) == expected
    assert training_sample(five, 150) == expected[:150]  # nested
    alive = one.where(F.col("reject_rule").isNull()).count()
    assert len(training_sample(five, 10 * alive)) == alive  # fewer than asked: all of them
    assert training_sample(one, 300, seed=14) != expected

"""Throughput of the default embedding scorer (USE, numpy) through Spark on local[2].

Scores real newstest zh-en pairs with `add_embedding_scores` (cosine + margin, k=4) and prints
pairs/s and pairs/s per core, next to the bare encoder in one process and in one process per
core started together (the fair baseline: on a machine whose cores do not scale, two
processes do not double one), so the ratio shows what Spark's Arrow round trip and the margin
cost on top of encoding.

    python -m bench.scorers.embed [--pairs 20000] [--model models/use-multilingual-v3]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time

from bench.kit import SHARED

NEWSTEST = SHARED / "bitext" / "newstest" / "zh-en"
CORES = 2


def newstest_pairs(n: int) -> list[tuple[str, str]]:
    """Up to n distinct zh-en pairs from newstest 2017-2020 (no repeated sources, so the
    scorer's dedup of identical texts does not flatter the number)."""
    seen: dict[str, str] = {}
    for year in (2017, 2018, 2019, 2020):
        zh = (NEWSTEST / f"newstest{year}.zh").read_text(encoding="utf-8").splitlines()
        en = (NEWSTEST / f"newstest{year}.en").read_text(encoding="utf-8").splitlines()
        for s, t in zip(zh, en, strict=True):
            seen.setdefault(s, t)
    return list(seen.items())[:n]


def bare_rate(model: str, pairs: list[tuple[str, str]], processes: int) -> float:
    """Pairs/s of the bare encoder (one BLAS thread each) in `processes` processes started
    together, each on its share of the pairs: what the cores give without Spark."""
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    shares = [pairs[i::processes] for i in range(processes)]
    workers = [
        ctx.Process(target=_encode_share, args=(model, share, barrier, results)) for share in shares
    ]
    for w in workers:
        w.start()
    seconds = max(results.get() for _ in workers)
    for w in workers:
        w.join()
    return len(pairs) / seconds


def _encode_share(model: str, pairs: list[tuple[str, str]], barrier, results) -> None:
    from udfs.encoders import UseEncoder

    encoder = UseEncoder(os.path.abspath(model), threads=1)
    encoder.encode(["warm up"], 1)
    barrier.wait()  # model loads are not timed; encoding starts together
    start = time.perf_counter()
    encoder.encode([s for s, _ in pairs], 1)
    encoder.encode([t for _, t in pairs], 1)
    results.put(time.perf_counter() - start)


def spark_rate(model: str, pairs: list[tuple[str, str]], margin_k: int) -> float:
    """Pairs/s of add_embedding_scores on local[2], model load excluded (a warm-up job loads
    it in both Python workers, which Spark reuses)."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from udfs.embed import EncoderSpec, add_embedding_scores

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(f"local[{CORES}]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(CORES))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    spec = EncoderSpec("use", os.path.abspath(model))
    df = spark.createDataFrame(pairs, "src string, tgt string").repartition(CORES).cache()
    df.count()

    def run(frame) -> float:
        start = time.perf_counter()
        add_embedding_scores(frame, spec, F.lit(True), margin_k).write.format("noop").mode(
            "overwrite"
        ).save()
        return time.perf_counter() - start

    run(df.limit(400).repartition(CORES))  # warm-up
    seconds = run(df)
    spark.stop()
    return len(pairs) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument("--model", default="models/use-multilingual-v3")
    parser.add_argument("--margin-k", type=int, default=4)
    args = parser.parse_args()
    pairs = newstest_pairs(args.pairs)
    one = bare_rate(args.model, pairs[:2000], 1)
    both = bare_rate(args.model, pairs[:4000], CORES)
    spark = spark_rate(args.model, pairs, args.margin_k)
    print(f"{len(pairs)} newstest zh-en pairs, USE multilingual v3, margin k={args.margin_k}")
    print(f"bare encoder, 1 process: {one:,.0f} pairs/s")
    print(f"bare encoder, {CORES} processes at once: {both:,.0f} pairs/s ({both / one:.2f}x)")
    print(
        f"Spark local[{CORES}] add_embedding_scores: {spark:,.0f} pairs/s = "
        f"{spark / CORES:,.0f} pairs/s per core; {spark / both:.2f}x the bare {CORES}-process rate"
    )


if __name__ == "__main__":
    main()

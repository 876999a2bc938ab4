"""Word-alignment scorer throughput (training on the driver, scoring through Spark) and how well
its scores separate real pairs from misaligned ones, on real data from ../shared/data.

    python -m bench.scorers.align [--pair zh-en] [--train-pairs 100000] [--score-pairs 100000]

Data: WMT21-23 system outputs and references (`wmt21-23.<pair>.tsv.gz` and the reverse
direction, swapped), distinct pairs, shuffled with a fixed seed. Steps, one process:
  1. train_alignment on --train-pairs pairs (at most 3/4 of them, so some stay unseen):
     tokenization + fast_align, both directions, on the driver;
  2. on a local[2] session, read --score-pairs pairs from Parquet and write them to the `noop`
     sink (a) unchanged through an identity mapInPandas, (b) through add_alignment_scores;
  3. the score quantiles of real pairs vs the same pairs with targets rotated by half the sample
     (misaligned), for pairs inside the training sample and for held-out pairs (their source
     sentence not in the sample: the model scores these less confidently).
Prints pairs/s (per core) for training and scoring, (b) net of (a), and the quantiles.
Measured numbers only: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from bench.kit import WMT_OUTPUTS
from jobs.lake.session import build_session
from udfs.align import SCORE_COLUMNS, add_alignment_scores, train_alignment
from udfs.align_model import AlignmentModel

CORES = 2  # local[2]


def read_pairs(pair: str) -> list[tuple[str, str]]:
    """Distinct (src, tgt) pairs of both directions of `pair`, shuffled (seed 5)."""
    src_lang, tgt_lang = pair.split("-")
    pairs: set[tuple[str, str]] = set()
    for direction, swap in ((f"{src_lang}-{tgt_lang}", False), (f"{tgt_lang}-{src_lang}", True)):
        path = WMT_OUTPUTS / f"wmt21-23.{direction}.tsv.gz"
        with gzip.open(path, "rt", encoding="utf-8") as f:
            next(f)  # header: year testset system seg_id src tgt
            for line in f:
                src, tgt = line.rstrip("\n").split("\t")[4:6]
                pairs.add((tgt, src) if swap else (src, tgt))
    ordered = sorted(pairs)
    random.Random(5).shuffle(ordered)
    return ordered


def bench_training(pairs: list[tuple[str, str]], pair: str, out_dir: str) -> None:
    """Training runs in this process: its CPU time over wall time is the cores it used."""
    src_lang, tgt_lang = pair.split("-")
    start, cpu_start = time.perf_counter(), _cpu_seconds()
    train_alignment(pairs, src_lang, tgt_lang, out_dir)
    seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu_start
    fast_align = json.loads(Path(out_dir, "manifest.json").read_text())["train_seconds"]
    size = sum(f.stat().st_size for f in Path(out_dir).iterdir()) / 2**20
    print(
        f"training: {len(pairs):,} pairs in {seconds:.1f} s ({fast_align:.1f} s in fast_align,"
        f" the rest tokenizing) = {len(pairs) / seconds:,.0f} pairs/s on {cpu / seconds:.2f}"
        f" cores = {len(pairs) / cpu:,.0f} pairs per CPU-second; model files {size:.1f} MiB",
        flush=True,
    )
    start = time.perf_counter()
    AlignmentModel.load(out_dir)
    print(f"model load (once per Python worker): {time.perf_counter() - start:.2f} s", flush=True)


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def identity(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    yield from batches


def timed_noop(df: DataFrame) -> float:
    start = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def bench_scoring(spark, pairs: list[tuple[str, str]], pair: str, model_dir: str, tmp: str):
    src_lang, tgt_lang = pair.split("-")
    path = os.path.join(tmp, "pairs.parquet")
    spark.createDataFrame(pd.DataFrame(pairs, columns=["src", "tgt"])).repartition(
        2 * CORES
    ).write.parquet(path)
    df = spark.read.parquet(path)
    alive = F.lit(True)
    copy = timed_noop(df.mapInPandas(identity, df.schema))
    scored = timed_noop(add_alignment_scores(df, model_dir, src_lang, tgt_lang, alive))
    n = len(pairs)
    print(f"scoring through Spark, local[{CORES}], {n:,} pairs:")
    print(f"  identity mapInPandas: {copy:.1f} s = {n / copy / CORES:,.0f} pairs/s per core")
    print(f"  add_alignment_scores: {scored:.1f} s = {n / scored / CORES:,.0f} pairs/s per core")
    net = scored - copy
    print(f"  scoring alone (difference): {n / net / CORES:,.0f} pairs/s per core", flush=True)


def held_out(pairs: list[tuple[str, str]], n_train: int, n: int) -> list[tuple[str, str]]:
    """Pairs after the training sample whose source sentence never occurs in it (the data
    holds many translations of each source: those of a trained source are half seen)."""
    seen = {s for s, _ in pairs[:n_train]}
    return [(s, t) for s, t in pairs[n_train:] if s not in seen][:n]


def score_quantiles(
    spark, pairs: list[tuple[str, str]], pair: str, model_dir: str, label: str
) -> None:
    """Real pairs vs the same pairs with targets rotated by half the sample (misaligned)."""
    if not pairs:
        print(f"{label}: no pairs")
        return
    src_lang, tgt_lang = pair.split("-")
    half = len(pairs) // 2
    rotated = [(s, t) for (s, _), (_, t) in zip(pairs, pairs[half:] + pairs[:half], strict=True)]
    frames = {}
    for name, rows in (("real", pairs), ("misaligned", rotated)):
        df = spark.createDataFrame(
            pd.DataFrame(rows, columns=["src", "tgt"]), "src string, tgt string"
        )
        scored = add_alignment_scores(df, model_dir, src_lang, tgt_lang, F.lit(True))
        frames[name] = scored.select(*SCORE_COLUMNS).toPandas()
    print(f"{label}: {len(pairs):,} real pairs vs the same with targets rotated by half")
    print("  score quantiles (10%, 50%, 90%):")
    for column in SCORE_COLUMNS:
        for name, frame in frames.items():
            q = np.nanpercentile(frame[column].to_numpy(dtype=float), [10, 50, 90])
            print(f"    {column:18} {name:10} {q.round(3)}")
    for name, frame in frames.items():
        below = (frame["align_coverage"] < 0.6).mean()
        print(f"    {name}: {below:.1%} below the published coverage threshold 0.6", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pair", default="zh-en", help="zh-en, en-zh, ru-en, en-ru, ...")
    parser.add_argument("--train-pairs", type=int, default=100_000)
    parser.add_argument("--score-pairs", type=int, default=100_000)
    parser.add_argument("--quality-pairs", type=int, default=10_000)
    args = parser.parse_args()

    pairs = read_pairs(args.pair)
    print(f"{len(pairs):,} distinct real {args.pair} pairs (WMT21-23 system outputs)", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-align-") as tmp:
        model_dir = os.path.join(tmp, "model")
        n_train = min(args.train_pairs, len(pairs) * 3 // 4)  # keep some pairs unseen
        bench_training(pairs[:n_train], args.pair, model_dir)
        spark = build_session(
            "bench-align",
            os.path.join(tmp, "lake"),
            master=f"local[{CORES}]",
            conf={
                "spark.ui.enabled": "false",
                "spark.ui.showConsoleProgress": "false",
                "spark.sql.shuffle.partitions": str(2 * CORES),
            },
        )
        try:
            score = [pairs[i % len(pairs)] for i in range(args.score_pairs)]
            bench_scoring(spark, score, args.pair, model_dir, tmp)
            n = args.quality_pairs
            score_quantiles(spark, pairs[:n], args.pair, model_dir, "in the training sample")
            unseen = held_out(pairs, n_train, n)
            score_quantiles(spark, unseen, args.pair, model_dir, "held out (not in the sample)")
        finally:
            spark.stop()


if __name__ == "__main__":
    main()

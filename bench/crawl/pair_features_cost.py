"""CPU of the pair_score's text features (issue 23): `number_mismatch`, `sentence_end_diff` and
`capitals_gap` are the only features computed from the text at scoring time (the others read
stored scores); and of the model applied to its features, additive (steps) or linear.
Times each over real WMT21-23 pairs against a plain pass over the same cached rows, in one
session, and prints microseconds per pair of each (JVM CPU: the expressions run there).

    python -m bench.crawl.pair_features_cost [--pair zh-en] [--rows 400000]

Measured 2026-11-25 (all 104,619 zh-en pairs of the file): number_mismatch +4.6 core-µs per
pair, sentence_end_diff +8.8, against sluice's ~365 µs of CPU per pair for the whole default
funnel (docs/filtering.md "Throughput"): about 4% more, and only in runs with pair_score on.
Measured 2026-11-28: capitals_gap +19.3 core-µs per pair (zh-en), +18.3 (--pair de-en). The
model itself over stand-in feature columns: the shipped additive USE model +2.0 core-µs per
pair, a linear model of the same features +0.3.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from pathlib import Path

from bench.kit import REPO, SHARED


def read_pairs(data: Path, pair: str, n: int) -> list[tuple[str, str]]:
    path = data / f"bitext/wmt21-23-system-outputs/wmt21-23.{pair}.tsv.gz"
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) == 6:
                out.append((fields[4], fields[5]))
            if len(out) == n:
                break
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", default="zh-en")
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--data", type=Path, default=SHARED)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import numpy as np
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from jobs.filtering.pair_score_model import fit_monotone
    from udfs.pair_features import capitals_gap, number_mismatch, score_of, sentence_ends

    spark = (SparkSession.builder.master("local[2]").appName("pair-features-cost")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    pairs = read_pairs(args.data, args.pair, args.rows)
    df = spark.createDataFrame(pairs, "src string, tgt string").repartition(4).cache()
    df.count()
    src, tgt = F.col("src"), F.col("tgt")
    exprs = {
        "plain pass (length of both sides)": F.length(src) + F.length(tgt),
        "number_mismatch": number_mismatch(src, tgt),
        "sentence_end_diff": F.abs(sentence_ends(src) - sentence_ends(tgt)),
        "capitals_gap": capitals_gap(src, tgt),
    }
    # The model over its features, the features here stand-in columns (the cosine and rule
    # scores a run stores): the shipped USE model as trained (additive: a CASE per feature)
    # and the linear model of the same features, to see what the steps cost.
    shipped = json.loads((REPO / "conf/pair_score/paracrawl-use.json").read_text())
    stand_in = {n: (F.length(src) % (i + 7)) / (i + 7.0)
                for i, n in enumerate(shipped["features"])}
    linear = fit_monotone(shipped["features"], np.random.default_rng(0).random(
        (400, len(shipped["features"]))), np.arange(400) % 2)
    exprs |= {"its stand-in features (plain pass)": sum(stand_in.values()),
              f"pair_score, {shipped['learner']} (USE's shipped)": score_of(shipped, stand_in),
              "pair_score, linear": score_of(linear, stand_in)}
    timings = {}
    for name, expr in exprs.items():
        best = float("inf")
        for _ in range(3):  # the best of three: JIT and caches warm
            start = time.perf_counter()
            df.select(F.sum(expr)).collect()
            best = min(best, time.perf_counter() - start)
        timings[name] = best
    print(f"{len(pairs):,} {args.pair} pairs, local[2], best of 3 (wall on 2 cores)")
    for name, seconds in timings.items():
        base = "its stand-in features (plain pass)" if name.startswith("pair_score") \
            else "plain pass (length of both sides)"
        extra = "" if "plain pass" in name else \
            f"  (+{(seconds - timings[base]) / len(pairs) * 2e6:.2f} core-µs per pair over {base})"
        print(f"  {name:42} {seconds:6.2f} s{extra}")
    spark.stop()


if __name__ == "__main__":
    main()

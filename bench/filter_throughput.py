"""Filter job throughput vs the floor of just moving the bytes, in one process.

    python bench/filter_throughput.py [--pairs 1000000] [--master local[2]]

Builds a TSV of real pairs from ../shared/data (WMT21-23 system outputs, zh-en and en-zh
directions, repeated to --pairs), then times on the same session:
  (a) a plain Spark copy: read the TSV, write Parquet;
  (b) the filter job's stages (ingest, normalize, rules, language ID, dedup) written as Parquet.
Prints pairs/s per core for both, the ratio (b)/(a), and peak memory of driver + workers.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import resource
import tempfile
import time
from pathlib import Path

from pyspark.sql import functions as F

from jobs.config import InputConf, load_config
from jobs.ingest import read_input
from jobs.session import build_session
from jobs.stages import dedup, normalize_and_analyze, score_and_decide

SHARED = Path(__file__).resolve().parent.parent.parent / "shared/data/bitext"


def build_corpus(path: Path, n_pairs: int) -> None:
    src = SHARED / "wmt21-23-system-outputs/wmt21-23.zh-en.tsv.gz"
    with gzip.open(src, "rt", encoding="utf-8") as f:
        next(f)  # header: year testset system seg_id src tgt
        pairs = [line.rstrip("\n").split("\t")[4:6] for line in f]
    with open(path, "w", encoding="utf-8") as out:
        for zh, en in itertools.islice(itertools.cycle(pairs), n_pairs):
            out.write(f"{zh}\t{en}\n")


def timed(label: str, action) -> float:
    start = time.perf_counter()
    action()
    seconds = time.perf_counter() - start
    print(f"{label}: {seconds:.1f} s", flush=True)
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=1_000_000)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    cores = int(args.master.removeprefix("local[").removesuffix("]") or 1)
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-"))
    corpus = work / "corpus.tsv"
    build_corpus(corpus, args.pairs)
    cfg = load_config(extra={"pair": "zh-en", "lake": {"root": str(work / "lake")}})
    spark = build_session("sluice-bench", cfg.lake.root, args.master, cfg.spark.conf)
    model = str(Path(cfg.langid.model).resolve())

    def copy() -> None:
        df = spark.read.option("sep", "\t").csv(str(corpus)).toDF("src", "tgt")
        df.write.mode("overwrite").parquet(str(work / "copy"))

    def filter_job() -> None:
        raw = read_input(
            spark,
            InputConf(corpus="bench", paths=[str(corpus)]),
            "zh-en",
            cfg.ingest.max_line_chars,
        )
        out = dedup(score_and_decide(normalize_and_analyze(raw, cfg, model), cfg), cfg)
        out.withColumn("outcome", F.col("reject_rule").isNull()).write.mode(
            "overwrite"
        ).partitionBy("outcome").parquet(str(work / "filtered"))

    t_copy = timed("plain copy", copy)
    t_filter = timed("filter stages", filter_job)
    n = args.pairs
    print(f"pairs: {n:,} on {args.master}")
    print(f"copy:   {n / t_copy / cores:,.0f} pairs/s per core")
    print(f"filter: {n / t_filter / cores:,.0f} pairs/s per core")
    print(f"ratio filter/copy time: {t_filter / t_copy:.2f}")
    peak = (
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    )
    print(f"peak RSS (driver python + children, KiB): {peak:,}")


if __name__ == "__main__":
    main()

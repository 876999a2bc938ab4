"""Filter job throughput vs the floor of just moving the bytes, in one process.

    python -m bench.throughput.filter [--pairs 1000000] [--master local[2]]

Builds a TSV of real pairs from ../shared/data (WMT21-23 system outputs, zh-en and en-zh
directions, cycled to --pairs), then times on the same session:
  (a) a plain Spark copy: read the TSV, write Parquet;
  (b) the filter job's stages (ingest, normalize, rules, language ID, dedup) written as Parquet.
Also times (c) the per-side library calls alone (OpenCC, jieba, fastText) in this process,
the ceiling for one core. Prints pairs/s per core for (a) and (b), the ratio (b)/(a), and
the peak resident memory of the whole process tree (driver, JVM, Python workers), sampled
twice a second.
"""

from __future__ import annotations

import argparse
import itertools
import os
import tempfile
import threading
import time
from pathlib import Path

from pyspark.sql import functions as F

from bench.kit import wmt_pairs
from jobs.filtering.config import load_config
from jobs.filtering.stages import dedup, normalize_and_analyze, score_and_decide
from jobs.kit.config import InputConf
from jobs.kit.ingest import read_input
from jobs.lake.session import build_session
from udfs.sides import SideOptions, analyze_texts

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def build_corpus(path: Path, n_pairs: int) -> None:
    pairs = wmt_pairs("wmt21-23.zh-en.tsv.gz") + wmt_pairs("wmt21-23.en-zh.tsv.gz", swap=True)
    print(f"{len(pairs):,} distinct lines of real zh-en pairs, cycled to {n_pairs:,}", flush=True)
    with open(path, "w", encoding="utf-8") as out:
        for zh, en in itertools.islice(itertools.cycle(pairs), n_pairs):
            out.write(f"{zh}\t{en}\n")


def tree_rss_bytes(root_pid: int) -> int:
    """Resident memory of a process and all its descendants (JVM, Python workers), from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended while we looked
        pid = int(stat.parent.name)
        children.setdefault(int(fields[1]), []).append(pid)  # fields[1] is the parent pid
        rss[pid] = int(fields[21]) * PAGE_BYTES  # fields[21] is rss in pages
    total, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


class PeakMemory:
    """Samples the process tree's RSS twice a second in a background thread."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.peak = max(self.peak, tree_rss_bytes(os.getpid()))

    def __enter__(self) -> PeakMemory:
        self.peak = tree_rss_bytes(os.getpid())
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._stop.clear()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def timed(label: str, action) -> tuple[float, int]:
    with PeakMemory() as memory:
        start = time.perf_counter()
        action()
        seconds = time.perf_counter() - start
    print(f"{label}: {seconds:.1f} s, peak RSS {memory.peak / 2**30:.2f} GiB", flush=True)
    return seconds, memory.peak


def library_floor(corpus: Path, model: str, n: int = 50_000) -> float:
    """Pairs/s of the per-side library work alone, in this process, no Spark: the ceiling for
    one core of any job that runs OpenCC, jieba and fastText on both sides."""
    with open(corpus, encoding="utf-8") as f:
        pairs = [line.rstrip("\n").split("\t") for line in itertools.islice(f, n)]
    zh, en = [p[0] for p in pairs], [p[1] for p in pairs]
    analyze_texts(zh[:100], SideOptions("zh", model))  # load the models outside the clock
    start = time.perf_counter()
    analyze_texts(zh, SideOptions("zh", model))
    analyze_texts(en, SideOptions("en", model))
    return len(pairs) / (time.perf_counter() - start)


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

    floor = library_floor(corpus, model)
    t_copy, _ = timed("plain copy", copy)
    t_filter, peak = timed("filter stages", filter_job)
    n = args.pairs
    print(f"pairs: {n:,} on {args.master}")
    print(f"copy:   {n / t_copy / cores:,.0f} pairs/s per core")
    print(f"filter: {n / t_filter / cores:,.0f} pairs/s per core")
    print(f"ratio filter/copy time: {t_filter / t_copy:.2f}")
    print(f"library calls alone (OpenCC, jieba, fastText; one process): {floor:,.0f} pairs/s")
    print(f"peak RSS during the filter (driver, JVM, Python workers): {peak / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()

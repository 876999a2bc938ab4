"""What a small run costs with its rows in fewer partitions (`spark.min_partition_bytes`).

    python -m bench.throughput.small_inputs         # 60 and 1,500 Tatoeba pairs, 4 runs each way
    python -m bench.throughput.small_inputs --refresh      # and an hourly refresh of 20-pair files
    python -m bench.throughput.small_inputs --refresh --jobs    # and the last refresh's Spark jobs

A filter run spreads its rows over cores x `spark.partitions_per_core` partitions after ingest,
so that every core stays busy to the end of the main stage; for a small input those tasks cost
more to start than to run. With `spark.min_partition_bytes` (1 MiB) a run gets no more
partitions than its input has MiBs. Here: the real filter job (jobs/filter.py's `main`) in one
warm Spark session on local[2], on the first 60 and all 1,500 of the bundled Tatoeba zh-en
pairs, alternating between the default and `spark.min_partition_bytes=0` (the partitioning
before it), after two warm-up runs; CPU-seconds of this process and everything it started
(the JVM, the Python workers), from /proc. Every run's rows come out the same either way
(tests/test_determinism.py runs the scored job both ways).

`--refresh` also times the refresh job (jobs/refresh.py's `main`) on a source directory that
grows by one file of 20 real Anki zh-en pairs a refresh (drawn from 60, so duplicates within
and across files are common, as in tests/test_refresh_property.py), 5 refreshes after the
first, each way, into a lake of its own. `--jobs` prints the Spark jobs of the last refresh
by size (from Spark's status store: the sluice stage, the call site, tasks, milliseconds), the
list docs/testing.md's figures on a refresh's jobs came from.
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from bench.kit import REPO
from bench.throughput.job_progress import tree_cpu_seconds
from jobs.filtering.job import main as filter_main
from jobs.kit.config import CONF_DIR
from jobs.lake.session import build_session
from jobs.refreshing.job import main as refresh_main

DATA = REPO / "tests" / "data"


def inputs(work: Path, pairs: int) -> list[str]:
    paths = []
    for side in ("zh", "en"):
        lines = (DATA / f"tatoeba-zh-en.{side}").read_text(encoding="utf-8").splitlines()
        path = work / f"tatoeba-{pairs}.{side}"
        path.write_text("\n".join(lines[:pairs]) + "\n", encoding="utf-8")
        paths.append(str(path))
    return paths


def anki_pool() -> list[str]:
    with gzip.open(DATA / "anki-cmn-zh-en.tsv.gz", "rt", encoding="utf-8") as f:
        pairs = ["\t".join(line.rstrip("\n").split("\t")[:2]) for line in f]
    return pairs[1000:1060]


def refreshes(spark, work: Path, way: str, steps: int = 5
              ) -> tuple[float, list[tuple[int, str, str, int, int]]]:
    """CPU-seconds of `steps` refreshes after a first one, one new 20-pair file each, and the
    Spark jobs of the last (`spark_jobs`)."""
    rng, pool = random.Random(1), anki_pool()
    sources, lake = work / f"sources-{way}", work / f"refresh-lake-{way.replace(' ', '-')}"
    sources.mkdir()
    config = work / f"refresh-{way.replace(' ', '-')}.yaml"
    least = "" if way == "by size" else "spark: {min_partition_bytes: 0}\n"
    database = f"refresh_{way.replace(' ', '_')}"  # a database each: one session's metastore
    config.write_text(f"extends: {REPO}/conf/zh-en.yaml\n"
                      f"lake: {{root: {lake}, database: {database}}}\n{least}"
                      f"sources:\n  - {{corpus: crawl, path: {sources}, format: tsv}}\n",
                      encoding="utf-8")
    spent, last = 0.0, []
    for step in range(steps + 1):
        lines = [rng.choice(pool) for _ in range(20)]
        (sources / f"f{step:02d}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
        before, seen = tree_cpu_seconds(os.getpid()), {j[0] for j in spark_jobs(spark)}
        assert refresh_main(["--config", str(config)]) == 0
        spent += (tree_cpu_seconds(os.getpid()) - before) if step else 0.0
        last = [j for j in spark_jobs(spark) if j[0] not in seen]
    return spent, last


def spark_jobs(spark) -> list[tuple[int, str, str, int, int]]:
    """(job id, sluice stage, call site, tasks, ms) of every job the status store keeps."""
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    out = []
    for i in range(jobs.size()):
        job = jobs.apply(i)
        stage = str(job.description().get()) if job.description().isDefined() else ""
        took = (job.completionTime().get().getTime() - job.submissionTime().get().getTime()
                if job.completionTime().isDefined() else -1)
        out.append((job.jobId(), stage.removeprefix("sluice refresh: "), job.name(),
                    job.numTasks(), took))
    return sorted(out)


def print_jobs(jobs: list[tuple[int, str, str, int, int]]) -> None:
    print(f"\nthe last refresh: {len(jobs)} Spark jobs, {sum(j[3] for j in jobs)} tasks, "
          f"{sum(j[4] for j in jobs) / 1000:.1f} s in jobs\n\n| job | stage | call site | tasks "
          "| ms |\n|---|---|---|---|---|")
    for job_id, stage, site, tasks, took in jobs:
        print(f"| {job_id} | {stage} | {site.split(' at ')[-1]} | {tasks} | {took} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=4, help="runs of each size, each way")
    ap.add_argument("--refresh", action="store_true", help="also 5 small refreshes, each way")
    ap.add_argument("--jobs", action="store_true", help="with --refresh: the last one's jobs")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="small-inputs-"))
    os.environ.setdefault("SPARK_CONF_DIR", str(CONF_DIR))  # sluice's JVM settings, as `sluice`
    spark = build_session("small-inputs", str(work / "lakes"), master="local[2]",
                          conf={"spark.ui.enabled": "false"})
    runs = iter(range(10**6))
    cost: dict[tuple[int, str], list[float]] = {}

    def run(pairs: int, way: str) -> tuple[float, float]:
        n = next(runs)
        least = [] if way == "by size" else ["--set", "spark.min_partition_bytes=0"]
        before, start = tree_cpu_seconds(os.getpid()), time.monotonic()
        code = filter_main(["--pair", "zh-en", "--corpus", "tatoeba", "--input",
                            *inputs(work, pairs), "--lake", str(work / f"lake{n}"),
                            "--set", f"lake.database=small_{n}", *least])
        assert code == 0, f"run {n} exited {code}"
        return tree_cpu_seconds(os.getpid()) - before, time.monotonic() - start

    for pairs in (60, 1500):
        run(pairs, "by size"), run(pairs, "every core")  # warm-up
        for _ in range(args.runs):
            for way in ("every core", "by size"):
                cost.setdefault((pairs, way), []).append(run(pairs, way)[0])
    print("\n| pairs | CPU-s, every core (min_partition_bytes 0) | CPU-s, by size (1 MiB) | "
          "change |\n|---|---|---|---|")
    for pairs in (60, 1500):
        every = statistics.median(cost[pairs, "every core"])
        by_size = statistics.median(cost[pairs, "by size"])
        print(f"| {pairs:,} | {every:.2f} | {by_size:.2f} | {by_size / every - 1:+.0%} |")
    if args.refresh:
        (every, _), (by_size, jobs) = (refreshes(spark, work, "every core"),
                                       refreshes(spark, work, "by size"))
        print(f"| 5 refreshes of +20 | {every:.2f} | {by_size:.2f} | {by_size / every - 1:+.0%} |")
        if args.jobs:
            print_jobs(jobs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

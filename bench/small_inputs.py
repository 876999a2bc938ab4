"""What a small run costs with its rows in fewer partitions (`spark.min_partition_bytes`).

    python bench/small_inputs.py              # 60 and 1,500 Tatoeba pairs, 4 runs each way

A filter run spreads its rows over cores x `spark.partitions_per_core` partitions after ingest,
so that every core stays busy to the end of the main stage; for a small input those tasks cost
more to start than to run. With `spark.min_partition_bytes` (1 MiB) a run gets no more
partitions than its input has MiBs. Here: the real filter job (jobs/filter.py's `main`) in one
warm Spark session on local[2], on the first 60 and all 1,500 of the bundled Tatoeba zh-en
pairs, alternating between the default and `spark.min_partition_bytes=0` (the partitioning
before it), after two warm-up runs; CPU-seconds of this process and everything it started
(the JVM, the Python workers), from /proc. Every run's rows come out the same either way
(tests/test_determinism.py runs the scored job both ways).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.job_progress import tree_cpu_seconds  # noqa: E402
from jobs.filtering.job import main as filter_main  # noqa: E402
from jobs.kit.config import CONF_DIR  # noqa: E402
from jobs.lake.session import build_session  # noqa: E402

DATA = REPO / "tests" / "data"


def inputs(work: Path, pairs: int) -> list[str]:
    paths = []
    for side in ("zh", "en"):
        lines = (DATA / f"tatoeba-zh-en.{side}").read_text(encoding="utf-8").splitlines()
        path = work / f"tatoeba-{pairs}.{side}"
        path.write_text("\n".join(lines[:pairs]) + "\n", encoding="utf-8")
        paths.append(str(path))
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=4, help="runs of each size, each way")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="small-inputs-"))
    os.environ.setdefault("SPARK_CONF_DIR", str(CONF_DIR))  # sluice's JVM settings, as `sluice`
    build_session("small-inputs", str(work / "lakes"), master="local[2]",
                  conf={"spark.ui.enabled": "false"})
    runs = iter(range(10**6))
    cost: dict[tuple[int, str], list[float]] = {}

    def run(pairs: int, way: str) -> tuple[float, float]:
        n = next(runs)
        least = [] if way == "by size" else ["--set", "spark.min_partition_bytes=0"]
        before, start = tree_cpu_seconds(os.getpid()), time.monotonic()
        code = filter_main(["--pair", "zh-en", "--corpus", "tatoeba", "--input",
                            *inputs(work, pairs), "--lake", str(work / f"lake{n}"), *least])
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

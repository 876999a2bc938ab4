"""A full filter run against re-deciding it with new thresholds (`--redecide`), on ~1M pairs.

    .venv/bin/python -m bench.throughput.redecide --work /tmp/bench-redecide  # 10 copies: 1,046,180
    .venv/bin/python -m bench.throughput.redecide --work /tmp/bench-redecide \\
        --copies 1 --full-b   # a try

Data: the WMT21-23 zh-en system outputs (../shared/data/bitext/wmt21-23-system-outputs/
wmt21-23.zh-en.tsv.gz, 104,618 rows), written --copies times with ` (k)` appended to both
sides of copy k > 0 so the copies stay distinct (as bench/throughput/vs_opusfilter.py builds them).

Runs, one after the other, each a real `spark-submit --master local[2]`, timed by the wall
clock (the CPU of PySpark workers reaches no rusage: see bench/throughput/vs_opusfilter.py):
  1. the full filter run, defaults (thresholds A), run id `full-a`;
  2. `--redecide full-a` with thresholds B: rules.max_punct_share=0.5 (looser),
     rules.max_tokens=60 (tighter), as run `redecided-b`;
  3. with --full-b, the full filter run with thresholds B into a second lake: the run the
     re-decide stands in for.
Prints each run's wall time, its kept rows and the ratio re-decide / full run.

Measured 2026-11-23 (`--full-b`, 10 copies), 2 cores shared: other jobs and test suites ran
throughout (load average 5-10 during the runs), so the wall times are inflated and noisy:

| run | pairs | wall s | kept | load avg at start |
|---|---|---|---|---|
| full A (defaults) | 1,046,180 | 1045.9 | 773,370 | 3.7 |
| re-decide A->B | 1,046,180 | 148.5 | 705,828 | 6.4 |
| full B | 1,046,180 | 753.9 | 705,828 | 5.9 |

re-decide / full run A: 0.142; re-decide / full run B: 0.197 (kept rows equal). Of the
re-decide's 148.5 s: ~49 s JVM and Spark start, metastore, finding the run and counting its
stored rows; 90 s the re-decide stage (read, rules, dedup's shuffle, write); ~9 s the
conservation check, stats and commit.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from bench.kit import BIN, REPO, WMT_OUTPUTS, spark_env

ZH_EN = WMT_OUTPUTS / "wmt21-23.zh-en.tsv.gz"
THRESHOLDS_B = ["--set", "rules.max_punct_share=0.5", "--set", "rules.max_tokens=60"]
KEPT_LINE = re.compile(r"^\s+= kept\s+([\d,]+)")


def real_pairs() -> list[tuple[str, str]]:
    """The zh-en direction's rows (src zh, tgt en), in file order, repeats kept."""
    with gzip.open(ZH_EN, "rt", encoding="utf-8", newline="\n") as f:
        next(f)  # year testset system seg_id src tgt
        return [tuple(line.rstrip("\n").split("\t")[4:6]) for line in f]  # type: ignore[misc]


def write_tsv(path: Path, real: list[tuple[str, str]], copies: int) -> int:
    n = 0
    with open(path, "w", encoding="utf-8") as out:
        for k in range(copies):
            tail = f" ({k})" if k else ""
            for zh, en in real:
                out.write(f"{zh}{tail}\t{en}{tail}\n")
                n += 1
    return n


def submit(args: list[str], log: Path) -> dict:
    """One spark-submit of the filter job: wall seconds, kept rows, the load average."""
    env = spark_env()
    cmd = [str(BIN / "spark-submit"), "--master", "local[2]", "jobs/filter.py", *args]
    load = os.getloadavg()[0]
    started = time.monotonic()
    with open(log, "w") as out:
        done = subprocess.run(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): see {log}")
    kept = [KEPT_LINE.match(line) for line in log.read_text().splitlines()]
    return {"wall_s": wall, "kept": sum(int(m.group(1).replace(",", "")) for m in kept if m),
            "load_at_start": load, "log": str(log)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", type=Path, default=Path("/tmp/bench-redecide"))
    p.add_argument("--copies", type=int, default=10, help="copies of the 104,618 real rows")
    p.add_argument("--full-b", action="store_true", help="also time a full run with B")
    args = p.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    tsv = args.work / "pairs.tsv"
    n = write_tsv(tsv, real_pairs(), args.copies)
    print(f"data: {n:,} zh-en pairs in {tsv}", flush=True)

    lake = args.work / "lake"
    inputs = ["--pair", "zh-en", "--corpus", "wmt", "--input", str(tsv)]
    runs = {"full A": submit([*inputs, "--lake", str(lake), "--run-id", "full-a"],
                             args.work / "full-a.log")}
    runs["re-decide A->B"] = submit(
        ["--redecide", "full-a", "--lake", str(lake), "--run-id", "redecided-b", *THRESHOLDS_B],
        args.work / "redecide.log")
    if args.full_b:
        runs["full B"] = submit(
            [*inputs, "--lake", str(args.work / "lake-b"), "--run-id", "full-b", *THRESHOLDS_B],
            args.work / "full-b.log")
    print("\n| run | pairs | wall s | kept | load avg at start |\n|---|---|---|---|---|")
    for name, run in runs.items():
        print(f"| {name} | {n:,} | {run['wall_s']:.1f} | {run['kept']:,} | "
              f"{run['load_at_start']:.1f} |")
    redecide = runs["re-decide A->B"]["wall_s"]
    print(f"\nre-decide / full run A: {redecide / runs['full A']['wall_s']:.3f}")
    if "full B" in runs:
        print(f"re-decide / full run B: {redecide / runs['full B']['wall_s']:.3f}; kept equal: "
              f"{runs['full B']['kept'] == runs['re-decide A->B']['kept']}")


if __name__ == "__main__":
    main()

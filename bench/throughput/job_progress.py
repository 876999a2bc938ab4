"""The real filter job on a large single gzip file, as a user runs it: are all cores busy in
the main stage, and is the job ever silent for long?

    python -m bench.throughput.job_progress [--pairs 1000000] [--master 'local[2]']

Builds one gzip TSV of real zh-en pairs (WMT21-23 system outputs from ../shared/data, cycled,
with a ` (k)` suffix on both sides so copies stay distinct), runs `spark-submit jobs/filter.py`
on it, timestamps every line the job prints, and samples the CPU time of the whole process
tree (driver, JVM, Python workers) every second. Prints per stage (from the job's own
`<stage>: started` / `done in` lines) the wall time and the average CPU use in % of one core,
the longest silence between two printed lines, and the whole run's CPU-seconds per pair.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.kit import REPO, wmt_pairs

TICKS = os.sysconf("SC_CLK_TCK")


def build_corpus(path: Path, n_pairs: int) -> None:
    pairs = wmt_pairs("wmt21-23.zh-en.tsv.gz") + wmt_pairs("wmt21-23.en-zh.tsv.gz", swap=True)
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as out:
        for i, (zh, en) in enumerate(itertools.islice(itertools.cycle(pairs), n_pairs)):
            k = i // len(pairs)
            out.write(f"{zh} ({k})\t{en} ({k})\n" if k else f"{zh}\t{en}\n")


def tree_cpu_seconds(root: int) -> float:
    """User+system CPU time of a process and all its live descendants, each with the children
    it has reaped (a Python worker that exited is in its daemon's count), from /proc."""
    children: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(stat.parent.name)
        children.setdefault(int(fields[1]), []).append(pid)
        cpu[pid] = sum(int(f) for f in fields[11:15]) / TICKS  # utime stime cutime cstime
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo += children.get(pid, [])
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=1_000_000)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sluice-progress-"))
    corpus = work / "corpus.tsv.gz"
    build_corpus(corpus, args.pairs)
    venv = Path(sys.executable).parent
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    cmd = [str(venv / "spark-submit"), "--master", args.master, "jobs/filter.py", "--pair",
           "zh-en", "--corpus", "bench", "--input", str(corpus), "--lake", str(work / "lake")]
    start = time.monotonic()
    job = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    samples: list[tuple[float, float]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            samples.append((time.monotonic() - start, tree_cpu_seconds(job.pid)))
            time.sleep(1.0)

    threading.Thread(target=sample, daemon=True).start()
    lines: list[tuple[float, str]] = []
    for line in job.stdout:
        lines.append((time.monotonic() - start, line.rstrip("\n")))
        print(f"{lines[-1][0]:7.1f}s  {lines[-1][1]}", flush=True)
    job.wait()
    done.set()
    wall = time.monotonic() - start
    cpu_total = max(c for _, c in samples)

    def cpu_at(t: float) -> float:
        return max((c for s, c in samples if s <= t), default=0.0)

    print(f"\npairs {args.pairs:,} on {args.master}; exit {job.returncode}; wall {wall:.0f} s; "
          f"CPU {cpu_total:.0f} s = {args.pairs / cpu_total:,.0f} pairs per CPU-second")
    started = {}
    for t, text in lines:
        if m := re.search(r"\] (.+): started$", text):
            started[m[1]] = t
        elif (m := re.search(r"\] (.+): done in", text)) and m[1] in started:
            t0 = started.pop(m[1])
            share = (cpu_at(t) - cpu_at(t0)) / max(t - t0, 1e-9) * 100
            print(f"  {m[1]:<60} {t - t0:7.1f} s  {share:5.0f}% CPU")
    stamps = [0.0] + [t for t, _ in lines] + [wall]
    gap, at = max((b - a, a) for a, b in itertools.pairwise(stamps))
    print(f"longest silence: {gap:.0f} s (from {at:.0f} s)")


if __name__ == "__main__":
    main()

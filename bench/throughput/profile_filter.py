"""Where a filter run's CPU goes (issue 28): the default funnel on real zh-en pairs with Java
Flight Recorder on the driver JVM (local mode: it runs every task), and py-spy on the work of
its Python workers, then the top frames of each.

    .venv/bin/python -m bench.throughput.profile_filter --copies 2 --out /tmp/profile-filter.json

Data: the WMT21-23 zh-en system outputs from ../shared/data, --copies times (as
bench/throughput/vs_opusfilter.py writes them). JFR: `-XX:StartFlightRecording` with the JDK's
`profile` settings (execution samples every 10 ms of Java code; time in native code and in the JIT
compiler threads is not in them), read back with `jfr print --json`. py-spy (100 samples a
second): the per-side pass a Python worker runs (udfs.sides.analyze_batch, both sides, batches
of 4,096 rows), over the same pairs, in a process of its own. Attached to the workers themselves
(`--subprocesses` on pyspark.daemon, or each forked worker) it kept only a few dozen samples of
their start. Printed per profile: samples by thread group, the top frames by self time, and the
share of samples under each frame (inclusive).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench.kit import REPO, write_json
from bench.throughput import vs_opusfilter as vs

JFR = Path(os.path.realpath(shutil.which("java") or "java")).parent / "jfr"
PY_SPY = vs.BIN / "py-spy"


SIDE_PASS = """
import pyarrow as pa
from udfs.sides import SideOptions, analyze_batch
pairs = [line.rstrip("\\n").split("\\t") for line in open({tsv!r}, encoding="utf-8")]
zh, en = SideOptions("zh", {model!r}), SideOptions("en", {model!r})
for i in range(0, len(pairs), 4096):  # as a worker gets them: Arrow batches of 4,096 rows
    chunk = pairs[i : i + 4096]
    analyze_batch(pa.array([p[0] for p in chunk]), zh)
    analyze_batch(pa.array([p[1] for p in chunk]), en)
"""


def profile_side_pass(tsv: Path, out: Path) -> None:
    """py-spy over the per-side pass of every pair, run as a worker runs it, in a process of
    its own: the Python workers' own work without Spark's serving around it."""
    code = SIDE_PASS.format(tsv=str(tsv), model=str(vs.MODEL))
    # the child imports udfs from this checkout: the repository root on its path
    path = os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))
    subprocess.run([str(PY_SPY), "record", "--format", "raw", "--output", str(out), "--",
                    sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=path),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)


def top(counts: collections.Counter, total: int, n: int) -> list[tuple[float, str]]:
    return [(round(100 * c / max(total, 1), 1), name) for name, c in counts.most_common(n)]


def jfr_profile(recording: Path, n: int) -> dict:
    events = json.loads(subprocess.run(
        [str(JFR), "print", "--json", "--events", "jdk.ExecutionSample", str(recording)],
        capture_output=True, text=True, check=True).stdout)["recording"]["events"]
    threads, own, under = collections.Counter(), collections.Counter(), collections.Counter()
    for event in events:
        values = event["values"]
        thread = (values.get("sampledThread") or {}).get("javaName") or "?"
        threads[thread.split(" ")[0].rstrip("-0123456789")] += 1
        frames = (values.get("stackTrace") or {}).get("frames") or []
        names = [f"{f['method']['type']['name'].split('/')[-1]}.{f['method']['name']}"
                 for f in frames]
        if names:
            own[names[0]] += 1
        for name in set(names):
            under[name] += 1
    total = len(events)
    return {"samples": total, "threads": top(threads, total, 8), "self": top(own, total, n),
            "inclusive": top(under, total, n)}


def py_spy_profile(raws: list[Path], n: int) -> dict:
    """py-spy's raw format: one line per distinct stack, `frame;frame;... count` (root first)."""
    own, under, files = collections.Counter(), collections.Counter(), collections.Counter()
    total = 0
    lines = [line for raw in raws
             for line in raw.read_text(encoding="utf-8", errors="replace").splitlines()]
    for line in lines:
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if not count.isdigit():
            continue
        k = int(count)
        total += k
        own[frames[-1]] += k
        files[frames[-1].split("(")[-1].split(":")[0].rsplit("/", 1)[-1]] += k
        for frame in set(frames[1:]):  # frames[0] is the process
            under[frame] += k
    return {"busy_samples": total, "self": top(own, total, n), "self_by_file": top(files, total, n),
            "inclusive": top(under, total, n)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--copies", type=int, default=2, help="copies of the real rows (2: 209,236)")
    p.add_argument("--work", type=Path, default=Path("/tmp/profile-filter"))
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--out", type=Path, help="write the profiles as JSON here")
    args = p.parse_args()
    vs.claim_work(args.work)
    tsv = args.work / "pairs.tsv"
    n = vs.write_tsv(tsv, vs.real_pairs(None), args.copies)
    recording, raw = args.work / "driver.jfr", args.work / "side-pass.txt"
    run = vs.run_sluice(args.work, tsv, "profile", "local[2]",
                        f"-XX:StartFlightRecording=filename={recording},settings=profile")
    profile_side_pass(tsv, raw)
    result = {"pairs": n, "wall_s": run["wall_s"], "cpu_s": run["cpu_s"],
              "python_workers_cpu_s": run["cpu_s_autoreaped"],
              "jvm": jfr_profile(recording, args.top),
              "python": py_spy_profile([raw], args.top)}
    print(f"{n:,} pairs: {run['wall_s']} s wall, {run['cpu_s']} CPU-s "
          f"({run['cpu_s_autoreaped']} in the Python workers)")
    for side in ("jvm", "python"):
        prof = result[side]
        print(f"\n== {side}: {prof.get('samples', prof.get('busy_samples'))} samples")
        for key in ("threads", "self_by_file", "self", "inclusive"):
            if key in prof:
                print(f"-- {key}")
                for share, name in prof[key]:
                    print(f"{share:5.1f}%  {name}")
    if args.out:
        write_json(args.out, result)


if __name__ == "__main__":
    main()

"""Where a filter run's CPU goes (issue 28): the default funnel on real zh-en pairs with Java
Flight Recorder on the driver JVM (local mode: it runs every task) and py-spy on the PySpark
daemon and the Python workers it forks, then the top frames of each.

    .venv/bin/python bench/profile_filter.py --copies 2 --out /tmp/profile-filter.json

Data: the WMT21-23 zh-en system outputs from ../shared/data, --copies times (as
bench/vs_opusfilter.py writes them). JFR: `-XX:StartFlightRecording` with the JDK's `profile`
settings (execution samples every 10 ms of Java code; time in native code and in the JIT
compiler threads is not in them), read back with `jfr print --json`. py-spy: attached to
each Python worker `pyspark.daemon` forks as soon as it appears, --nonblocking (it does not
pause the workers), 100 samples a second; idle frames (a worker waiting for its next batch) are
left out. Printed per profile: samples by thread group, the top frames by self time, and the
share of samples under each frame (inclusive).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vs_opusfilter as vs  # noqa: E402

JFR = Path(os.path.realpath(shutil.which("java") or "java")).parent / "jfr"
PY_SPY = vs.BIN / "py-spy"
IDLE = ("select", "poll", "read", "recv_into", "readinto", "wait", "accept", "_read_with_length",
        "read_int", "load_stream", "dump_stream")


def daemon_pid(timeout_s: float) -> int | None:
    """The pid of the first `pyspark.daemon` process to appear."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if b"pyspark.daemon" in cmd:
                return int(pid)
        time.sleep(0.2)
    return None


def children(pid: int) -> set[int]:
    found = set()
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            found.add(int(entry))
    return found


def attach_py_spy(out_dir: Path, done: threading.Event) -> threading.Thread:
    """A py-spy recording of each Python worker the daemon forks, as it appears (py-spy's own
    --subprocesses missed workers forked after it attached)."""
    def run() -> None:
        daemon = daemon_pid(600)
        spies: dict[int, subprocess.Popen] = {}
        while daemon is not None and not done.is_set():
            for pid in children(daemon) - spies.keys():
                spies[pid] = subprocess.Popen(
                    [str(PY_SPY), "record", "--pid", str(pid), "--nonblocking", "--format",
                     "raw", "--output", str(out_dir / f"worker-{pid}.txt")],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.2)
        for spy in spies.values():  # each stops when its worker exits
            try:
                spy.wait(timeout=30)
            except subprocess.TimeoutExpired:
                spy.send_signal(signal.SIGINT)
                spy.wait(timeout=10)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


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
        leaf = frames[-1].split(" (")[0] if frames else ""
        if not count.isdigit() or leaf in IDLE:
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
    recording = args.work / "driver.jfr"
    done = threading.Event()
    spy = attach_py_spy(args.work, done)
    run = vs.run_sluice(args.work, tsv, "profile", "local[2]",
                        f"-XX:StartFlightRecording=filename={recording},settings=profile")
    done.set()
    spy.join(timeout=60)
    raws = sorted(args.work.glob("worker-*.txt"))
    result = {"pairs": n, "wall_s": run["wall_s"], "cpu_s": run["cpu_s"],
              "python_workers_cpu_s": run["cpu_s_autoreaped"],
              "jvm": jfr_profile(recording, args.top),
              "python": py_spy_profile(raws, args.top) if raws else None}
    print(f"{n:,} pairs: {run['wall_s']} s wall, {run['cpu_s']} CPU-s "
          f"({run['cpu_s_autoreaped']} in the Python workers)")
    for side in ("jvm", "python"):
        prof = result[side]
        if prof is None:
            print(f"\n{side}: no profile (py-spy could not attach)")
            continue
        print(f"\n== {side}: {prof.get('samples', prof.get('busy_samples'))} samples")
        for key in ("threads", "self_by_file", "self", "inclusive"):
            if key in prof:
                print(f"-- {key}")
                for share, name in prof[key]:
                    print(f"{share:5.1f}%  {name}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

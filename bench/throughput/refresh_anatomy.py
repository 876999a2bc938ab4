"""Where a small warm refresh's CPU goes: by process, by JVM thread, and by the sluice code
that sends the py4j commands.

    python -m bench.throughput.refresh_anatomy [--steps 6] [--debugging false]

The refresh job (jobs/refresh.py's `main`) in one warm Spark session on local[2], with the
tests' C1-only JIT, on a source directory that grows by one file of 20 real Anki zh-en pairs a
refresh (as bench/throughput/small_inputs.py). For each refresh after the first two: wall time,
CPU of the Python driver, the JVM (its threads grouped by name, from /proc/<pid>/task) and the
processes the JVM forked and reaped (Hadoop's local file system runs `chmod` for every file
it writes when libhadoop is absent). At the end: the py4j commands those refreshes sent,
grouped by the innermost jobs/ or udfs/ function on the Python stack, with the time spent
waiting for each group's answers. `--debugging false` turns off PySpark's call-site capture
(`spark.python.sql.dataFrameDebugging.enabled`) to compare.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path

from bench.kit import REPO
from bench.throughput.small_inputs import anki_pool
from jobs.kit.config import CONF_DIR

TICKS = os.sysconf("SC_CLK_TCK")
C1_ONLY = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"  # tests/integration_helpers


def stat_fields(path: str) -> list[str]:
    return Path(path).read_text().rsplit(")", 1)[1].split()


def thread_cpu(pid: int) -> collections.Counter:
    """CPU-seconds of each of the JVM's threads, by name without its number."""
    out: collections.Counter = collections.Counter()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            raw = (task / "stat").read_text()
        except OSError:
            continue
        name = re.sub(r"[#-]?\d+$", "", raw[raw.index("(") + 1:raw.rindex(")")]).strip()
        fields = raw.rsplit(")", 1)[1].split()
        out[name] += (int(fields[11]) + int(fields[12])) / TICKS
    return out


def jvm_pid() -> int:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat_fields(str(stat))[1]) == os.getpid() and \
                    (stat.parent / "comm").read_text().strip() == "java":
                return int(stat.parent.name)
        except (OSError, ValueError):
            continue
    raise RuntimeError("no JVM under this process")


class Py4jCalls:
    """Counts py4j commands and the time spent waiting for them, by sluice caller."""

    def __init__(self) -> None:
        import py4j.clientserver as clientserver

        self.count: collections.Counter = collections.Counter()
        self.seconds: collections.Counter = collections.Counter()
        self.on = False
        send = clientserver.ClientServerConnection.send_command

        def counted(connection, command):
            if not self.on:
                return send(connection, command)
            key, frame = "(no sluice frame: py4j's own, e.g. freeing proxies)", sys._getframe(1)
            while frame is not None:
                name = frame.f_code.co_filename
                if f"{REPO}/jobs/" in name or f"{REPO}/udfs/" in name:
                    key = f"{Path(name).relative_to(REPO)}:{frame.f_code.co_name}"
                    break
                frame = frame.f_back
            started = time.perf_counter()
            try:
                return send(connection, command)
            finally:
                self.count[key] += 1
                self.seconds[key] += time.perf_counter() - started

        clientserver.ClientServerConnection.send_command = counted


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=6, help="refreshes, the first two not counted")
    ap.add_argument("--debugging", default="true", choices=["true", "false"])
    args = ap.parse_args(argv)
    os.environ.setdefault("SPARK_CONF_DIR", str(CONF_DIR))
    os.environ["SPARK_SUBMIT_OPTS"] = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} {C1_ONLY}"
    calls = Py4jCalls()
    from jobs.lake.session import build_session
    from jobs.refreshing.job import main as refresh_main

    work = Path(tempfile.mkdtemp(prefix="refresh-anatomy-"))
    build_session("refresh-anatomy", str(work / "lakes"), master="local[2]",
                  conf={"spark.ui.enabled": "false",
                        "spark.python.sql.dataFrameDebugging.enabled": args.debugging})
    jvm = jvm_pid()
    rng, pool, sources = random.Random(1), anki_pool(), work / "sources"
    sources.mkdir()
    config = work / "refresh.yaml"
    config.write_text(f"extends: {REPO}/conf/zh-en.yaml\n"
                      f"lake: {{root: {work / 'lake'}, database: anatomy}}\n"
                      f"sources:\n  - {{corpus: crawl, path: {sources}, format: tsv}}\n",
                      encoding="utf-8")
    threads: collections.Counter = collections.Counter()
    totals: collections.Counter = collections.Counter()
    counted = 0
    for step in range(args.steps):
        lines = [rng.choice(pool) for _ in range(20)]
        (sources / f"f{step:02d}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
        calls.on = step >= 2
        before_threads, jvm_before = thread_cpu(jvm), stat_fields(f"/proc/{jvm}/stat")
        driver_before, started = time.process_time(), time.monotonic()
        assert refresh_main(["--config", str(config)]) == 0
        if step < 2:
            continue
        counted += 1
        jvm_after = stat_fields(f"/proc/{jvm}/stat")
        totals["wall"] += time.monotonic() - started
        totals["Python driver"] += time.process_time() - driver_before
        spent = [int(a) - int(b) for a, b in zip(jvm_after[11:15], jvm_before[11:15],
                                                 strict=True)]  # utime stime cutime cstime
        totals["JVM"] += sum(spent[:2]) / TICKS
        totals["JVM's reaped children"] += sum(spent[2:]) / TICKS
        threads.update({k: v - before_threads.get(k, 0.0) for k, v in thread_cpu(jvm).items()})
    print(f"\nper refresh, mean of {counted} (20 new pairs each, debugging {args.debugging}):\n")
    for what, seconds in totals.items():
        print(f"  {what:24s} {seconds / counted:6.2f} s")
    print("\nJVM threads, CPU-s per refresh:\n")
    for name, seconds in threads.most_common(8):
        print(f"  {name:24s} {seconds / counted:6.2f}")
    print(f"\npy4j commands per refresh: {sum(calls.count.values()) / counted:,.0f}\n\n"
          "| sluice caller | commands | s waiting |\n|---|---|---|")
    for key, n in calls.count.most_common(15):
        print(f"| {key} | {n / counted:,.0f} | {calls.seconds[key] / counted:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

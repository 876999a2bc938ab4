"""Every JVM a command starts, with the test that started it and the CPU it used (issue 37):
where the suite's JVM time goes, daemons included, which the per-module CPU column of
tests/conftest.py cannot count once they leave the test's process tree.

    python -m bench.throughput.suite_jvms [--out jvms.json] [-- COMMAND ...]

COMMAND defaults to the suite as `make test` runs it. Every half second the script lists the
machine's `java` processes (/proc): a new one is recorded with its kind (from its main class
and application), the test named by PYTEST_CURRENT_TEST in its environment (inherited from the
test worker that started it, directly or through a daemon), and its CPU-seconds as last seen.
A JVM that lives under half a second may be missed; none of the suite's does. At the end it
prints, per kind and per test module, how many JVMs and how many CPU-seconds.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

from bench.kit import REPO, write_json

SUITE = [str(REPO / ".venv/bin/python"), "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile",
         "tests"]
TICKS = os.sysconf("SC_CLK_TCK")


def kind(argv: list[str]) -> str:
    """What a JVM is, from its command line."""
    classes = [a.rsplit(".", 1)[-1] for a in argv if a.startswith("org.apache.")]
    app = next((Path(a).name for a in argv if a.endswith(".py")), "")
    if "SparkSQLCLIDriver" in classes:
        return "spark-sql shell"
    if "SparkSubmit" in classes:
        # A job's own JVM names its script; a Python process's session (the tests' in-process
        # `spark`, a warm driver) is `pyspark-shell`.
        return f"job driver ({app})" if app else "in-process session or warm driver"
    named = {"CoarseGrainedExecutorBackend": "executor", "Master": "cluster daemon",
             "Worker": "cluster daemon", "HiveMetaStore": "metastore service",
             "Main": "spark-submit launcher"}
    return next((named[c] for c in classes if c in named), classes[0] if classes else "other")


class Watcher:
    """Samples /proc for JVMs until stopped."""

    def __init__(self, every_s: float = 0.5) -> None:
        self.every_s, self.seen = every_s, {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stop.is_set():
            self.scan()
            time.sleep(self.every_s)

    def scan(self) -> None:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                if stat[stat.index("(") + 1:stat.rindex(")")] != "java":
                    continue
                fields = stat[stat.rindex(")") + 2:].split()
                cpu = (int(fields[11]) + int(fields[12])) / TICKS
                if pid not in self.seen:
                    argv = Path(f"/proc/{pid}/cmdline").read_text().split("\0")
                    env = Path(f"/proc/{pid}/environ").read_text(errors="replace").split("\0")
                    test = next((e.split("=", 1)[1] for e in env
                                 if e.startswith("PYTEST_CURRENT_TEST=")), "")
                    self.seen[pid] = {"kind": kind(argv), "test": test, "first_seen": time.time()}
                self.seen[pid].update(cpu=cpu, last_seen=time.time())
            except (OSError, ValueError):  # gone between listing and reading
                continue


def summary(seen: dict) -> str:
    by_kind: dict[str, list[float]] = defaultdict(list)
    by_module: dict[str, list[float]] = defaultdict(list)
    for jvm in seen.values():
        by_kind[jvm["kind"]].append(jvm["cpu"])
        module = jvm["test"].split("::")[0].removeprefix("tests/") or "(no test: a bare shell)"
        by_module[module].append(jvm["cpu"])
    total = sum(j["cpu"] for j in seen.values())
    lines = [f"{len(seen)} JVMs, {total:,.0f} CPU-seconds", "", "| kind | JVMs | CPU-s |",
             "|---|---|---|"]
    for name, cpus in sorted(by_kind.items(), key=lambda kv: -sum(kv[1])):
        lines.append(f"| {name} | {len(cpus)} | {sum(cpus):,.0f} |")
    lines += ["", "| started by (module) | JVMs | CPU-s |", "|---|---|---|"]
    for name, cpus in sorted(by_module.items(), key=lambda kv: -sum(kv[1])):
        lines.append(f"| {name} | {len(cpus)} | {sum(cpus):,.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="write every JVM seen as JSON")
    ap.add_argument("command", nargs="*", help="what to run (default: the suite)")
    args = ap.parse_args(argv)
    watcher = Watcher()
    watcher.thread.start()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as make test
    code = subprocess.run(args.command or SUITE, cwd=REPO, env=env).returncode
    watcher.stop.set()
    watcher.thread.join()
    watcher.scan()
    if args.out:
        write_json(args.out, watcher.seen)
    print(summary(watcher.seen))
    return code


if __name__ == "__main__":
    sys.exit(main())

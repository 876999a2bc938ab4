"""sluice's default funnel next to OpusFilter 3.3.1 on the same zh-en pairs (issue 15).

    .venv/bin/python -m bench.throughput.vs_opusfilter --out /tmp/vs-opusfilter.json
    .venv/bin/python -m bench.throughput.vs_opusfilter --copies 1 --limit 2000 --no-scale-run  # try

Data: every row of the WMT21-23 zh-en system outputs (../shared/data/bitext/
wmt21-23-system-outputs/wmt21-23.zh-en.tsv.gz: src zh, tgt en; 104,618 rows, 87,034 distinct
pairs), written --copies times (4: 418,472 pairs), copy k > 0 with ` (k)` appended to both
sides so the copies stay distinct (both dedups keep digits). One TSV for sluice, the same
pairs as two line-aligned files for OpusFilter, under --work.

Runs, one after the other, each a subprocess whose whole process tree is measured:
  1. OpusFilter 3.3.1 (its own venv, --opusfilter-venv, made with `python3.11 -m venv` and
     `pip install opusfilter==3.3.1 fasttext-numpy2` when missing), one process, the config of
     opusfilter_config() below: preprocess (WhitespaceNormalizer), remove_duplicates
     (lowercased), filter (LengthFilter, LengthRatioFilter, LongWordFilter, HtmlTagFilter,
     LanguageIDFilter with fastText and models/lid.176.ftz, the model sluice uses);
  2. sluice's default funnel: `spark-submit --master local[2] jobs/filter.py --pair zh-en
     --corpus wmt --input <tsv> --lake <work>/lake` (conf/defaults.yaml, nothing turned on);
  2b. (--c1-run, off by default) the same with the driver JVM compiling with C1 only
     (SPARK_SUBMIT_OPTS, see C1_ONLY below);
  3. sluice's per-side Python work alone, the floor of its Python workers: the Arrow pass of
     both sides (udfs.sides.analyze_batch in batches of 4,096: normalization kernels, OpenCC,
     jieba, fastText, character counts), in this process;
  4. (--scale-run, on by default) sluice again on --scale times the data: time should grow
     linearly, memory stay flat.

CPU-seconds of a run: user + system time of its whole process tree. getrusage(RUSAGE_CHILDREN)
before and after waiting for it counts every descendant that was reaped by a wait (the JVM
reaps the Python driver and the PySpark daemon; this bench is made a child subreaper, so
orphans are adopted and waited for here) but not the PySpark workers: the daemon ignores
SIGCHLD, the kernel reaps them, and their CPU reaches no one's rusage. So their CPU is added
from /proc, as last seen by a sampler twice a second (at most half a second of each worker is
missed: they are reused, and idle at the end). The sum of every process's last-seen CPU is
printed as a lower-bound check. Peak memory: the RSS of the whole tree, sampled from /proc
twice a second. sluice's time to
its first row: when the job logs `reading ...` (the numbering pass reads every row) and when
it logs `ingest ...: started` (the first rows staged), from the bench's clock. The machine may
be shared: the load average is printed; the CPU column is the steadier figure.

Measured 2026-11-26 at 6fa78f2, 2 CPUs, load average 1.3 at the start, 3.2 at the end:

| run | pairs | wall s | CPU-s | pairs per CPU-s | CPU/wall | peak RSS GiB | kept |
|---|---|---|---|---|---|---|---|
| OpusFilter 3.3.1 (one process) | 418,472 | 61.0 | 60.8 | 6,883 | 100% | 0.11 | 300,114 |
| sluice filter.py (local[2]) | 418,472 | 75.0 | 136.2 | 3,073 | 182% | 2.31 | 309,409 |
| sluice's per-side Python work alone | 418,472 | 37.5 | 37.5 | 11,147 | 100% | - | - |
| sluice at 4x | 1,673,888 | 187.6 | 357.7 | 4,680 | 191% | 3.72 | 1,238,107 |

sluice CPU per pair / OpusFilter's: 2.24x; per extra pair (1x -> 4x) 0.176 ms against
OpusFilter's 0.145 (0.094 in the Python workers, 0.082 in the JVM); first rows staged at
11.0 s (4x: 11.7 s). 4x: wall 2.50x, CPU 2.63x.

Earlier: 2026-11-26 at a5d34fe, 2.40x (0.209 ms per extra pair against OpusFilter's 0.130;
first rows at 15.7 s); 2026-11-24 at b0e96d0, 2.52x (OpusFilter 88.8 CPU-s, sluice 223.9, 4x
682.3: 0.365 ms per extra pair; first row at 18.9 s); 2026-11-23 at b64fc5d, 2.28x (OpusFilter
114.7 CPU-s, sluice 262.1); before that (b0d0fde's funnel, load average 6-8) 3.42x.
OpusFilter's own CPU moves between runs (54-115 CPU-s on the same pairs): compare within one
run.
"""

from __future__ import annotations

import argparse
import ctypes
import gzip
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from bench.kit import BIN, REPO, WMT_OUTPUTS, spark_env, write_json

ZH_EN = WMT_OUTPUTS / "wmt21-23.zh-en.tsv.gz"
MODEL = REPO / "models/lid.176.ftz"
PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")
MARK = ".vs-opusfilter-bench"
# The driver JVM compiling with C1 only: a job of minutes spends much of its JVM time in C2
# compiling Spark's generated code (JFR on 104,618 pairs: 29,400 compilations).
C1_ONLY = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
SLUICE_LINE = re.compile(r"^\[sluice [\d:]+\] (.*)$")
STAGE_DONE = re.compile(r"^(.+): done in ([\d.]+) s")
KEPT_LINE = re.compile(r"^\s+= kept\s+([\d,]+)")
HEARTBEAT = re.compile(r": \d+ s, (Spark stage|between Spark stages)")


# -- the data ---------------------------------------------------------------------------------
def real_pairs(limit: int | None) -> list[tuple[str, str]]:
    """The zh-en direction's rows (src zh, tgt en), in file order, repeats kept."""
    with gzip.open(ZH_EN, "rt", encoding="utf-8", newline="\n") as f:
        next(f)  # year testset system seg_id src tgt
        pairs = [tuple(line.rstrip("\n").split("\t")[4:6]) for line in f]
    bad = [p for p in pairs if any(c in s for s in p for c in "\t\r\n")]
    if bad:  # a tab or line break inside a side would misalign the two formats
        raise SystemExit(f"{len(bad)} rows with a tab or line break in a side")
    return pairs[:limit] if limit else pairs  # type: ignore[return-value]


def copies_of(real: list[tuple[str, str]], copies: int):
    for k in range(copies):
        tail = f" ({k})" if k else ""
        for zh, en in real:
            yield zh + tail, en + tail


def write_tsv(path: Path, real: list[tuple[str, str]], copies: int) -> int:
    n = 0
    with open(path, "w", encoding="utf-8") as out:
        for zh, en in copies_of(real, copies):
            out.write(f"{zh}\t{en}\n")
            n += 1
    return n


def write_moses(prefix: Path, real: list[tuple[str, str]], copies: int) -> None:
    with (
        open(f"{prefix}.zh", "w", encoding="utf-8") as fz,
        open(f"{prefix}.en", "w", encoding="utf-8") as fe,
    ):
        for zh, en in copies_of(real, copies):
            fz.write(zh + "\n")
            fe.write(en + "\n")


def claim_work(work: Path) -> None:
    """Empty --work, which must be new, empty or made by this bench (it is deleted)."""
    if work.exists() and any(work.iterdir()) and not (work / MARK).exists():
        raise SystemExit(f"{work} holds files this bench did not make: pick another --work")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / MARK).write_text("made by bench/throughput/vs_opusfilter.py; deleted by its next run\n")


# -- measuring a process tree -----------------------------------------------------------------
def proc_table() -> dict[int, tuple[int, int, float, int]]:
    """pid -> (parent pid, RSS bytes, user+system CPU seconds, start time), from /proc."""
    table = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended while we looked
        table[int(stat.parent.name)] = (
            int(fields[1]),
            int(fields[21]) * PAGE,
            (int(fields[11]) + int(fields[12])) / TICK,
            int(fields[19]),
        )
    return table


def ignores_sigchld(pid: int) -> bool:
    """Whether `pid` ignores SIGCHLD: its children are then reaped by the kernel, and their CPU
    time is added to no one's RUSAGE_CHILDREN (the PySpark daemon does this to its workers)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(
        int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigIgn:")
    )
    return bool(mask & (1 << (signal.SIGCHLD - 1)))


class TreeMonitor:
    """Samples this process's descendants (one run at a time: the run's tree, adopted orphans
    included) twice a second: peak total RSS, each process's last-seen CPU time (their sum is
    a lower bound on the tree's CPU: it misses what ran after a process's last sample and
    processes shorter than one interval), and the last-seen CPU time of the processes whose
    parent ignores SIGCHLD (`autoreaped`), which getrusage never sees."""

    def __init__(self) -> None:
        self.root, self.peak_rss = os.getpid(), 0
        self.cpu_seen: dict[tuple[int, int], float] = {}
        self.autoreaped: dict[tuple[int, int], float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def sample(self) -> None:
        table = proc_table()
        children: dict[int, list[int]] = {}
        for pid, (ppid, *_) in table.items():
            children.setdefault(ppid, []).append(pid)
        rss, todo = 0, list(children.get(self.root, []))
        while todo:
            pid = todo.pop()
            if pid in table:
                rss += table[pid][1]
                key = (pid, table[pid][3])
                self.cpu_seen[key] = table[pid][2]
                if ignores_sigchld(table[pid][0]):
                    self.autoreaped[key] = table[pid][2]
                else:  # e.g. adopted by this process: reaped here, counted by getrusage
                    self.autoreaped.pop(key, None)
                todo.extend(children.get(pid, []))
        self.peak_rss = max(self.peak_rss, rss)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.sample()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def cpu_lower_bound(self) -> float:
        return sum(self.cpu_seen.values())


def become_subreaper() -> None:
    """Adopt orphaned descendants (PR_SET_CHILD_SUBREAPER), so that their CPU time reaches
    RUSAGE_CHILDREN when reap_orphans() waits for them: PySpark's Python workers can outlive
    the daemon that forked them, and would otherwise be reaped by init, their CPU uncounted."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:  # 36: PR_SET_CHILD_SUBREAPER
        print("warning: no subreaper; orphaned workers' CPU is not counted", file=sys.stderr)


def reap_orphans(timeout_s: float = 60.0) -> int:
    """Wait for every child left (adopted orphans) after the run's own process ended."""
    reaped, deadline = 0, time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped  # none left
        if pid:
            reaped += 1
        else:
            time.sleep(0.1)
    print(f"warning: children still running after {timeout_s:.0f} s", file=sys.stderr)
    return reaped


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(cmd: list[str], log_path: Path, env: dict[str, str] | None = None) -> dict:
    """Run `cmd` to the end: wall and CPU seconds of its process tree, peak tree RSS, and its
    output lines with the second each came at."""
    lines: list[tuple[float, str]] = []
    cpu0, started = children_cpu(), time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        log.write(" ".join(cmd) + "\n")
        proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        monitor = TreeMonitor()
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            lines.append((time.monotonic() - started, line.rstrip("\n")))
        proc.wait()
        wall = time.monotonic() - started
        orphans = reap_orphans()
        reaped_cpu = children_cpu() - cpu0
        monitor.stop()
    autoreaped = sum(monitor.autoreaped.values())
    if proc.returncode != 0:
        tail = log_path.read_text(encoding="utf-8", errors="replace")[-4000:]
        raise SystemExit(
            f"failed (exit {proc.returncode}): {' '.join(cmd)}\nlog {log_path}:\n{tail}"
        )
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(reaped_cpu + autoreaped, 2),
        "cpu_s_getrusage": round(reaped_cpu, 2),
        "cpu_s_autoreaped": round(autoreaped, 2),
        "autoreaped_processes": len(monitor.autoreaped),
        "cpu_s_sampled_lower_bound": round(monitor.cpu_lower_bound, 2),
        "peak_rss_bytes": monitor.peak_rss,
        "orphans_reaped": orphans,
        "log": str(log_path),
        "lines": lines,
    }


# -- OpusFilter -------------------------------------------------------------------------------
def opusfilter_venv(venv: Path) -> Path:
    """The `opusfilter` command of `venv`, made and installed when missing."""
    exe = venv / "bin/opusfilter"
    if exe.exists():
        return exe
    print(f"installing OpusFilter 3.3.1 into {venv} ...", flush=True)
    subprocess.run(["python3.11", "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin/pip"), "install", "-q", "opusfilter==3.3.1", "fasttext-numpy2"], check=True
    )
    return exe


def opusfilter_config(work: Path, data: Path) -> dict:
    """The issue's steps. Thresholds follow conf/defaults.yaml where OpusFilter has the same
    measure: en at most 120 words (rules.max_tokens), words under 40 characters
    (rules.max_word_chars), a length ratio under 3 (rules.token_ratio), language ID over 0.5
    (langid.min_prob). OpusFilter splits words on whitespace only, so the zh side is measured
    in characters: at most 300 (~ 120 jieba words at ~1.6 characters a word, README
    "Thresholds"), its long-word check off (a zh "word" is a whole clause), and the ratio
    is zh characters to en words (jieba words ~ characters / 1.6, close enough for a
    3x bound on real pairs)."""
    out = work / "opusfilter"
    return {
        "common": {"output_directory": str(out)},
        "steps": [
            {
                "type": "preprocess",
                "parameters": {
                    "inputs": [f"{data}.zh", f"{data}.en"],
                    "outputs": ["ws.zh", "ws.en"],
                    "preprocessors": [{"WhitespaceNormalizer": {}}],
                },
            },
            {
                "type": "remove_duplicates",
                "parameters": {
                    "inputs": ["ws.zh", "ws.en"],
                    "outputs": ["dedup.zh", "dedup.en"],
                    "lowercase": True,
                },
            },  # not letters_only: it would drop the digits of ` (k)`
            {
                "type": "filter",
                "parameters": {
                    "inputs": ["dedup.zh", "dedup.en"],
                    "outputs": ["clean.zh", "clean.en"],
                    "filters": [
                        {
                            "LengthFilter": {
                                "unit": ["char", "word"],
                                "min_length": 1,
                                "max_length": [300, 120],
                            }
                        },
                        {"LengthRatioFilter": {"unit": ["char", "word"], "threshold": 3}},
                        {"LongWordFilter": {"threshold": [100_000, 40]}},
                        {"HtmlTagFilter": {}},
                        {
                            "LanguageIDFilter": {
                                "id_method": "fasttext",
                                "fasttext_model_path": str(MODEL),
                                "languages": ["zh", "en"],
                                "thresholds": [0.5, 0.5],
                            }
                        },
                    ],
                },
            },
        ],
    }


def run_opusfilter(work: Path, data: Path, exe: Path) -> dict:
    config = work / "opusfilter.yaml"
    config.write_text(yaml.safe_dump(opusfilter_config(work, data), sort_keys=False))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    run = measure([str(exe), "--overwrite", str(config)], work / "opusfilter.log", env)
    with open(work / "opusfilter/dedup.zh", encoding="utf-8") as f:
        run["after_dedup"] = sum(1 for _ in f)
    with open(work / "opusfilter/clean.zh", encoding="utf-8") as f:
        run["kept"] = sum(1 for _ in f)
    run.pop("lines")
    return run


# -- sluice -----------------------------------------------------------------------------------
def run_sluice(work: Path, tsv: Path, name: str, master: str, jvm_opts: str = "") -> dict:
    """The filter job; `jvm_opts` becomes SPARK_SUBMIT_OPTS (the driver JVM's flags)."""
    lake = work / f"lake-{name}"
    shutil.rmtree(lake, ignore_errors=True)
    env = spark_env(SPARK_SUBMIT_OPTS=jvm_opts)
    env.setdefault("SPARK_CONF_DIR", str(REPO / "conf"))  # sluice's Spark settings, as `make`'s
    cmd = [
        str(BIN / "spark-submit"),
        "--master",
        master,
        "jobs/filter.py",
        "--pair",
        "zh-en",
        "--corpus",
        "wmt",
        "--input",
        str(tsv),
        "--lake",
        str(lake),
    ]
    run = measure(cmd, work / f"sluice-{name}.log", env)
    timeline = [
        (at, m.group(1))
        for at, t in run.pop("lines")
        if (m := SLUICE_LINE.match(t)) and not HEARTBEAT.search(t)
    ]
    run["timeline"] = [(round(at, 1), text) for at, text in timeline]
    run["first_row_s"] = next(
        (
            round(at, 1)
            for at, text in timeline
            if text.startswith("ingest") and text.endswith("started")
        ),
        None,
    )
    # The input's numbering pass reads every row: the first row is read when it starts.
    run["reading_s"] = next((round(at, 1) for at, text in timeline
                             if text.startswith("reading ")), None)
    run["stages"] = [
        (m.group(1), float(m.group(2))) for _, t in timeline if (m := STAGE_DONE.match(t))
    ]
    kept = [KEPT_LINE.match(line) for line in Path(run["log"]).read_text().splitlines()]
    run["kept"] = sum(int(m.group(1).replace(",", "")) for m in kept if m)
    return run


# -- the library-only floor -------------------------------------------------------------------
def library_floor(real: list[tuple[str, str]], copies: int, batch: int = 4096) -> dict:
    """The per-side Arrow pass on both sides of every pair, in this process, no Spark."""
    import pyarrow as pa

    from udfs.sides import SideOptions, analyze_batch

    zh_opts, en_opts = SideOptions("zh", str(MODEL)), SideOptions("en", str(MODEL))
    analyze_batch(pa.array([p[0] for p in real[:200]]), zh_opts)  # models loaded off the clock
    analyze_batch(pa.array([p[1] for p in real[:200]]), en_opts)
    pairs = list(copies_of(real, copies))
    cpu0, wall0 = time.process_time(), time.monotonic()
    for i in range(0, len(pairs), batch):
        chunk = pairs[i : i + batch]
        analyze_batch(pa.array([p[0] for p in chunk]), zh_opts)
        analyze_batch(pa.array([p[1] for p in chunk]), en_opts)
    return {
        "cpu_s": round(time.process_time() - cpu0, 2),
        "wall_s": round(time.monotonic() - wall0, 2),
    }


# -- the report -------------------------------------------------------------------------------
def row(name: str, n: int, run: dict) -> str:
    peak = run.get("peak_rss_bytes")
    mem = f"{peak / 2**30:.2f}" if peak else "-"
    kept = f"{run['kept']:,}" if "kept" in run else "-"
    return (
        f"| {name} | {n:,} | {run['wall_s']:.1f} | {run['cpu_s']:.1f} | "
        f"{n / run['cpu_s']:,.0f} | {run['cpu_s'] / run['wall_s']:.0%} | {mem} | {kept} |"
    )


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--copies", type=int, default=4, help="copies of the real rows (4: 418,472)")
    p.add_argument("--limit", type=int, help="take only the first N real rows (a quick try)")
    p.add_argument("--scale", type=int, default=4, help="data multiple of the scale run")
    p.add_argument(
        "--scale-run",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run sluice on --scale times the data",
    )
    p.add_argument(
        "--c1-run",
        action=argparse.BooleanOptionalAction,
        default=False,
        help=f"also run sluice with SPARK_SUBMIT_OPTS={C1_ONLY} (C1-only JIT)",
    )
    p.add_argument("--work", default="/tmp/vs-opusfilter")
    p.add_argument("--opusfilter-venv", default="/tmp/venv-opusfilter")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--out", help="write the results as JSON here")
    args = p.parse_args()
    work = Path(args.work).resolve()
    claim_work(work)
    become_subreaper()
    exe = opusfilter_venv(Path(args.opusfilter_venv))

    real = real_pairs(args.limit)
    n = write_tsv(work / "pairs.tsv", real, args.copies)
    write_moses(work / "pairs", real, args.copies)
    print(f"data: {len(real):,} real zh-en rows x {args.copies} copies = {n:,} pairs", flush=True)
    results: dict = {
        "args": vars(args),
        "pairs": n,
        "real_rows": len(real),
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
    }

    results["opusfilter"] = opf = run_opusfilter(work, work / "pairs", exe)
    print(f"OpusFilter: {opf['wall_s']:.1f} s wall, {opf['cpu_s']:.1f} CPU-s", flush=True)
    results["sluice"] = sl = run_sluice(work, work / "pairs.tsv", "1x", args.master)
    print(f"sluice: {sl['wall_s']:.1f} s wall, {sl['cpu_s']:.1f} CPU-s", flush=True)
    c1 = None
    if args.c1_run:
        results["sluice_c1"] = c1 = run_sluice(
            work, work / "pairs.tsv", "1x-c1", args.master, C1_ONLY)
        print(f"sluice, C1 only: {c1['wall_s']:.1f} s wall, {c1['cpu_s']:.1f} CPU-s", flush=True)
    results["floor"] = floor = library_floor(real, args.copies)
    print(f"library floor: {floor['cpu_s']:.1f} CPU-s", flush=True)
    big = None
    if args.scale_run:
        n_big = write_tsv(work / "pairs-scaled.tsv", real, args.copies * args.scale)
        results["sluice_scaled"] = big = run_sluice(
            work, work / "pairs-scaled.tsv", f"{args.scale}x", args.master
        )
        results["pairs_scaled"] = n_big
        print(
            f"sluice {args.scale}x: {big['wall_s']:.1f} s wall, {big['cpu_s']:.1f} CPU-s",
            flush=True,
        )
    results["loadavg_end"] = load = os.getloadavg()
    ratio = sl["cpu_s"] / opf["cpu_s"]
    results["ratio_cpu_per_pair"] = round(ratio, 2)

    print(
        f"\nzh-en, {n:,} pairs ({len(real):,} real rows x {args.copies}); sluice on "
        f"{args.master}; {os.cpu_count()} CPUs, load average {results['loadavg_start'][0]:.1f}"
        f" at the start, {load[0]:.1f} at the end\n"
    )
    print("| run | pairs | wall s | CPU-s | pairs per CPU-s | CPU/wall | peak RSS GiB | kept |")
    print("|---|---|---|---|---|---|---|---|")
    print(row("OpusFilter 3.3.1 (one process)", n, opf))
    print(row(f"sluice filter.py --pair zh-en ({args.master})", n, sl))
    if c1:
        print(row(f"sluice, SPARK_SUBMIT_OPTS={C1_ONLY}", n, c1))
    print(row("sluice's per-side Python work alone", n, floor))
    if big:
        print(row(f"sluice at {args.scale}x", results["pairs_scaled"], big))
    print(f"\nsluice CPU per pair / OpusFilter CPU per pair: {ratio:.2f}x")
    if c1:
        results["ratio_cpu_per_pair_c1"] = round(c1["cpu_s"] / opf["cpu_s"], 2)
        print(f"sluice C1-only CPU per pair / OpusFilter's: {c1['cpu_s'] / opf['cpu_s']:.2f}x; "
              f"first row at {c1['first_row_s']} s")
    print(
        f"sluice CPU over the library floor: {sl['cpu_s'] - floor['cpu_s']:.1f} CPU-s "
        f"({sl['cpu_s'] / floor['cpu_s']:.1f}x the floor)"
    )
    print(
        f"sluice: input read from {sl['reading_s']} s (its numbering pass), first rows "
        f"staged (ingest started) at {sl['first_row_s']} s of {sl['wall_s']:.1f} s wall"
    )
    if big:
        print(
            f"{args.scale}x: wall {big['wall_s'] / sl['wall_s']:.2f}x, CPU "
            f"{big['cpu_s'] / sl['cpu_s']:.2f}x, peak RSS "
            f"{big['peak_rss_bytes'] / sl['peak_rss_bytes']:.2f}x (linear: {args.scale}x, "
            f"{args.scale}x, 1x); first row at {big['first_row_s']} s"
        )
    print(f"OpusFilter: {opf['after_dedup']:,} pairs after remove_duplicates, {opf['kept']:,} kept")
    for name, run in (("sluice", sl), ("sluice C1-only", c1), (f"sluice {args.scale}x", big)):
        if run:
            print(f"{name} stages: " + ", ".join(f"{s} {t:.1f} s" for s, t in run["stages"]))
            print(
                f"{name} CPU-s sampled from /proc (lower bound): "
                f"{run['cpu_s_sampled_lower_bound']:.1f}"
            )
    print(
        f"OpusFilter CPU-s sampled from /proc (lower bound): {opf['cpu_s_sampled_lower_bound']:.1f}"
    )
    for name, run in (("OpusFilter", opf), ("sluice", sl), (f"sluice {args.scale}x", big)):
        if run:
            print(
                f"{name} CPU-s: {run['cpu_s_getrusage']:.1f} reaped (getrusage) + "
                f"{run['cpu_s_autoreaped']:.1f} in {run['autoreaped_processes']} kernel-reaped "
                f"workers (/proc)"
            )
    print(f"logs: {work}/*.log")
    if args.out:
        write_json(args.out, results, say=True)


if __name__ == "__main__":
    main()

"""Scoring throughput of the selection job (jobs/select_data.py) against its libraries alone.

    python -m bench.downstream.select_throughput --rows 50000 --out /tmp/select-throughput.json
    python -m bench.downstream.select_throughput --rows 1000000 \\
        --methods moore_lewis,fasttext_domain

Builds a zh-en pool of --rows pairs from ../shared/data (WMT21-23 system outputs, zh-en and
en-zh directions; past the 199k real pairs they repeat with a ` (k)` suffix on both sides, so
dedup keeps them), filters it into a lake with jobs/filter.py (reused on a later run with the
same --rows and --work), and runs jobs/select_data.py once on the clean pool with the --methods
and a 500-pair TICO-19 seed. Each method's scoring stage is timed from the job's own log
(`score <method>: done in X s`; kmeans_domains: its pool encoding plus its scoring), and its
CPU time from /proc over the whole spark-submit process tree (JVM, Python driver, Python
workers) between the stage's start and end lines.

Then, in this one Python process on one core, the libraries alone score a random sample of
the same clean pool (--sample rows; --embed-sample for the encoders) with the models the job
just trained (its models directory in the lake):
  moore_lewis      lm_tokens + KenLM cross_entropy, in-domain and general LM, both sides
  fasttext_domain  features + fastText predict, in batches of 4,096 (the job's Arrow batch)
  embedding_knn    USE encoding of both sides (one BLAS thread, groups of 2,048 rows like the
                   job) + mean cosine to the 5 nearest seed vectors
  kmeans_domains   the same encoding + the row vector (the KMeans assignment is left out)
Reports pairs/s per core (a pair is 2 sentences: both sides are scored) through Spark (rows /
wall / cores, and rows / CPU second) and for the library, and the ratio library/Spark per
core (the issue's target: Spark within 1.5x of the library).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path

import duckdb
import numpy as np

from bench.kit import BIN, REPO, SHARED, spark_env, wmt_pairs, write_json
from udfs.domain_embed import GROUP_ROWS, knn_mean, row_vectors
from udfs.domain_fasttext import features, load_classifier, p_in_domain
from udfs.embed import EncoderSpec, encode, one_blas_thread
from udfs.ngram import cross_entropy, lm_tokens, load_lm

PAIR, LANGS = "zh-en", ("zh", "en")
METHODS = ("moore_lewis", "fasttext_domain", "embedding_knn", "kmeans_domains")
ARROW_BATCH = 4096  # spark.sql.execution.arrow.maxRecordsPerBatch in select-defaults.yaml
USE_MODEL = "models/use-multilingual-v3"
TICK = os.sysconf("SC_CLK_TCK")
LOG_LINE = re.compile(r"\[sluice [\d:]+\] (.+): (started|done in ([\d.]+) s)$")
# the job's stages that score each method (kmeans_domains encodes the pool while training)
STAGES = {m: [f"score {m}"] for m in METHODS}
STAGES["kmeans_domains"] = ["encode the pool for kmeans_domains", "score kmeans_domains"]


# -- the pool ----------------------------------------------------------------------------
def build_pool(path: Path, rows: int) -> int:
    real = wmt_pairs("wmt21-23.zh-en.tsv.gz") + wmt_pairs("wmt21-23.en-zh.tsv.gz", swap=True)
    real = [p for p in real if all(s.strip() and "\t" not in s for s in p)]
    with open(path, "w", encoding="utf-8") as out:
        for i, (zh, en) in enumerate(itertools.islice(itertools.cycle(real), rows)):
            k = i // len(real)
            tail = f" ({k})" if k else ""
            out.write(f"{zh}{tail}\t{en}{tail}\n")
    return len(real)


def write_seed(folder: Path, lines: int) -> list[str]:
    base = SHARED / "bitext/tico19/en-zh/tico19-test"
    zh = Path(f"{base}.zh").read_text(encoding="utf-8").split("\n")
    en = Path(f"{base}.en").read_text(encoding="utf-8").split("\n")
    pairs = [(a, b) for a, b in zip(zh, en, strict=False) if a.strip() and b.strip()][:lines]
    paths = []
    for side, lang in enumerate(LANGS):
        path = folder / f"seed.{lang}"
        path.write_text("".join(p[side] + "\n" for p in pairs), encoding="utf-8")
        paths.append(str(path))
    return paths


# -- running a job, with its CPU time ----------------------------------------------------
class TreeCpu:
    """CPU seconds used by a process and all its descendants, counting those that ended: the
    tree is sampled from /proc every `every` s in a thread, and each process (pid, start time)
    keeps the CPU it was last seen with (so a process loses at most `every` s of it)."""

    def __init__(self, root: int, every: float = 0.5) -> None:
        self.root, self.every = root, every
        self.seen: dict[tuple[int, str], int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def sample(self) -> float:
        children: dict[int, list[int]] = {}
        cpu: dict[int, tuple[str, int]] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # ended while we looked
            pid = int(stat.parent.name)
            children.setdefault(int(fields[1]), []).append(pid)  # fields[1]: the parent
            cpu[pid] = (fields[19], int(fields[11]) + int(fields[12]))  # start, utime+stime
        with self._lock:
            todo = [self.root]
            while todo:
                pid = todo.pop()
                if pid in cpu:
                    start, ticks = cpu[pid]
                    self.seen[(pid, start)] = ticks
                todo.extend(children.get(pid, []))
            return sum(self.seen.values()) / TICK

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.sample()


def submit(job: str, args: list[str], log_path: Path, master: str) -> dict:
    """Run a job; per stage of its log: wall (from the log) and CPU (process tree)."""
    cmd = [str(BIN / "spark-submit"), "--master", master, f"jobs/{job}.py", *args]
    started = time.monotonic()
    stages: dict[str, dict] = {}
    open_cpu: dict[str, float] = {}
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, env=spark_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace")
        assert proc.stdout is not None
        tree = TreeCpu(proc.pid)
        for line in proc.stdout:
            log.write(line)
            log.flush()
            m = LOG_LINE.search(line.rstrip("\n"))
            if not m:
                continue
            name = m.group(1)
            if m.group(2) == "started":
                open_cpu[name] = tree.sample()
            elif name in open_cpu:
                stages[name] = {"wall_s": float(m.group(3)),
                                "cpu_s": round(tree.sample() - open_cpu.pop(name), 1)}
        proc.wait()
        cpu = tree.stop()
    if proc.returncode != 0:
        tail = log_path.read_text(encoding="utf-8", errors="replace")[-4000:]
        raise SystemExit(f"{job} failed (exit {proc.returncode}), log {log_path}:\n{tail}")
    return {"wall_s": round(time.monotonic() - started, 1), "stages": stages,
            "cpu_s": round(cpu, 1)}


# -- the libraries alone -----------------------------------------------------------------
def timed(fn, *args) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn(*args)
    return time.perf_counter() - wall, time.process_time() - cpu


def lib_moore_lewis(rows: list[tuple], models: Path, entry: dict) -> tuple[float, float]:
    files = entry["files"]
    in_domain = [load_lm(str(models / f)) for f in files["in_domain"]]
    general = [[load_lm(str(models / f)) for f in fold] for fold in files["general"]]

    def run() -> None:
        for row_id, *texts in rows:
            gen = general[1 - row_id % 2]
            total = 0.0
            for i, (text, lang) in enumerate(zip(texts, LANGS, strict=True)):
                tokens = lm_tokens(text or "", lang)
                if tokens:
                    total += cross_entropy(in_domain[i], tokens) - cross_entropy(gen[i], tokens)

    return timed(run)


def lib_fasttext(rows: list[tuple], models: Path, entry: dict) -> tuple[float, float]:
    classifiers = [load_classifier(str(models / f)) for f in entry["files"]["classifier"]]

    def run() -> None:
        for start in range(0, len(rows), ARROW_BATCH):
            batch = rows[start : start + ARROW_BATCH]
            lines = [features(texts, LANGS) for _, *texts in batch]
            for fold in (0, 1):
                live = [line for (rid, *_), line in zip(batch, lines, strict=True)
                        if line and rid % 2 == fold]
                if live:
                    p_in_domain(classifiers[1 - fold], live)

    return timed(run)


def lib_embed(rows: list[tuple], seed_files: list[Path] | None) -> tuple[float, float]:
    spec = EncoderSpec("use", USE_MODEL, 256, "cpu")
    seeds = [np.load(p) for p in seed_files] if seed_files else None
    with one_blas_thread():
        encode(spec, ["warm up: load the model"])

    def run() -> None:
        with one_blas_thread():
            for start in range(0, len(rows), GROUP_ROWS):
                group = rows[start : start + GROUP_ROWS]
                per_side = [encode(spec, [r[1 + i] or "" for r in group]) for i in range(2)]
                if seeds is not None:
                    np.mean([knn_mean(v, s, 5) for v, s in zip(per_side, seeds, strict=True)],
                            axis=0)
                else:
                    row_vectors(per_side)

    return timed(run)


def library(method: str, rows: list[tuple], models: Path, entry: dict) -> tuple[float, float]:
    if method == "moore_lewis":
        return lib_moore_lewis(rows, models, entry)
    if method == "fasttext_domain":
        return lib_fasttext(rows, models, entry)
    if method == "embedding_knn":
        return lib_embed(rows, [models / f for f in entry["files"]["seed_vectors"]])
    return lib_embed(rows, None)


def sample(clean: str, n: int) -> list[tuple]:
    return duckdb.sql(f"SELECT row_id, src, tgt FROM read_parquet('{clean}') USING SAMPLE "
                      f"reservoir({n} ROWS) REPEATABLE (7)").fetchall()


# -- main --------------------------------------------------------------------------------
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000, help="pool pairs before filtering")
    p.add_argument("--methods", default="moore_lewis,fasttext_domain,embedding_knn",
                   help=f"comma-separated, of {', '.join(METHODS)}")
    p.add_argument("--sample", type=int, default=50_000,
                   help="rows the libraries score alone (moore_lewis, fasttext_domain)")
    p.add_argument("--embed-sample", type=int, default=4096,
                   help="rows the encoder scores alone (embedding_knn, kmeans_domains)")
    p.add_argument("--seed-lines", type=int, default=500)
    p.add_argument("--top", type=int, default=1000)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--work", default="/tmp/sluice-select-throughput")
    p.add_argument("--out", help="write the results as JSON here")
    args = p.parse_args()
    methods = args.methods.split(",")
    if bad := [m for m in methods if m not in METHODS]:
        raise SystemExit(f"unknown methods {bad}")
    m = re.fullmatch(r"local\[(\d+)\]", args.master)
    cores = int(m.group(1)) if m else os.cpu_count() or 1
    work = Path(args.work) / f"rows{args.rows}"
    lake = work / "lake"
    clean = f"{lake}/tables/bitext/pair={PAIR}/corpus=tput/outcome=clean/*.parquet"
    results: dict = {"args": vars(args), "cores": cores}
    marker = work / "filtered.json"
    if marker.exists():
        results["filter"] = json.loads(marker.read_text())
        print(f"reusing the filtered pool in {lake}", flush=True)
    else:
        if work.exists():
            subprocess.run(["rm", "-rf", str(work)], check=True)
        work.mkdir(parents=True)
        real = build_pool(work / "pool.tsv", args.rows)
        print(f"pool: {args.rows:,} pairs ({real:,} real ones, cycled)", flush=True)
        run = submit("filter", ["--pair", PAIR, "--corpus", "tput", "--input",
                                str(work / "pool.tsv"), "--lake", str(lake)],
                     work / "filter.log", args.master)
        results["filter"] = {"wall_s": run["wall_s"], "cpu_s": run["cpu_s"]}
        marker.write_text(json.dumps(results["filter"]))
        (work / "pool.tsv").unlink()
        print(f"filter: {run['wall_s']:.0f} s", flush=True)
    pool_rows = duckdb.sql(f"SELECT count(*) FROM read_parquet('{clean}')").fetchone()[0]
    results["pool_rows"] = pool_rows
    seed = write_seed(work, args.seed_lines)
    run_id = f"tput-{time.strftime('%Y%m%dT%H%M%S')}"
    job = submit("select", ["--pair", PAIR, "--corpus", "tput", "--seed", *seed,
                            *[a for m in methods for a in ("--method", m)],
                            "--top", str(args.top), "--lake", str(lake), "--run-id", run_id],
                 work / f"select-{run_id}.log", args.master)
    results["select"] = job
    print(f"select: {job['wall_s']:.0f} s wall, {job['cpu_s']:.0f} s CPU, "
          f"{pool_rows:,} clean rows; log {work}/select-{run_id}.log", flush=True)
    models = lake / "models/select" / PAIR / run_id
    manifest = json.loads((models / "manifest.json").read_text())
    results["methods"] = {}
    for method in methods:
        stages = [job["stages"][s] for s in STAGES[method] if s in job["stages"]]
        spark_wall = sum(s["wall_s"] for s in stages)
        spark_cpu = sum(s["cpu_s"] for s in stages)
        n = min(args.embed_sample if method in ("embedding_knn", "kmeans_domains")
                else args.sample, pool_rows)
        rows = sample(clean, n)
        lib_wall, lib_cpu = library(method, rows, models, manifest["methods"][method])
        spark_core = pool_rows / spark_wall / cores
        lib_core = n / lib_wall
        results["methods"][method] = {
            "spark_wall_s": spark_wall, "spark_cpu_s": spark_cpu,
            "spark_pairs_per_s_core": spark_core,
            "spark_pairs_per_cpu_s": pool_rows / spark_cpu if spark_cpu else None,
            "lib_rows": n, "lib_wall_s": lib_wall, "lib_cpu_s": lib_cpu,
            "lib_pairs_per_s": lib_core,
            "ratio_wall": lib_core / spark_core,
            "ratio_cpu": (spark_cpu / pool_rows) / (lib_cpu / n) if spark_cpu else None,
        }
        print(f"{method}: spark {spark_wall:.1f} s, library {n:,} rows in {lib_wall:.1f} s",
              flush=True)
    load = os.getloadavg()
    results["loadavg_end"] = load
    print(f"\npool {pool_rows:,} clean zh-en pairs (of {args.rows:,}), master {args.master}; "
          f"a pair is 2 sentences; load average at the end {load[0]:.1f} (the machine's "
          f"{os.cpu_count()} cores are shared: the CPU columns are the robust ones)")
    print("\n| method | Spark stage s | Spark CPU s | Spark pairs/s/core | Spark pairs/CPU-s "
          "| library rows | library pairs/s | library pairs/CPU-s | library/Spark per core "
          "| by CPU |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for method, r in results["methods"].items():
        per_cpu = r["spark_pairs_per_cpu_s"]
        print(f"| {method} | {r['spark_wall_s']:.1f} | {r['spark_cpu_s']:.1f} | "
              f"{r['spark_pairs_per_s_core']:,.0f} | "
              + (f"{per_cpu:,.0f}" if per_cpu else "-")
              + f" | {r['lib_rows']:,} | {r['lib_pairs_per_s']:,.0f} | "
              f"{r['lib_rows'] / r['lib_cpu_s']:,.0f} | {r['ratio_wall']:.2f}x | "
              + (f"{r['ratio_cpu']:.2f}x" if r["ratio_cpu"] else "-") + " |")
    print("\nall stages of the select run (wall s from its log / CPU s of its process tree):")
    for name, s in job["stages"].items():
        print(f"  {name}: {s['wall_s']:.1f} / {s['cpu_s']:.1f}")
    print(f"  whole job: {job['wall_s']:.0f} / {job['cpu_s']:.0f}; filter: "
          f"{results['filter']['wall_s']:.0f} / {results['filter']['cpu_s']:.0f}")
    if args.out:
        write_json(args.out, results, say=True)


if __name__ == "__main__":
    main()

"""Differential check for the filter's throughput work (issue 15): run the default funnel of an
earlier commit and of this tree on the same real zh-en pairs, then compare every row's fate and
every stored score, column by column.

    .venv/bin/python -m bench.throughput.differential --base b0d0fde --out /tmp/differential.json
    .venv/bin/python -m bench.throughput.differential --base HEAD --pairs 5000  # a try: none differ

Data: --pairs rows (200,000) of the WMT21-23 system outputs in ../shared/data: every zh-en row
(104,618), then en-zh rows with their sides swapped, written as one zh<TAB>en TSV. The base
commit is checked out into a git worktree under --work and run with PYTHONPATH set to it (the
installed `jobs`/`udfs` packages are this tree's), so both runs see the same input, config
(conf/defaults.yaml of each tree) and Spark.

Rows of `bitext` (clean and rejected) are matched by row_id (a hash of pair, corpus, file and
line: equal across the runs). Printed per column: how many rows differ (floats: by more than
1e-6), with up to three examples; columns only one run stores are listed. Exit status 1 if any
column differs.
"""

from __future__ import annotations

import argparse
import gzip
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.dataset as ds

from bench.kit import BIN, REPO, WMT_OUTPUTS, write_json

KEY = "row_id"


def write_pairs(path: Path, limit: int) -> int:
    """zh<TAB>en pairs: zh-en rows as they are, then en-zh rows swapped, `limit` in all."""
    n = 0
    with path.open("w", encoding="utf-8") as out:
        for name, swap in (("wmt21-23.zh-en.tsv.gz", False), ("wmt21-23.en-zh.tsv.gz", True)):
            with gzip.open(WMT_OUTPUTS / name, "rt", encoding="utf-8") as f:
                header = f.readline().rstrip("\n").split("\t")
                src, tgt = header.index("src"), header.index("tgt")
                for line in f:
                    if n == limit:
                        return n
                    cols = line.rstrip("\n").split("\t")
                    a, b = (cols[tgt], cols[src]) if swap else (cols[src], cols[tgt])
                    out.write(f"{a}\t{b}\n")
                    n += 1
    return n


def run_filter(tree: Path, tsv: Path, lake: Path) -> float:
    """The filter job of `tree` on `tsv`; its wall time."""
    env = dict(os.environ, PYTHONPATH=str(tree), PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable)
    cmd = [str(BIN / "spark-submit"), "--master", "local[2]", str(tree / "jobs/filter.py"),
           "--pair", "zh-en", "--corpus", "wmt", "--input", str(tsv), "--lake", str(lake)]
    start = time.time()
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{tree}: the filter job failed:\n{(done.stdout + done.stderr)[-3000:]}")
    return time.time() - start


def rows(lake: Path) -> dict[int, dict]:
    """Every row of the run's `bitext` table (clean and rejected), by row_id."""
    data = ds.dataset(lake / "tables/bitext", format="parquet", partitioning="hive")
    return {row[KEY]: row for row in data.to_table().to_pylist()}


def differs(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return not (math.isclose(a, b, abs_tol=1e-6) or (math.isnan(a) and math.isnan(b)))
    if isinstance(a, list) and isinstance(b, list) and a and isinstance(a[0], tuple):
        a, b = dict(a), dict(b)  # maps come back as lists of (key, value)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() != b.keys() or any(differs(a[k], b[k]) for k in a)
    return a != b


def compare(base: dict[int, dict], head: dict[int, dict]) -> dict:
    skip = {"run_id", "file", "file_tgt"}  # the run id and the file path differ by design
    if base.keys() != head.keys():
        return {"row_ids": f"{len(base.keys() ^ head.keys())} rows in only one run"}
    cols_b, cols_h = next(iter(base.values())).keys(), next(iter(head.values())).keys()
    report: dict = {"only_base": sorted(cols_b - cols_h), "only_head": sorted(cols_h - cols_b),
                    "columns": {}}
    for col in sorted((cols_b & cols_h) - skip):
        bad = [k for k in base if differs(base[k][col], head[k][col])]
        examples = [{"row_id": k, "base": base[k][col], "head": head[k][col]} for k in bad[:3]]
        report["columns"][col] = {"differ": len(bad), "examples": examples}
    return report


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base", required=True, help="the commit to compare with")
    p.add_argument("--pairs", type=int, default=200_000)
    p.add_argument("--work", type=Path, default=Path("/tmp/sluice-differential"))
    p.add_argument("--out", type=Path, help="write the comparison as JSON")
    args = p.parse_args()
    work = args.work
    subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir(parents=True)
    tsv = work / "pairs.tsv"
    n = write_pairs(tsv, args.pairs)
    tree = work / "base"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), args.base],
                   check=True, capture_output=True)
    (tree / "models").symlink_to(REPO / "models")  # ignored by git: the same model files
    try:
        wall_base = run_filter(tree, tsv, work / "lake-base")
        wall_head = run_filter(REPO, tsv, work / "lake-head")
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)],
                       check=False)
    report = compare(rows(work / "lake-base"), rows(work / "lake-head"))
    report.update(pairs=n, base=args.base, wall_base_s=round(wall_base, 1),
                  wall_head_s=round(wall_head, 1))
    print(f"{n:,} pairs; base {args.base}: {wall_base:.1f} s wall, this tree: {wall_head:.1f} s")
    print(f"columns only in base: {report.get('only_base')}; only here: {report.get('only_head')}")
    changed = {c: r for c, r in report.get("columns", {}).items() if r["differ"]}
    for col, r in changed.items():
        print(f"  {col}: {r['differ']:,} rows differ, e.g. {r['examples'][:1]}")
    if "row_ids" in report:
        print(report["row_ids"])
    print("no differences" if not changed and "row_ids" not in report else "DIFFERENCES")
    if args.out:
        write_json(args.out, report)
    sys.exit(1 if changed or "row_ids" in report else 0)


if __name__ == "__main__":
    main()

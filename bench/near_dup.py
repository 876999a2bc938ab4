"""Near-duplicate dedup (jobs/filtering/near_dup.py, issue 40) on WMT21-23 system outputs:
every submitted system's translation of the same source segments, so the same source recurs
with translations from identical to far apart, as a crawl repeats itself.

- `quality`: all rows of the first --segments segments of each test set of a direction (every
  system's output), after exact dedup's key would have folded case, spaces and punctuation;
  the stage against brute force: the true Jaccard of every pair of rows' shingles (the same
  shingles the stage hashes). Recall: rows with an earlier true near-duplicate that the stage
  rejects; precision: rejected rows that have a true near-duplicate.
- `scale`: the stage alone on the first --rows rows of a direction (staged to Parquet first, so
  only the stage is timed): wall seconds, and CPU seconds of this process and its
  descendants (the JVM, its Python workers: /proc), per row.

    python bench/near_dup.py quality [--pair zh-en] [--segments 40] [--threshold 0.8]
    python bench/near_dup.py scale [--pair zh-en] [--rows 100000]
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

OUTPUTS = REPO.parent / "shared/data/bitext/wmt21-23-system-outputs"
ROW = "row_id long, corpus string, file string, line int, src string, tgt string, " \
      "reject_stage string, reject_rule string, dup_of long"


def read_rows(pair: str, limit: int | None = None, segments: int | None = None) -> list[tuple]:
    """(row_id, corpus, file, line, src, tgt, ...) of the direction's file, in file order."""
    rows = []
    with gzip.open(OUTPUTS / f"wmt21-23.{pair}.tsv.gz", "rt", encoding="utf-8") as f:
        next(f)
        for line_no, line in enumerate(f, 2):
            year, testset, _, seg, src, tgt = line.rstrip("\n").split("\t")[:6]
            if segments is not None and int(seg) > segments:
                continue
            rows.append((len(rows) + 1, f"wmt{year}", testset, line_no, src, tgt,
                         None, None, None))
            if limit and len(rows) >= limit:
                break
    return rows


def tree_cpu() -> float:
    """CPU seconds of this process and all its descendants (the Spark JVM, its Python
    workers), those that ended included: /proc's utime, stime, cutime, cstime."""
    import os

    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry.name)] = (int(fields[1]), sum(int(x) for x in fields[11:15]))
    mine, grew = {os.getpid()}, True
    while grew:
        more = {pid for pid, (parent, _) in stats.items() if parent in mine} - mine
        mine |= more
        grew = bool(more)
    return sum(stats[pid][1] for pid in mine if pid in stats) / os.sysconf("SC_CLK_TCK")


def session():
    from jobs.lake.session import build_session

    work = tempfile.mkdtemp(prefix="sluice-near-dup-")
    return build_session("near-dup-bench", work, master="local[2]",
                         conf={"spark.sql.shuffle.partitions": "16",
                               "spark.ui.enabled": "false"}), Path(work)


def quality(args: argparse.Namespace) -> None:
    from pyspark.sql import functions as F

    from jobs.filtering.config import load_config
    from jobs.filtering.near_dup import by_characters, near_dup, shingles, text_of

    spark, _ = session()
    cfg = load_config(None, ["near_dup.enabled=true", f"near_dup.threshold={args.threshold}",
                             f"near_dup.side={args.side}"], {"pair": args.pair})
    rows = read_rows(args.pair, segments=args.segments)
    df = spark.createDataFrame(rows, ROW).repartition(4)
    sh = {r.row_id: set(r.sh) for r in df.select("row_id", shingles(
        text_of(cfg.near_dup, False), cfg.near_dup, by_characters(cfg)).alias("sh"))
        .collect()}
    start = time.time()
    partners: dict[int, set[int]] = {a: set() for a in sh}
    for a, b in itertools.combinations(sorted(sh), 2):
        if len(sh[a] & sh[b]) >= args.threshold * len(sh[a] | sh[b]):
            partners[a].add(b)
            partners[b].add(a)
    brute = time.time() - start
    later = {a for a, p in partners.items() if p and min(p) < a}
    found = {r.row_id for r in near_dup(df, cfg).where(F.col("reject_rule") == "near_dup")
             .collect()}
    recall = len(found & later) / len(later) if later else float("nan")
    precision = sum(bool(partners[a]) for a in found) / len(found) if found else float("nan")
    print(f"{args.pair} side {args.side}, Jaccard >= {args.threshold}: {len(rows)} rows "
          f"({args.segments} segments per test set), {len(later)} with an earlier true "
          f"near-duplicate (brute force: {brute:.0f} s); the stage rejects {len(found)}: "
          f"recall {recall:.3f}, precision {precision:.3f}")
    spark.stop()


def scale(args: argparse.Namespace) -> None:
    from jobs.filtering.config import load_config
    from jobs.filtering.near_dup import near_dup

    spark, work = session()
    cfg = load_config(None, ["near_dup.enabled=true", f"near_dup.side={args.side}"],
                      {"pair": args.pair})
    rows = read_rows(args.pair, limit=args.rows)
    staged = str(work / "rows")
    spark.createDataFrame(rows, ROW).repartition(16).write.parquet(staged)
    df = spark.read.parquet(staged)
    wall, cpu = time.time(), tree_cpu()
    out = near_dup(df, cfg)
    rejected = out.where("reject_rule = 'near_dup'").count()
    wall, cpu = time.time() - wall, tree_cpu() - cpu
    print(f"{args.pair} side {args.side}: {len(rows):,} rows, {rejected:,} near-duplicates; "
          f"{wall:.1f} s wall, {cpu:.1f} CPU-s ({cpu / len(rows) * 1e6:.0f} CPU-us a row)")
    spark.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=("quality", "scale"))
    p.add_argument("--pair", default="zh-en")
    p.add_argument("--side", default="pair", choices=("pair", "src", "tgt"))
    p.add_argument("--segments", type=int, default=40)
    p.add_argument("--threshold", type=float, default=0.8)
    p.add_argument("--rows", type=int, default=100_000)
    args = p.parse_args()
    quality(args) if args.what == "quality" else scale(args)


if __name__ == "__main__":
    main()

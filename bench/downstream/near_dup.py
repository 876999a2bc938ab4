"""Near-duplicate dedup (jobs/filtering/near_dup.py, issue 40) on WMT21-23 system outputs:
every submitted system's translation of the same source segments, so the same source recurs
with translations from identical to far apart, as a crawl repeats itself.

- `quality`: all rows of the first --segments segments of each test set of a direction (every
  system's output), after exact dedup's key would have folded case, spaces and punctuation;
  the stage against brute force: the true Jaccard of every pair of rows' shingles (the same
  shingles the stage hashes). Recall: rows with an earlier true near-duplicate that the stage
  rejects; precision: rejected rows that have a true near-duplicate.
- `scale`: the stage alone on the first --rows rows of one or more directions (staged to
  Parquet first, so only the stage is timed; --copies K repeats each row K times with a
  number added to its target, to reach 1M rows): wall seconds, CPU seconds of this process
  and its descendants (the JVM, its Python workers: /proc), per row, and the JVM's peak
  resident memory (its heap is Spark's default 1 GB: memory per executor must stay flat).
- `peer`: the stage and datatrove's MinHash dedup (4 steps: signatures, buckets, clusters,
  filter; 2 tasks at a time, as Spark's local[2]) on the same first --rows rows of a
  word-spaced direction (ru-en; the stage's character shingles of zh, ja, th have no datatrove
  counterpart): the same compared text (the stage's `text_of`), the same banding (the stage's
  `bands`: num_buckets x hashes_per_bucket), word 3-grams, and datatrove's text normalisation
  cut to the stage's (lower case, punctuation and spaces; numbers and diacritics kept; words
  split on spaces: the interpreter given, --peer-python, a venv of datatrove[processing],
  lacks spaCy). Datatrove runs in that interpreter in a subprocess (PEER, over JSONL) and
  reports its own CPU (getrusage, itself and its workers). Printed: rows removed, wall and CPU
  seconds, CPU-us a row of each, the CPU ratio; rows removed by both, by one only (and of
  those, how many the other kept as its group's survivor); and, on a sample of up to 2,000
  rows removed by one only, how many have a true near-duplicate among the rows (brute force
  over the stage's shingles, as `quality`).

    python -m bench.downstream.near_dup quality [--pair zh-en] [--segments 40] [--threshold 0.8]
    python -m bench.downstream.near_dup scale [--pair zh-en] [--rows 100000] [--copies 1]
    python -m bench.downstream.near_dup peer [--pair ru-en] [--rows 20000]
        --peer-python DT/bin/python [--out peer.json]
    # DT: python -m venv DT && DT/bin/pip install "datatrove[processing]" (0.10.1 measured)

Each mode takes --out FILE: its printed figures as JSON.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from bench.kit import WMT_OUTPUTS, write_json

ROW = "row_id long, corpus string, file string, line int, src string, tgt string, " \
      "reject_stage string, reject_rule string, dup_of long"
PEER_WORKERS = 2  # datatrove's tasks at a time: Spark's local[2]
SAMPLE = 2_000  # rows removed by one tool only whose true near-duplicates are looked for

# datatrove's side of `peer`, run by --peer-python: argv[1] a folder with rows/*.jsonl (id,
# text; one file a task), argv[2] the settings (JSON). Writes result.json there: the ids it
# removes, those it keeps as their cluster's survivor, its wall and CPU seconds (from its
# imports on). Rows are read and kept ids recorded by two plain steps (datatrove's
# JsonlReader and JsonlWriter want orjson, which the venv lacks).
PEER = r"""
import json, resource, sys, time
from pathlib import Path

from datatrove.data import Document
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup.minhash import (
    MinhashConfig, MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter,
    MinhashDedupSignature)
from datatrove.utils.text import TextNormConfig
from datatrove.utils.word_tokenizers import WordTokenizer


class Spaces(WordTokenizer):  # after simplify_text, words are separated by single spaces
    def word_tokenize(self, text):
        return text.split()

    def sent_tokenize(self, text):
        return [text]

    def span_tokenize(self, text):
        return [(0, len(text))]


def cpu():
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def rows(data, rank=0, world_size=1):  # this task's file, in order
    with open(sorted((work / "rows").glob("*.jsonl"))[rank], encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            yield Document(text=row["text"], id=row["id"])


def kept(data, rank=0, world_size=1):  # the rows the filter keeps, and their cluster
    with open(work / f"kept.{rank}", "w") as f:
        for doc in data:
            f.write(f"{doc.id} {doc.metadata.get('minhash_cluster_id', -1)}\n")
            yield doc


def run(pipeline, tasks, name):  # fork: the workers are this process's children (getrusage)
    LocalPipelineExecutor(pipeline, tasks=tasks, workers=min(tasks, s["workers"]),
                          logging_dir=str(work / "logs" / name), start_method="fork").run()


work, s = Path(sys.argv[1]), json.loads(sys.argv[2])
cfg = MinhashConfig(n_grams=s["n_grams"], num_buckets=s["bands"], hashes_per_bucket=s["rows"],
                    seed=s["seed"], norm_config=TextNormConfig(norm_numbers=False,
                                                               norm_unicode_diacritics=False))
tasks = len(list((work / "rows").glob("*.jsonl")))
wall, cpu0 = time.time(), cpu()
run([rows, MinhashDedupSignature(str(work / "sigs"), config=cfg, language=Spaces())],
    tasks, "sigs")
run([MinhashDedupBuckets(str(work / "sigs"), str(work / "buckets"), config=cfg)],
    cfg.num_buckets, "buckets")
run([MinhashDedupCluster(str(work / "buckets"), str(work / "remove"), config=cfg,
                         save_cluster_id=True)], 1, "clusters")
run([rows, MinhashDedupFilter(str(work / "remove"), load_cluster_ids=True), kept], tasks, "filter")
wall, cpu1 = time.time() - wall, cpu() - cpu0
everyone = [json.loads(line)["id"] for f in sorted((work / "rows").glob("*.jsonl"))
            for line in f.open(encoding="utf-8")]
cluster = dict(line.split() for f in sorted(work.glob("kept.*")) for line in f.open())
(work / "result.json").write_text(json.dumps({
    "removed": [i for i in everyone if i not in cluster],
    "survivors": [i for i, c in cluster.items() if c != "-1"],
    "wall_s": wall, "cpu_s": cpu1, "peak_mib": max(
        resource.getrusage(w).ru_maxrss for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    / 1024}))
"""


def read_rows(pairs: str, limit: int | None = None, segments: int | None = None,
              copies: int = 1) -> list[tuple]:
    """(row_id, corpus, file, line, src, tgt, ...) of the directions' files (comma-separated),
    in file order; with `copies` > 1 each row again copies - 1 times with a number added to
    its target (" (2)", " (3)", ...): the boilerplate a crawl repeats, to reach 1M rows."""
    rows = []
    for pair in pairs.split(","):
        with gzip.open(WMT_OUTPUTS / f"wmt21-23.{pair}.tsv.gz", "rt", encoding="utf-8") as f:
            next(f)
            for line_no, line in enumerate(f, 2):
                year, testset, _, seg, src, tgt = line.rstrip("\n").split("\t")[:6]
                if segments is not None and int(seg) > segments:
                    continue
                for copy in range(copies):
                    rows.append((len(rows) + 1, f"wmt{year}", f"{pair}/{testset}", line_no,
                                 src, tgt + (f" ({copy + 1})" if copy else ""),
                                 None, None, None))
                if limit and len(rows) >= limit:
                    return rows[:limit]
    return rows


def stage(spark, rows: list[tuple], path: Path):
    """The rows as Parquet (pyarrow: 1M rows through Spark's Python data frame would time the
    driver), read back by Spark in 16 parts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = [c.split()[0] for c in ROW.split(", ")]
    table = pa.Table.from_pydict({n: [r[i] for r in rows] for i, n in enumerate(names)})
    table = table.cast(pa.schema([(n, pa.int64() if n in ("row_id", "dup_of") else pa.int32()
                                   if n == "line" else pa.string()) for n in names]))
    path.mkdir(parents=True)
    step = -(-len(rows) // 16)
    for k in range(16):
        pq.write_table(table.slice(k * step, step), path / f"part-{k:02d}.parquet")
    return spark.read.parquet(str(path))


def jvm_peak_mib() -> float:
    """The largest peak resident memory (VmHWM) among this process's JVM descendants: Spark's
    local-mode driver, which is its executor too."""
    import os

    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int(
                    (entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    mine, grew = {os.getpid()}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in mine} - mine
        mine |= more
        grew = bool(more)
    peak = 0.0
    for pid in mine:
        try:
            if b"java" not in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]:
                continue
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) / 1024)
        except OSError:
            continue
    return peak


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


def quality(args: argparse.Namespace) -> dict:
    from pyspark.sql import functions as F

    from jobs.filtering.config import load_config
    from jobs.filtering.near_dup import by_characters, near_dup, shingles, text_of

    spark, _ = session()
    cfg = load_config(None, ["near_dup.enabled=true", f"near_dup.threshold={args.threshold}",
                             f"near_dup.side={args.side}"], {"pair": args.pair.split(",")[0]})
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
    return {"pair": args.pair, "side": args.side, "threshold": args.threshold,
            "segments": args.segments, "rows": len(rows), "true_later": len(later),
            "brute_s": brute, "rejected": len(found), "recall": recall, "precision": precision}


def scale(args: argparse.Namespace) -> dict:
    from jobs.filtering.config import load_config
    from jobs.filtering.near_dup import near_dup

    spark, work = session()
    cfg = load_config(None, ["near_dup.enabled=true", f"near_dup.side={args.side}"],
                      {"pair": args.pair.split(",")[0]})
    rows = read_rows(args.pair, limit=args.rows, copies=args.copies)
    df = stage(spark, rows, work / "rows")
    wall, cpu = time.time(), tree_cpu()
    out = near_dup(df, cfg)
    rejected = out.where("reject_rule = 'near_dup'").count()
    wall, cpu = time.time() - wall, tree_cpu() - cpu
    peak = jvm_peak_mib()
    print(f"{args.pair} side {args.side}: {len(rows):,} rows, {rejected:,} near-duplicates; "
          f"{wall:.1f} s wall, {cpu:.1f} CPU-s ({cpu / len(rows) * 1e6:.0f} CPU-us a row); "
          f"the JVM's peak resident memory {peak:,.0f} MiB")
    spark.stop()
    return {"pair": args.pair, "side": args.side, "rows": len(rows), "rejected": rejected,
            "wall_s": wall, "cpu_s": cpu, "cpu_us_per_row": cpu / len(rows) * 1e6,
            "jvm_peak_mib": peak}


def true_near_dups(ids: list[int], sh: dict[int, set[int]], threshold: float) -> set[int]:
    """Those of `ids` with another row whose shingles' true Jaccard is >= threshold (rows
    sharing a shingle, from an inverted index: the same test as `quality`'s brute force)."""
    index = defaultdict(list)
    for row, hashes in sh.items():
        for h in hashes:
            index[h].append(row)
    found = set()
    for a in ids:
        shared = Counter(b for h in sh[a] for b in index[h] if b != a)
        if any(n >= threshold * (len(sh[a]) + len(sh[b]) - n) for b, n in shared.items()):
            found.add(a)
    return found


def run_peer(python: Path, work: Path, texts: dict[int, str], settings: dict) -> dict:
    """datatrove's MinHash dedup of `texts` (PEER, in `python`): in row_id order, in two
    files (its two tasks)."""
    (work / "rows").mkdir(parents=True)
    ids = sorted(texts)
    half = (len(ids) + 1) // 2
    for k, part in enumerate((ids[:half], ids[half:])):
        with open(work / "rows" / f"{k:02d}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps({"id": str(i), "text": texts[i]}, ensure_ascii=False) + "\n"
                         for i in part)
    done = subprocess.run([str(python), "-c", PEER, str(work), json.dumps(settings)],
                          capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"datatrove ({python}) failed:\n{done.stderr[-3000:]}")
    return json.loads((work / "result.json").read_text())


def peer(args: argparse.Namespace) -> dict:
    from jobs.filtering.config import load_config
    from jobs.filtering.near_dup import SEED, bands, by_characters, near_dup, shingles, text_of

    if not args.peer_python or not Path(args.peer_python).exists():
        print(f"peer: no interpreter at {args.peer_python} (--peer-python: a Python with "
              f"datatrove[processing])", file=sys.stderr)
        sys.exit(2)
    cfg = load_config(None, ["near_dup.enabled=true", f"near_dup.threshold={args.threshold}",
                             f"near_dup.side={args.side}"], {"pair": args.pair.split(",")[0]})
    nd = cfg.near_dup
    if by_characters(cfg):
        print(f"peer: {args.pair} {args.side} is cut into character n-grams, which datatrove "
              f"has no counterpart for: take a word-spaced pair (ru-en, de-en)", file=sys.stderr)
        sys.exit(2)
    b, r = bands(nd.threshold, nd.num_perm)

    spark, work = session()
    rows = read_rows(args.pair, limit=args.rows, copies=args.copies)
    df = stage(spark, rows, work / "rows")
    wall, cpu = time.time(), tree_cpu()
    dup_of = {x.row_id: x.dup_of for x in near_dup(df, cfg).where("reject_rule = 'near_dup'")
              .select("row_id", "dup_of").collect()}
    wall, cpu = time.time() - wall, tree_cpu() - cpu
    peak = jvm_peak_mib()
    text = text_of(nd, cfg.mono)  # what the stage compares, and its shingles (untimed)
    texts, sh = {}, {}
    for x in df.select("row_id", text.alias("text"),
                       shingles(text, nd, False).alias("sh")).collect():
        texts[x.row_id], sh[x.row_id] = x.text, set(x.sh)
    spark.stop()

    theirs = run_peer(Path(args.peer_python), work / "datatrove", texts,
                      {"n_grams": nd.word_ngram, "bands": b, "rows": r, "seed": SEED,
                       "workers": PEER_WORKERS})
    n = len(rows)
    figures = {"sluice": {"removed": len(dup_of), "wall_s": wall, "cpu_s": cpu,
                          "peak_mib": peak},
               "datatrove": {"removed": len(theirs["removed"]), "wall_s": theirs["wall_s"],
                             "cpu_s": theirs["cpu_s"], "peak_mib": theirs["peak_mib"]}}
    for f in figures.values():
        f["cpu_us_per_row"] = f["cpu_s"] / n * 1e6

    ours, their = set(dup_of), {int(i) for i in theirs["removed"]}
    our_survivors, their_survivors = set(dup_of.values()), {int(i) for i in theirs["survivors"]}
    only_ours, only_theirs = ours - their, their - ours
    disagree = sorted(only_ours | only_theirs)
    sample = sorted(random.Random(SEED).sample(disagree, min(SAMPLE, len(disagree))))
    true = true_near_dups(sample, sh, nd.threshold)
    in_sample = {"only_sluice": [i for i in sample if i in only_ours],
                 "only_datatrove": [i for i in sample if i in only_theirs]}

    print(f"{args.pair} side {args.side}, Jaccard >= {nd.threshold}, {b} bands x {r} rows, "
          f"word {nd.word_ngram}-grams: the first {n:,} rows")
    print(f"  {'':10} {'removed':>8} {'wall s':>7} {'CPU s':>7} {'CPU-us/row':>11} "
          f"{'peak MiB':>9}")
    for name, f in figures.items():
        print(f"  {name:10} {f['removed']:8,} {f['wall_s']:7.1f} {f['cpu_s']:7.1f} "
              f"{f['cpu_us_per_row']:11,.0f} {f['peak_mib']:9,.0f}")
    ratio = cpu / theirs["cpu_s"] if theirs["cpu_s"] else float("nan")
    print(f"  CPU sluice / datatrove: {ratio:.2f}")
    print(f"  removed by both {len(ours & their):,}; only by sluice {len(only_ours):,} "
          f"(datatrove kept {len(only_ours & their_survivors):,} of them as its group's "
          f"survivor); only by datatrove {len(only_theirs):,} (sluice kept "
          f"{len(only_theirs & our_survivors):,} as its group's survivor)")
    print(f"  a sample of {len(sample):,} of those {len(disagree):,}: with a true near-duplicate "
          f"(Jaccard >= {nd.threshold} of the stage's shingles) among the rows: "
          + "; ".join(f"{k.replace('_', ' ')} {len(true & set(v)):,} of {len(v):,}"
                      for k, v in in_sample.items()))
    figures |= {
        "pair": args.pair, "side": args.side, "threshold": nd.threshold, "bands": b,
        "rows_per_band": r, "word_ngram": nd.word_ngram, "rows": n, "cpu_ratio": ratio,
        "removed_by_both": len(ours & their), "only_sluice": len(only_ours),
        "only_sluice_datatrove_survivor": len(only_ours & their_survivors),
        "only_datatrove": len(only_theirs),
        "only_datatrove_sluice_survivor": len(only_theirs & our_survivors),
        "sample": {k: {"rows": len(v), "with_true_near_dup": len(true & set(v))}
                   for k, v in in_sample.items()},
    }
    shutil.rmtree(work, ignore_errors=True)
    return figures


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=("quality", "scale", "peer"))
    p.add_argument("--pair", help="a direction, or several comma-separated (the config is the "
                   "first's); default zh-en; peer: ru-en")
    p.add_argument("--side", default="pair", choices=("pair", "src", "tgt"))
    p.add_argument("--segments", type=int, default=40)
    p.add_argument("--threshold", type=float, default=0.8)
    p.add_argument("--rows", type=int, help="default 100000; peer: 20000")
    p.add_argument("--peer-python",
                   help="an interpreter with datatrove[processing] (peer)")
    p.add_argument("--copies", type=int, default=1,
                   help="each row this many times, the copies' targets numbered (scale, peer)")
    p.add_argument("--out", type=Path, help="the printed figures as JSON")
    args = p.parse_args()
    peering = args.what == "peer"
    args.pair = args.pair or ("ru-en" if peering else "zh-en")
    args.rows = args.rows or (20_000 if peering else 100_000)
    figures = {"quality": quality, "scale": scale, "peer": peer}[args.what](args)
    if args.out:
        write_json(args.out, figures)


if __name__ == "__main__":
    main()

"""What an incremental refresh (jobs/refresh.py) costs next to filtering its new data alone.

    python -m bench.throughput.refresh_cost          # a 1M-pair lake, a 10k-pair refresh
    python -m bench.throughput.refresh_cost --lake-pairs 50000 --new-pairs 2000 \\
        --out /tmp/refresh.json
    python -m bench.throughput.refresh_cost --lake-pairs 200000 --new-pairs 5000 \\
        --near-dup   # issue 40

The issue's check: a lake of --lake-pairs pairs, then a refresh adding one file of
--new-pairs pairs. The refresh should take at most 2x the time of filtering that file alone
(jobs/filter.py into an empty lake): its cost must follow the new data, not the lake's size.

Data: real zh-en pairs from ../shared/data (WMT21-23 system outputs, zh-en and en-zh
directions, about 199k pairs), taken in order and cycled as bench/downstream/select_throughput.py
builds its pool: past the first cycle both sides get a ` (k)` suffix, k the cycle, which the dedup
key keeps (it ignores punctuation, not digits), so the rows differ but for the real data's
own repeats (several systems giving the same translation). Positions 0 .. L-1 of that stream
are the lake, split into --lake-files TSV files under WORK/sources/crawl/; the new file
(WORK/incoming/new.tsv) holds the next positions, with --dup-share (5%) of its lines copied
from random lake lines and shuffled in, so the lake-wide dedup has something to find.

Runs, each a real spark-submit on --master, timed for wall and CPU time of the whole process
tree (JVM, Python driver, Python workers: getrusage(RUSAGE_CHILDREN) around it):
  1. refresh 1 reads the lake files and builds the lake (not the point; the lake is then
     copied to WORK/lake-after-refresh1, which --reuse starts from on a later run);
  2. refresh 2, after the new file is copied into the sources: the timed refresh;
  3. refresh 3 with nothing new: "up to date" (told before Spark starts);
  4. jobs/filter.py on the new file alone, into an empty lake: the baseline;
  5. refresh 2 again on the restored copy, with refresh.lake_dedup=false (--no-dedup-off
     skips it): refresh 2 minus this is what the lake-wide dedup costs at this lake size.
With --near-dup every run has the near_dup stage on (jobs/filtering/near_dup.py): refresh 2
then compares its new rows with the committed rows' stored band keys (jobs/refreshing/
near_dup.py), and run 5 (near-dup over the new rows alone, as exact dedup) tells what that
lake-wide part costs.
Prints a table (refresh/filter ratio: target <= 2), the duplicates refresh 2 found against
the lake and within the new file (from its rows in the bitext table: `duplicate*` rejections
whose dup_of is a committed row or a new one), where refresh 2's time went (its log lines,
timed as they came), and how lake-wide dedup scales: it reads, for every clean lake row, the
stored key hash and (file, line, row_id), not the text, and joins them with the new rows'
distinct keys; so its cost is linear in the lake's rows with a small constant (the Parquet
bytes it reads per lake row are printed). Run two --lake-pairs to see the slope.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.kit import BIN, REPO, spark_env, wmt_pairs, write_json

PAIR, CORPUS = "zh-en", "crawl"
FUNNEL_LINE = re.compile(r"^\s+- (\S+)\s+([\d,]+)\s+\((\w+)\)\s*$")
STAGE_DONE = re.compile(r"\[sluice [\d:]+\] (.+): done in ([\d.]+) s")
SLUICE_LINE = re.compile(r"^\[sluice [\d:]+\] (.*)$")
MARK = ".refresh-bench"
HEARTBEAT = re.compile(r": \d+ s, (Spark stage|between Spark stages)")


# -- the data ---------------------------------------------------------------------------------
def real_pairs() -> list[tuple[str, str]]:
    real = wmt_pairs("wmt21-23.zh-en.tsv.gz") + wmt_pairs("wmt21-23.en-zh.tsv.gz", swap=True)
    return [p for p in real if all(s.strip() and "\t" not in s and "\r" not in s for s in p)]


def line_at(real: list[tuple[str, str]], i: int) -> str:
    """Position i of the cycled stream: the real pair, with ` (k)` on both sides past cycle 0."""
    zh, en = real[i % len(real)]
    k = i // len(real)
    tail = f" ({k})" if k else ""
    return f"{zh}{tail}\t{en}{tail}\n"


def build_data(work: Path, lake_pairs: int, new_pairs: int, files: int, dup_share: float,
               seed: int) -> dict:
    real = real_pairs()
    crawl = work / "sources" / CORPUS
    crawl.mkdir(parents=True)
    bounds = [lake_pairs * f // files for f in range(files + 1)]
    for f in range(files):
        with open(crawl / f"part-{f:03d}.tsv", "w", encoding="utf-8") as out:
            out.writelines(line_at(real, i) for i in range(bounds[f], bounds[f + 1]))
    rng = random.Random(seed)
    copied = min(round(new_pairs * dup_share), lake_pairs)
    lines = [line_at(real, i) for i in range(lake_pairs, lake_pairs + new_pairs - copied)]
    lines += [line_at(real, i) for i in rng.sample(range(lake_pairs), copied)]
    order = list(range(len(lines)))
    rng.shuffle(order)
    copied_at = sorted(n for n, j in enumerate(order) if j >= new_pairs - copied)
    (work / "incoming").mkdir()
    with open(work / "incoming/new.tsv", "w", encoding="utf-8") as out:
        out.writelines(lines[j] for j in order)
    print(f"data: {len(real):,} real zh-en pairs, cycled; lake {lake_pairs:,} pairs in {files} "
          f"files, new file {new_pairs:,} pairs ({copied:,} copied from the lake)", flush=True)
    return {"real_pairs": len(real), "copied": copied, "copied_at": copied_at}


def write_config(work: Path, near_dup: bool) -> Path:
    path = work / "refresh.yaml"
    path.write_text(
        f"extends: {REPO / 'conf/zh-en.yaml'}\n"
        f"lake: {{root: {work / 'lake'}}}\n"
        + ("near_dup: {enabled: true}\n" if near_dup else "") +
        "sources:\n"
        f"  - corpus: {CORPUS}\n"
        f"    path: {work / 'sources' / CORPUS}/\n"
        "    format: tsv\n",
        encoding="utf-8",
    )
    return path


# -- running a job ----------------------------------------------------------------------------
def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def submit(job: str, args: list[str], log_path: Path, master: str | None) -> dict:
    """One spark-submit (`master` None: the job run by plain Python, as the up-to-date check
    can be): wall time, CPU time of its process tree (every descendant that was waited for:
    the JVM reaps the Python driver and workers), its sluice log lines with the second each
    came at, its stages (`X: done in N s`) and its funnel."""
    launch = [str(BIN / "spark-submit"), "--master", master] if master else [sys.executable]
    cmd = [*launch, f"jobs/{job}.py", *args]
    lines: list[tuple[float, str]] = []
    cpu0, started = children_cpu(), time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        log.write(" ".join(cmd) + "\n")
        proc = subprocess.Popen(cmd, cwd=REPO, env=spark_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace")
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            lines.append((time.monotonic() - started, line.rstrip("\n")))
        proc.wait()
    wall, cpu = time.monotonic() - started, children_cpu() - cpu0
    if proc.returncode != 0:
        tail = log_path.read_text(encoding="utf-8", errors="replace")[-4000:]
        raise SystemExit(f"{job} failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                         f"log {log_path}:\n{tail}")
    funnel = {}
    for _, text in lines:
        m = FUNNEL_LINE.match(text)
        if m:
            funnel[m.group(1)] = funnel.get(m.group(1), 0) + int(m.group(2).replace(",", ""))
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "stages": [(m.group(1), float(m.group(2))) for _, t in lines
                   if (m := STAGE_DONE.search(t))],
        "timeline": [(round(at, 1), m.group(1)) for at, t in lines
                     if (m := SLUICE_LINE.match(t)) and not HEARTBEAT.search(t)],
        "funnel": funnel,
        "up_to_date": any(t.startswith("up to date") for _, t in lines),
        "log": str(log_path),
    }


def refresh(work: Path, config: Path, name: str, run_id: str, master: str | None,
            extra: list[str] | None = None) -> dict:
    run = submit("refresh", ["--config", str(config), "--run-id", run_id, *(extra or [])],
                 work / f"{name}.log", master)
    print(f"{name}: {run['wall_s']:.1f} s wall, {run['cpu_s']:.1f} s CPU"
          + (" (up to date)" if run["up_to_date"] else ""), flush=True)
    return run


def reset_dir(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)


def claim_work(work: Path) -> None:
    """Empty --work, which must be new, empty or made by this bench (it is deleted)."""
    if work.exists() and any(work.iterdir()) and not (work / MARK).exists():
        raise SystemExit(f"{work} holds files this bench did not make: pick another --work")
    reset_dir(work)
    work.mkdir(parents=True)
    (work / MARK).write_text("made by bench/throughput/refresh_cost.py; deleted by its next run\n")


# Where a run's time goes, from its log: (phase, the line that ends it).
PHASES = [
    ("spark-submit until the Python driver runs", "starting Spark"),
    ("Spark session", "opening the lake"),
    ("open lake, plan, run record, read inputs", "ingest into"),
    ("ingest", "ingest into*done"),
    ("until normalize starts (lake-dedup set-up)", "normalize+rules*started"),
    ("normalize+rules+langid+dedup", "normalize+rules*done"),
    ("conservation check", "conservation check*done"),
    ("stats, tables", "funnel"),
    ("commit", "committed run"),
    ("exit", None),
]


def phases(run: dict) -> dict[str, float] | None:
    """Seconds of each of PHASES in a run's timeline; None where a marker is missing."""
    out, last = {}, 0.0
    for name, marker in PHASES:
        if marker is None:
            at = run["wall_s"]
        else:
            parts = marker.split("*")
            at = next((t for t, text in run["timeline"] if all(p in text for p in parts)),
                      None)
            if at is None:
                return None
        out[name], last = round(at - last, 1), at
    return out


# -- reading the lake -------------------------------------------------------------------------
def lake_facts(lake: Path, run_id: str, copied_at: list[int]) -> dict | None:
    """Rows of the lake and refresh `run_id`'s duplicates, from the bitext table's Parquet
    files (duckdb); None without duckdb."""
    try:
        import duckdb
    except ImportError:
        return None
    files = f"{lake}/tables/bitext/*/*/*/*.parquet"
    con = duckdb.connect()
    con.execute(f"CREATE VIEW b AS SELECT * FROM read_parquet('{files}', hive_partitioning=true)")
    con.execute("CREATE TEMP TABLE copied (n BIGINT)")
    con.executemany("INSERT INTO copied VALUES (?)", [(n,) for n in copied_at])
    lake_rows, lake_clean = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE outcome = 'clean') FROM b WHERE run_id <> ?",
        [run_id]).fetchone()
    base = con.execute("SELECT min(line) FROM b WHERE run_id = ?", [run_id]).fetchone()[0] or 0
    new = con.execute(
        """SELECT count(*),
                  count(*) FILTER (WHERE outcome = 'clean'),
                  count(*) FILTER (WHERE reject_rule LIKE 'duplicate%' AND committed),
                  count(*) FILTER (WHERE reject_rule LIKE 'duplicate%' AND committed
                                   AND copy),
                  count(*) FILTER (WHERE reject_rule LIKE 'duplicate%' AND NOT committed),
                  count(*) FILTER (WHERE copy AND outcome = 'clean'),
                  count(*) FILTER (WHERE reject_rule = 'near_dup' AND committed),
                  count(*) FILTER (WHERE reject_rule = 'near_dup' AND NOT committed)
           FROM (SELECT *, dup_of IN (SELECT row_id FROM b WHERE run_id <> $1) AS committed,
                        line - $2 IN (SELECT n FROM copied) AS copy
                 FROM b WHERE run_id = $1)""", [run_id, base]).fetchone()
    # The columns the lake-wide dedup reads of each clean lake row (pair, corpus and outcome
    # are directories), as stored: what its cost per lake row is made of.
    clean = f"{lake}/tables/bitext/*/*/outcome=clean/*.parquet"
    column_bytes = dict(con.execute(
        f"""SELECT path_in_schema, sum(total_compressed_size)
            FROM parquet_metadata('{clean}')
            WHERE path_in_schema IN ('dup_key', 'file', 'line', 'row_id')
            GROUP BY 1""").fetchall())
    total_bytes = con.execute(
        f"SELECT sum(total_compressed_size) FROM parquet_metadata('{clean}')").fetchone()[0]
    return {
        "lake_rows": lake_rows, "lake_clean": lake_clean,
        "new_rows": new[0], "new_clean": new[1],
        "dups_against_lake": new[2], "dups_against_lake_of_copied": new[3],
        "dups_within_new": new[4], "copied_kept_clean": new[5],
        "near_dups_against_lake": new[6], "near_dups_within_new": new[7],
        "dedup_column_bytes": column_bytes, "clean_table_bytes": total_bytes,
    }


# -- main -------------------------------------------------------------------------------------
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lake-pairs", type=int, default=1_000_000)
    p.add_argument("--new-pairs", type=int, default=10_000)
    p.add_argument("--lake-files", type=int, default=10)
    p.add_argument("--dup-share", type=float, default=0.05,
                   help="share of the new file's lines copied from the lake")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--work", default="/tmp/refresh-bench")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--reuse", action="store_true",
                   help="start from the lake a previous run with the same sizes left in "
                        "--work (skips building the data and refresh 1)")
    p.add_argument("--no-dedup-off", action="store_true",
                   help="skip the run with refresh.lake_dedup=false")
    p.add_argument("--new-name", default="new.tsv",
                   help="the new file's name among the sources: it sorts before the lake's "
                        "part-*.tsv (its rows take a survivor's place: their files are "
                        "carried); zz-new.tsv sorts after them, as a later crawl's dated name")
    p.add_argument("--near-dup", action="store_true",
                   help="every run with the near_dup stage on (lake-wide in the refreshes)")
    p.add_argument("--out", help="write the results as JSON here")
    args = p.parse_args()
    work = Path(args.work).resolve()
    lake, snapshot = work / "lake", work / "lake-after-refresh1"
    sources, new_file = work / "sources" / CORPUS, work / "incoming/new.tsv"
    marker = work / "built.json"
    sizes = {k: getattr(args, k) for k in ("lake_pairs", "new_pairs", "lake_files",
                                           "dup_share", "seed", "near_dup")}
    stamp = time.strftime("%Y%m%dT%H%M%S")
    results: dict = {"args": vars(args), "cpus": os.cpu_count(),
                     "loadavg_start": os.getloadavg()}

    built = json.loads(marker.read_text()) if marker.exists() else None
    if args.reuse and built and built["sizes"] == sizes and snapshot.is_dir():
        print(f"reusing the lake of {built['refresh1']['log']}", flush=True)
        for old in sources.glob("*.tsv"):  # a new file of an earlier run, by any name
            if not old.name.startswith("part-"):
                old.unlink()
        reset_dir(lake)
        shutil.copytree(snapshot, lake, symlinks=True)
        data, results["refresh1"] = built["data"], built["refresh1"]
        config = write_config(work, args.near_dup)
    else:
        claim_work(work)
        data = build_data(work, args.lake_pairs, args.new_pairs, args.lake_files,
                          args.dup_share, args.seed)
        config = write_config(work, args.near_dup)
        results["refresh1"] = refresh(work, config, "refresh1", f"bench-r1-{stamp}",
                                      args.master)
        shutil.copytree(lake, snapshot, symlinks=True)
        marker.write_text(json.dumps({"sizes": sizes, "data": data,
                                      "refresh1": results["refresh1"]}))
    results["data"] = {k: v for k, v in data.items() if k != "copied_at"}

    # 2. the refresh adding the new file
    shutil.copy(new_file, sources / args.new_name)
    r2_id = f"bench-r2-{stamp}"
    results["refresh2"] = r2 = refresh(work, config, "refresh2", r2_id, args.master)
    facts = lake_facts(lake, r2_id, data["copied_at"])
    results["lake"] = facts
    # 3. nothing new
    results["up_to_date"] = up = refresh(work, config, "refresh3", f"bench-r3-{stamp}",
                                         args.master)
    results["up_to_date_python"] = up_py = refresh(work, config, "refresh3-python",
                                                   f"bench-r3p-{stamp}", None)
    for run in (up, up_py):
        if not run["up_to_date"]:
            print(f"warning: {run['log']} does not say 'up to date'", flush=True)
    # 4. the new file alone, into an empty lake
    alone_lake = work / "filter-lake"
    reset_dir(alone_lake)
    results["filter_alone"] = fa = submit(
        "filter", ["--pair", PAIR, "--corpus", CORPUS, "--input", str(new_file),
                   "--lake", str(alone_lake), "--run-id", f"bench-f-{stamp}",
                   *(["--set", "near_dup.enabled=true"] if args.near_dup else [])],
        work / "filter-alone.log", args.master)
    print(f"filter alone: {fa['wall_s']:.1f} s wall, {fa['cpu_s']:.1f} s CPU", flush=True)
    # 5. refresh 2 again, without the lake-wide dedup
    off = None
    if not args.no_dedup_off:
        reset_dir(lake)
        shutil.copytree(snapshot, lake, symlinks=True)
        (sources / args.new_name).unlink()
        shutil.copy(new_file, sources / args.new_name)
        off = refresh(work, config, "refresh2-no-lake-dedup", f"bench-r2n-{stamp}",
                      args.master, ["--set", "refresh.lake_dedup=false"])
        results["refresh2_no_lake_dedup"] = off
    results["loadavg_end"] = load = os.getloadavg()

    # -- the report
    ratio_wall, ratio_cpu = r2["wall_s"] / fa["wall_s"], r2["cpu_s"] / fa["cpu_s"]
    results["ratio_wall"], results["ratio_cpu"] = ratio_wall, ratio_cpu
    lake_rows = facts["lake_rows"] if facts else None
    print(f"\n{PAIR}, master {args.master}, {os.cpu_count()} CPUs on the machine, load average "
          f"{results['loadavg_start'][0]:.1f} at the start, {load[0]:.1f} at the end "
          f"(shared: the CPU column is the steadier one)")
    print("\n| run | wall s | CPU s |")
    print("|---|---|---|")
    r1 = results["refresh1"]
    print(f"| refresh 1: build the lake ({args.lake_pairs:,} pairs) | {r1['wall_s']:.1f} | "
          f"{r1['cpu_s']:.1f} |")
    print(f"| **refresh 2: + {args.new_pairs:,} pairs** | {r2['wall_s']:.1f} | "
          f"{r2['cpu_s']:.1f} |")
    print(f"| filter of the {args.new_pairs:,} pairs alone (empty lake) | {fa['wall_s']:.1f} | "
          f"{fa['cpu_s']:.1f} |")
    print(f"| **ratio refresh 2 / filter alone (target <= 2)** | **{ratio_wall:.2f}** | "
          f"**{ratio_cpu:.2f}** |")
    if off:
        print(f"| refresh 2 with refresh.lake_dedup=false | {off['wall_s']:.1f} | "
              f"{off['cpu_s']:.1f} |")
        print(f"| lake-wide dedup's cost (refresh 2 - the above) | "
              f"{r2['wall_s'] - off['wall_s']:+.1f} | {r2['cpu_s'] - off['cpu_s']:+.1f} |")
    print(f"| refresh 3: nothing new (up to date) | {up['wall_s']:.1f} | {up['cpu_s']:.1f} |")
    print(f"| the same by `python jobs/refresh.py` (no spark-submit) | {up_py['wall_s']:.1f} | "
          f"{up_py['cpu_s']:.1f} |")

    print(f"\nfunnel of refresh 2: {r2['funnel']}; of the filter alone: {fa['funnel']}")
    if facts:
        print(f"lake before refresh 2: {lake_rows:,} rows in bitext, {facts['lake_clean']:,} "
              f"clean")
        print(f"refresh 2: {facts['new_rows']:,} new rows, {facts['new_clean']:,} clean; "
              f"duplicates of a lake row {facts['dups_against_lake']:,} "
              f"({facts['dups_against_lake_of_copied']:,} of the {data['copied']:,} lines "
              f"copied from the lake, the rest the real data's own repeats; "
              f"{facts['copied_kept_clean']:,} copied lines kept clean), duplicates within "
              f"the new file {facts['dups_within_new']:,}")
        if args.near_dup:
            print(f"refresh 2's near-duplicates: of a lake row "
                  f"{facts['near_dups_against_lake']:,}, within the new file "
                  f"{facts['near_dups_within_new']:,}")
        col = facts["dedup_column_bytes"]
        per_row = sum(col.values()) / max(facts["lake_clean"], 1)
        print(f"lake-wide dedup reads of each clean lake row dup_key, file, line, row_id: "
              f"{per_row:.1f} bytes of Parquet a row "
              f"({', '.join(f'{k} {v / 2**20:.1f} MiB' for k, v in sorted(col.items()))}; "
              f"the clean table is {facts['clean_table_bytes'] / 2**20:.1f} MiB): linear in "
              f"the lake's rows; the text is not read")
        if off:
            extra = r2["cpu_s"] - off["cpu_s"]
            per_m = extra / max(facts["lake_clean"], 1) * 1e6
            print(f"measured: lake-wide dedup {extra:+.1f} CPU s for {facts['lake_clean']:,} "
                  f"clean lake rows, {per_m:+.1f} CPU s per million lake rows (a difference "
                  f"of two runs: a few CPU s either way is noise)")
    runs = {"refresh 2": r2, "filter alone": fa}
    if off:
        runs = {"refresh 2": r2, "refresh 2, lake_dedup off": off, "filter alone": fa}
    table = {name: phases(run) for name, run in runs.items()}
    if all(table.values()):
        print("\nwhere the time went (wall s, from each run's log lines as they came):")
        print("| phase | " + " | ".join(runs) + " |")
        print("|---|" + "---|" * len(runs))
        for phase, _ in PHASES:
            print(f"| {phase} | " + " | ".join(f"{t[phase]:.1f}" for t in table.values()) + " |")
    print("\nrefresh 2, its log lines (s since spark-submit started):")
    for at, text in r2["timeline"]:
        if "\n" not in text:
            print(f"  {at:7.1f}  {text[:110]}")
    print(f"  {r2['wall_s']:7.1f}  (exit)")
    print(f"logs in {work}")
    if args.out:
        write_json(args.out, results, say=True)


if __name__ == "__main__":
    main()

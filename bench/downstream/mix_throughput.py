"""Throughput of the mix job (jobs/mix.py): rows per CPU-second of mixing 1M rows.

    .venv/bin/python -m bench.downstream.mix_throughput --out /tmp/mix-bench.json
    .venv/bin/python -m bench.downstream.mix_throughput --max-rows 20000 --total 100000 \\
        --work /tmp/mb-try

What it measures: `sluice --master local[2] mix --config <bench config>` as a subprocess, the
CPU seconds of its whole process tree (JVM, Python driver, PySpark daemon and workers:
`measure` of bench/throughput/vs_opusfilter.py, with this process a child subreaper) and its
wall time, once for a mixture of --total rows (1,000,000) and once for --scale times it
(2,000,000); the difference gives the marginal rows per CPU-second (what one more row costs,
without the JVM start and the pool's decontamination, which both runs pay alike).

The mixture (written by the bench as <work>/mix-<name>.yaml): three directions into English,
zh-en, ru-en, de-en, temperature 5 over directions, the `<2en> ` target tag on every row and
`<BT> ` on the rows of the reversed WMT system outputs (sources `*-rev`, synthetic: true),
decontamination against every registered test set (13-gram containment 0.5 and exact match),
no curriculum stages. Two sources per direction: the natural-direction corpora, and
the corpus `wmtrev` (see below).

The lake (<work>/lake-<key>, built once and reused while its inputs are the same: the key
hashes the data files' paths, sizes and mtimes, --max-rows, conf/defaults.yaml and the
bench's lake recipe) is made by the real jobs, one `sluice filter` run per pair (a config
listing the pair's corpora, converted to two-column TSV under <work>/tsv first) on real
corpora from ../shared/data/bitext:
  wmt       WMT21-23 system outputs and references of the pair (wmt21-23.<pair>.tsv.gz,
            columns `year testset system seg_id src tgt`: 104,618 zh-en, 56,575 ru-en,
            50,510 de-en rows; sources repeated across systems);
  wmtrev    the reverse direction's system outputs, sides swapped (src: the X side, a system's
            output; tgt: the English source): back-translation-like rows;
  newstest  newstest 2014-2019 of the pair (zh-en: 2017-2019);
  tatoeba   the Tatoeba test sets (eng-zho, eng-rus, deu-eng);
  anki      (zh-en) the Anki/Tatoeba pairs; toy (de-en) opennmt-toy-ende's 10,000 pairs;
  newstestB2020 (zh-en only) the second reference of newstest2020: the same 2,000 Chinese
            sources as newstest2020.
Then `sluice mix --register-eval newstest2020 --pair zh-en --input newstest2020.zh
newstest2020.en`. WMT21-23 share no segment with newstest2020 (checked: 0 exact matches in
199,419 zh-en/en-zh rows), so what decontamination removes is newstestB2020's rows (their
sources are newstest2020's); every pool row's n-grams are still joined against the set.
--max-rows caps each corpus's rows (a quicker build); the mixture then up-samples.

The machine may be shared: the load average is printed; CPU-seconds are the steadier figure.

Measured 2026-11-26 at 143ed13, 2 CPUs, load average 6.2 at the start, 7.4 at the end (other
work running); lake built in 699 s wall, 418 CPU-s (filter: 551,136 input rows, 422,141 clean):

| run | rows mixed | pool rows | wall s | CPU-s | rows per CPU-s | CPU/wall |
|---|---|---|---|---|---|---|
| 1x | 1,000,000 | 422,141 | 537.8 | 376.8 | 2,654 | 70% |
| 2x | 2,000,000 | 422,141 | 735.8 | 391.3 | 5,111 | 53% |

Marginal: 1,000,000 more rows for 14.5 CPU-s (~69,000 rows per CPU-s); the fixed ~362 CPU-s
is mostly decontamination (stage `decontaminate` 467 s of the 1x run's 538 s wall; draw
23.5 s, stages 8.6 s). Per direction (1x): zh-en 355,708 mixed of 189,321 eligible (1,946
newstestB2020 rows removed by newstest2020), ru-en 325,053 of 120,642, de-en 319,239 of
110,232, each within 0.5 of the temperature formula.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import yaml

from bench.kit import BIN, REPO, SHARED, write_json
from bench.throughput.vs_opusfilter import (
    HEARTBEAT,
    SLUICE_LINE,
    STAGE_DONE,
    become_subreaper,
    measure,
)

DATA = SHARED / "bitext"
SLUICE = BIN / "sluice"
DIRECTIONS = ("zh-en", "ru-en", "de-en")
EVAL_NAME = "newstest2020"
MARK = ".mix-throughput-bench"
RECIPE = 1  # bump when the lake's recipe (corpora, conversion, commands) changes
Pair = tuple[str, str]


# -- the corpora ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Corpus:
    """One corpus of a pair: where its rows come from and how they are read (`kind`)."""

    pair: str
    name: str
    kind: str  # wmt (columns 4, 5), wmtrev (columns 5, 4), moses, anki (zh = column 1)
    files: tuple[Path, ...]

    def rows(self) -> Iterator[Pair]:
        if self.kind in ("wmt", "wmtrev"):
            with gzip.open(self.files[0], "rt", encoding="utf-8", newline="\n") as f:
                next(f)  # year testset system seg_id src tgt
                for line in f:
                    cols = line.rstrip("\n").split("\t")
                    if len(cols) == 6:
                        yield (cols[4], cols[5]) if self.kind == "wmt" else (cols[5], cols[4])
        elif self.kind == "anki":
            with open(self.files[0], encoding="utf-8-sig", newline="\n") as f:
                for line in f:
                    cols = line.rstrip("\n").split("\t")
                    if len(cols) >= 2:
                        yield cols[1], cols[0]
        else:  # moses: src file, tgt file
            with (open(self.files[0], encoding="utf-8-sig", newline="\n") as a,
                  open(self.files[1], encoding="utf-8-sig", newline="\n") as b):
                for x, y in zip(a, b, strict=True):
                    yield x.rstrip("\n"), y.rstrip("\n")


def corpora(data: Path) -> list[Corpus]:
    """The lake's corpora, per pair (see the module docstring)."""
    out: list[Corpus] = []
    tatoeba = {"zh": ("eng-zho", "zho"), "ru": ("eng-rus", "rus"), "de": ("deu-eng", "deu")}
    for pair in DIRECTIONS:
        x = pair.split("-")[0]
        wmt = data / "wmt21-23-system-outputs"
        out.append(Corpus(pair, "wmt", "wmt", (wmt / f"wmt21-23.{pair}.tsv.gz",)))
        out.append(Corpus(pair, "wmtrev", "wmtrev", (wmt / f"wmt21-23.en-{x}.tsv.gz",)))
        news = sorted(data.glob(f"newstest/{pair}/newstest201[4-9].{x}"))
        for f in news:
            out.append(Corpus(pair, "newstest", "moses", (f, f.with_suffix(".en"))))
        folder, ext = tatoeba[x]
        t = data / "tatoeba" / folder / "tatoeba-test-v2021-08-07"
        out.append(Corpus(pair, "tatoeba", "moses", (Path(f"{t}.{ext}"), Path(f"{t}.eng"))))
    out.append(Corpus("zh-en", "anki", "anki", (data / "anki-cmn/cmn.txt",)))
    toy = data / "opennmt-toy-ende/data"
    out.append(Corpus("de-en", "toy", "moses", (toy / "tgt-train.txt", toy / "src-train.txt")))
    b2020 = data / "newstest/zh-en/newstestB2020"
    out.append(Corpus("zh-en", "newstestB2020", "moses",
                      (Path(f"{b2020}.zh"), Path(f"{b2020}.en"))))
    return out


def eval_files(data: Path) -> tuple[Path, Path]:
    base = data / "newstest/zh-en" / EVAL_NAME
    return Path(f"{base}.zh"), Path(f"{base}.en")


def lake_key(data: Path, max_rows: int | None) -> str:
    """What the lake depends on: its data files (path, size, mtime), the row cap, the filter's
    defaults and this recipe."""
    files = sorted({f for c in corpora(data) for f in c.files} | set(eval_files(data)))
    facts: dict[str, Any] = {
        "recipe": RECIPE,
        "max_rows": max_rows,
        "files": [(str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files],
        "defaults": hashlib.sha256((REPO / "conf/defaults.yaml").read_bytes()).hexdigest(),
        "corpora": [(c.pair, c.name, c.kind, [str(f) for f in c.files]) for c in corpora(data)],
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:12]


def write_tsvs(tsv_dir: Path, data: Path, max_rows: int | None) -> dict[str, dict[str, int]]:
    """One two-column TSV per (pair, corpus); rows whose sides hold a tab or a line break are
    left out (they would misalign the TSV). Returns rows written per pair and corpus."""
    tsv_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, dict[str, int]] = {}
    handles: dict[tuple[str, str], TextIO] = {}
    with ExitStack() as stack:
        for c in corpora(data):
            key = (c.pair, c.name)
            if key not in handles:
                path = tsv_dir / f"{c.pair}.{c.name}.tsv"
                handles[key] = stack.enter_context(open(path, "w", encoding="utf-8"))
            counts = written.setdefault(c.pair, {})
            for src, tgt in c.rows():
                if max_rows is not None and counts.get(c.name, 0) >= max_rows:
                    break
                if any(ch in s for s in (src, tgt) for ch in "\t\r\n"):
                    continue
                handles[key].write(f"{src}\t{tgt}\n")
                counts[c.name] = counts.get(c.name, 0) + 1
    return written


# -- the lake ---------------------------------------------------------------------------------
def sluice(*args: str) -> list[str]:
    return [str(SLUICE), "--master", "local[2]", *args]


def quiet(run: dict) -> dict:
    """A measured run without its output lines (kept in its log)."""
    return {k: v for k, v in run.items() if k != "lines"}


def build_lake(work: Path, data: Path, max_rows: int | None) -> dict:
    """<work>/lake-<key>, built by the filter job and --register-eval unless already there."""
    key = lake_key(data, max_rows)
    lake = work / f"lake-{key}"
    built = lake / "BUILT.json"
    if built.exists():
        print(f"lake: reusing {lake} (built {json.loads(built.read_text())['built_at']})",
              flush=True)
        return {**json.loads(built.read_text()), "reused": True}
    for old in work.glob("lake-*"):  # earlier builds of this bench, other inputs
        shutil.rmtree(old)
    shutil.rmtree(work / "tsv", ignore_errors=True)
    started = time.monotonic()
    written = write_tsvs(work / "tsv", data, max_rows)
    print(f"lake: TSVs written in {time.monotonic() - started:.0f} s: {json.dumps(written)}",
          flush=True)
    runs: dict[str, dict] = {}
    for pair, counts in written.items():
        config = work / f"filter-{pair}.yaml"
        config.write_text(yaml.safe_dump({
            "extends": str(REPO / "conf/defaults.yaml"),
            "pair": pair,
            "inputs": [{"corpus": name, "paths": [str(work / "tsv" / f"{pair}.{name}.tsv")],
                        "format": "tsv"} for name in counts],
        }, sort_keys=False, allow_unicode=True))
        cmd = sluice("filter", "--config", str(config), "--lake", str(lake),
                     "--run-id", f"filter-{pair}")
        print(f"lake: {' '.join(cmd)} ({sum(counts.values()):,} rows)", flush=True)
        runs[pair] = quiet(measure(cmd, work / f"filter-{pair}.log"))
        print(f"lake: {pair} filtered in {runs[pair]['wall_s']:.0f} s wall, "
              f"{runs[pair]['cpu_s']:.0f} CPU-s", flush=True)
    src, tgt = eval_files(data)
    cmd = sluice("mix", "--register-eval", EVAL_NAME, "--pair", "zh-en", "--input", str(src),
                 str(tgt), "--lake", str(lake), "--run-id", f"eval-{EVAL_NAME}")
    print(f"lake: {' '.join(cmd)}", flush=True)
    runs["register-eval"] = quiet(measure(cmd, work / "register-eval.log"))
    facts = {
        "lake": str(lake),
        "key": key,
        "max_rows_per_corpus": max_rows,
        "input_rows": written,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "build_wall_s": round(time.monotonic() - started, 1),
        "build_cpu_s": round(sum(r["cpu_s"] for r in runs.values()), 1),
        "runs": runs,
    }
    built.write_text(json.dumps(facts, indent=1))
    return {**facts, "reused": False}


# -- the mixture ------------------------------------------------------------------------------
def mix_config(lake: Path, name: str, total: int, temperature: float) -> dict:
    sources = []
    for d in DIRECTIONS:
        sources.append({"name": d, "table": "bitext_clean", "direction": d,
                        "where": "corpus <> 'wmtrev'"})
        sources.append({"name": f"{d}-rev", "table": "bitext_clean", "direction": d,
                        "where": "corpus = 'wmtrev'", "synthetic": True})
    return {
        "extends": str(REPO / "conf/mix-defaults.yaml"),
        "name": name,
        "lake": {"root": str(lake)},
        "total": total,
        "temperature": temperature,
        "temperature_over": "direction",
        "tags": {"target": "<2{tgt}> ", "synthetic": "<BT> "},
        "sources": sources,
        "decontaminate": {"enabled": True, "sets": None, "ngram": 13,
                          "min_containment": 0.5, "ngram_action": "exclude"},
    }


def read_table(lake: Path, table: str, where: tuple[str, str]) -> list[dict]:
    """Rows of one partition (`where`: column, value) as any Parquet reader sees them."""
    column, value = where
    path = lake / "tables" / table / f"{column}={value}"
    rows = ds.dataset(str(path), format="parquet").to_table().to_pylist()
    return [{**r, column: value} for r in rows]


def partition_rows(path: Path) -> int:
    """Rows under a directory of Parquet files, from their footers."""
    return sum(pq.ParquetFile(f).metadata.num_rows for f in path.rglob("*.parquet"))


def expected(eligible: dict[str, int], total: int, temperature: float) -> dict[str, float]:
    """The temperature formula: total x n_d^(1/T) / sum over directions of n^(1/T)."""
    q = {d: n ** (1.0 / temperature) for d, n in eligible.items()}
    return {d: total * v / sum(q.values()) for d, v in q.items()}


def run_mix(work: Path, lake: Path, total: int, temperature: float, label: str) -> dict:
    name = f"bench-{label}"
    run_id = f"mix-{label}-{time.strftime('%Y%m%dT%H%M%S')}"
    config = work / f"mix-{name}.yaml"
    config.write_text(yaml.safe_dump(mix_config(lake, name, total, temperature),
                                     sort_keys=False))
    cmd = sluice("mix", "--config", str(config), "--run-id", run_id)
    print(f"mix {label}: {' '.join(cmd)}", flush=True)
    run = measure(cmd, work / f"mix-{label}.log")
    stages = [(m.group(1), float(m.group(2))) for _, line in run["lines"]
              if (s := SLUICE_LINE.match(line)) and not HEARTBEAT.search(line)
              and (m := STAGE_DONE.match(s.group(1)))]
    stats = read_table(lake, "mixture_stats", ("run_id", run_id))
    directions: dict[str, dict[str, Any]] = {}
    for r in stats:
        d = directions.setdefault(r["direction"], {
            "pool_rows": 0, "decontaminated": 0, "eligible": 0, "mixed": 0, "distinct": 0,
            "sources": {}})
        by_set = dict(r["decontaminated_by"] or [])
        d["pool_rows"] += r["available"]
        d["decontaminated"] += r["decontaminated"]
        d["eligible"] += r["eligible"]
        d["mixed"] += r["sampled"]
        d["distinct"] += r["distinct_rows"]
        d["sources"][r["source"]] = {
            "synthetic": r["synthetic"], "pool_rows": r["available"],
            "decontaminated": r["decontaminated"], "decontaminated_by": by_set,
            "eligible": r["eligible"], "mixed": r["sampled"], "distinct": r["distinct_rows"],
            "epochs": round(r["epochs"], 3)}
    expect = expected({d: v["eligible"] for d, v in directions.items()}, total, temperature)
    for d, v in directions.items():
        v["expected_by_temperature"] = round(expect[d], 1)
        v["share"] = round(v["mixed"] / total, 5)
        v["natural_share"] = round(v["eligible"] / sum(x["eligible"]
                                                       for x in directions.values()), 5)
    mixed = sum(v["mixed"] for v in directions.values())
    written = partition_rows(lake / "tables/mixture" / f"mixture={name}")
    if written != mixed or mixed != total:
        raise SystemExit(f"mix {label}: mixture_stats say {mixed:,} rows, the mixture "
                         f"table holds {written:,}, the config asked {total:,}")
    out = quiet(run)
    out.update({
        "run_id": run_id, "config": str(config), "command": " ".join(cmd), "total": total,
        "rows_mixed": mixed, "pool_rows": sum(v["pool_rows"] for v in directions.values()),
        "decontaminated": sum(v["decontaminated"] for v in directions.values()),
        "rows_per_cpu_s": round(mixed / run["cpu_s"], 1),
        "rows_per_wall_s": round(mixed / run["wall_s"], 1),
        "cpu_per_wall": round(run["cpu_s"] / run["wall_s"], 2),
        "stages": stages, "directions": directions,
    })
    return out


# -- the report -------------------------------------------------------------------------------
def claim_work(work: Path) -> None:
    """--work must be new, empty or made by this bench (its old lakes may be deleted)."""
    if work.exists() and any(work.iterdir()) and not (work / MARK).exists():
        raise SystemExit(f"{work} holds files this bench did not make: pick another --work")
    work.mkdir(parents=True, exist_ok=True)
    (work / MARK).write_text("made by bench/downstream/mix_throughput.py\n")


def table(runs: list[dict]) -> list[str]:
    lines = ["| run | rows mixed | pool rows | wall s | CPU-s | rows per CPU-s | CPU/wall |",
             "|---|---|---|---|---|---|---|"]
    for r in runs:
        lines.append(f"| {r['label']} | {r['rows_mixed']:,} | {r['pool_rows']:,} | "
                     f"{r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['rows_per_cpu_s']:,.0f} | "
                     f"{r['cpu_per_wall']:.0%} |")
    return lines


def direction_lines(run: dict) -> list[str]:
    lines = ["| direction | pool rows | decontaminated | eligible | mixed | temperature "
             "expectation | share (natural) | epochs |", "|---|---|---|---|---|---|---|---|"]
    for d, v in run["directions"].items():
        lines.append(f"| {d} | {v['pool_rows']:,} | {v['decontaminated']:,} | "
                     f"{v['eligible']:,} | {v['mixed']:,} | {v['expected_by_temperature']:,.1f}"
                     f" | {v['share']:.3f} ({v['natural_share']:.3f}) | "
                     f"{v['mixed'] / v['eligible']:.2f} |")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default="/tmp/sluice-mix-bench",
                   help="the lake, TSVs, configs and logs (default: %(default)s)")
    p.add_argument("--data", default=str(DATA), help="../shared/data/bitext")
    p.add_argument("--total", type=int, default=1_000_000, help="rows of the first mixture")
    p.add_argument("--scale", type=int, default=2, help="the second mixture's total: x this")
    p.add_argument("--temperature", type=float, default=5.0)
    p.add_argument("--max-rows", type=int,
                   help="at most this many rows of each corpus in the lake (a quicker build)")
    p.add_argument("--out", help="write the results as JSON here")
    args = p.parse_args()
    work, data = Path(args.work).resolve(), Path(args.data).resolve()
    claim_work(work)
    become_subreaper()
    results: dict[str, Any] = {"args": vars(args), "cpus": os.cpu_count(),
                               "loadavg_start": os.getloadavg()}
    results["lake"] = lake = build_lake(work, data, args.max_rows)
    runs = []
    for k in (1, args.scale):
        run = run_mix(work, Path(lake["lake"]), args.total * k, args.temperature, f"{k}x")
        run["label"] = f"{k}x"
        runs.append(run)
        print(f"mix {k}x: {run['rows_mixed']:,} rows, {run['wall_s']:.1f} s wall, "
              f"{run['cpu_s']:.1f} CPU-s, {run['rows_per_cpu_s']:,.0f} rows per CPU-s",
              flush=True)
    one, big = runs
    results["runs"] = {r["label"]: r for r in runs}
    extra_rows = big["rows_mixed"] - one["rows_mixed"]
    extra_cpu, extra_wall = big["cpu_s"] - one["cpu_s"], big["wall_s"] - one["wall_s"]
    results["marginal"] = {
        "rows": extra_rows, "cpu_s": round(extra_cpu, 2), "wall_s": round(extra_wall, 2),
        "rows_per_cpu_s": round(extra_rows / extra_cpu, 1) if extra_cpu > 0 else None,
        "rows_per_wall_s": round(extra_rows / extra_wall, 1) if extra_wall > 0 else None,
        "fixed_cpu_s": round(one["cpu_s"] - extra_cpu * one["rows_mixed"] / extra_rows, 2),
    }
    results["loadavg_end"] = load = os.getloadavg()

    print(f"\nmix, temperature {args.temperature:g} over {', '.join(DIRECTIONS)}; "
          f"{os.cpu_count()} CPUs, load average {results['loadavg_start'][0]:.1f} at the "
          f"start, {load[0]:.1f} at the end; lake {lake['lake']} "
          f"({'reused' if lake['reused'] else 'built'}: {lake['build_wall_s']:.0f} s wall, "
          f"{lake['build_cpu_s']:.0f} CPU-s)\n")
    print("\n".join(table(runs)))
    m = results["marginal"]
    print(f"\nmarginal ({one['label']} -> {big['label']}): {m['rows']:,} rows in "
          f"{m['cpu_s']:.1f} CPU-s, {m['wall_s']:.1f} s wall: {m['rows_per_cpu_s'] or 0:,.0f} "
          f"rows per CPU-s; fixed cost (JVM, pool, decontamination) ~{m['fixed_cpu_s']:.0f}"
          " CPU-s")
    for run in runs:
        print(f"\n{run['label']} ({run['run_id']}):")
        print("\n".join(direction_lines(run)))
        print("stages: " + ", ".join(f"{s} {t:.1f} s" for s, t in run["stages"]))
        print(f"CPU-s: {run['cpu_s_getrusage']:.1f} reaped (getrusage) + "
              f"{run['cpu_s_autoreaped']:.1f} in {run['autoreaped_processes']} kernel-reaped "
              f"workers (/proc); sampled lower bound {run['cpu_s_sampled_lower_bound']:.1f}; "
              f"peak RSS {run['peak_rss_bytes'] / 2**30:.2f} GiB")
    decont = {s: v["decontaminated_by"] for v in one["directions"].values()
              for s, v in v["sources"].items() if v["decontaminated"]}
    print(f"\ndecontaminated by source and set: {json.dumps(decont)}")
    print(f"logs: {work}/*.log")
    if args.out:
        write_json(args.out, results, say=True)


if __name__ == "__main__":
    main()

"""Precision of in-domain selection (jobs/select_data.py) on real multi-domain pools.

    python -m bench.downstream.select_precision --out /tmp/select-precision.json
    python -m bench.downstream.select_precision --pairs zh-en --targets medical \\
        --pool-per-domain 500

For each pair (zh-en, ru-en) builds a pool from ../shared/data with one share per domain:

    news                newstest 2019-2020 (the pair's own direction)
    medical             TICO-19 (en-zh / en-ru)
    wiki                FLORES-200 devtest (multiway)
    conversation        Tatoeba test (zh: cmn_Hans lines only)
    wmt22-<domain>      WMT22 general test, by its domain label: conversation (en-zh only),
                        ecommerce, social, news; en-zh is read as zh = ref_A, en = src

and, for each target domain, a seed held apart from the pool: its lines never appear in the
pool (no line of either side repeats anywhere, within or across domains). TICO-19 and the
other sets without documents are split by line; the WMT22 sets are split by document (seed
and pool share no document), so the seed is a dev set of the domain, not the pool's
neighbours. A target gives its seed at most half its pairs.

The pool goes into a lake through jobs/filter.py (third TSV column = the domain, kept in
`extra`), then per target one jobs/select_data.py run combines moore_lewis, fasttext_domain,
embedding_knn and kmeans_domains with `--top N`, N = the target's rows in the clean pool.
Reported per method (its own score in the `scores` map) and for the combination (the job's
`selected`): precision at N, the share of target rows among the N best. A random selection's
expected precision is the target's share of the pool. Ties (kmeans_domains scores a whole
cluster alike) count at their expected value: the tied rows at the cut are taken in
proportion. Prints a markdown table; --out writes everything as JSON.
"""

from __future__ import annotations

import argparse
import csv
import random
import subprocess
import time
from collections import Counter, defaultdict
from pathlib import Path

import duckdb

from bench.kit import BIN, REPO, SHARED, spark_env, write_json

BITEXT = SHARED / "bitext"
METHODS = ("moore_lewis", "fasttext_domain", "embedding_knn", "kmeans_domains")
LOWER_IS_BETTER = {"moore_lewis", "lm_fluency"}
SHUFFLE_SEED = 12
LANG3 = {"zh": "zho", "ru": "rus"}
FLORES = {"zh": "zho_Hans", "ru": "rus", "en": "eng"}

Pair = tuple[str, str]  # (source-language side, English side)
Doc = list[Pair]  # the pairs of one document (a one-pair "document" where none is known)


# -- corpora -----------------------------------------------------------------------------
def read_lines(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").removeprefix("\ufeff").split("\n")
    return [line.removesuffix("\r") for line in (lines[:-1] if lines[-1] == "" else lines)]


def aligned(a: Path, b: Path) -> list[Pair]:
    return list(zip(read_lines(a), read_lines(b), strict=True))


def tsv_rows(path: Path) -> list[list[str]]:
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))


def news(x: str) -> list[Doc]:
    base = BITEXT / "newstest" / f"{x}-en"
    return [[p] for year in (2019, 2020)
            for p in aligned(base / f"newstest{year}.{x}", base / f"newstest{year}.en")]


def medical(x: str) -> list[Doc]:
    base = BITEXT / "tico19" / f"en-{x}" / "tico19-test"
    return [[p] for p in aligned(Path(f"{base}.{x}"), Path(f"{base}.en"))]


def wiki(x: str) -> list[Doc]:
    rows = tsv_rows(BITEXT / "multiway_flores200_devtest.tsv")
    col = {name: i for i, name in enumerate(rows[0])}
    return [[(r[col[FLORES[x]]], r[col["eng"]])] for r in rows[1:]]


def conversation(x: str) -> list[Doc]:
    base = BITEXT / "tatoeba" / f"eng-{LANG3[x]}" / "tatoeba-test-v2021-08-07"
    labels = read_lines(Path(f"{base}.{LANG3[x]}.labels"))
    wanted = "cmn_Hans" if x == "zh" else "rus"
    pairs = aligned(Path(f"{base}.{LANG3[x]}"), Path(f"{base}.eng"))
    return [[p] for p, label in zip(pairs, labels, strict=True) if label == wanted]


def wmt22(x: str) -> dict[str, list[Doc]]:
    """WMT22 general test by domain label, as documents. en-zh: src is English, ref_A
    Chinese; ru-en: src Russian, ref_A English."""
    name = "wmt22_domains_en-zh.tsv" if x == "zh" else f"wmt22_domains_{x}-en.tsv"
    rows = tsv_rows(BITEXT / name)
    col = {c: i for i, c in enumerate(rows[0])}
    docs: dict[str, dict[str, list[Pair]]] = defaultdict(dict)
    for r in rows[1:]:
        src, ref = r[col["src"]], r[col["ref_A"]]
        pair = (ref, src) if x == "zh" else (src, ref)
        docs[r[col["domain"]]].setdefault(r[col["doc_id"]], []).append(pair)
    return {f"wmt22-{d}": list(by_doc.values()) for d, by_doc in sorted(docs.items())}


def domains(x: str) -> dict[str, list[Doc]]:
    return {"news": news(x), "medical": medical(x), "wiki": wiki(x),
            "conversation": conversation(x), **wmt22(x)}


# -- seeds and pool ----------------------------------------------------------------------
def usable(pair: Pair) -> bool:
    """Both sides non-blank, one line each however it is split (no tab, no Unicode line
    separator: the seed reader uses str.splitlines)."""
    return all(s.strip() and "\t" not in s and len(s.splitlines()) == 1 for s in pair)


def distinct_docs(docs: list[Doc], seen: set[str], rng: random.Random) -> list[Doc]:
    """Shuffled documents whose pairs are usable and repeat no line seen before (in `seen`,
    which grows)."""
    docs = list(docs)
    rng.shuffle(docs)
    kept = []
    for doc in docs:
        pairs = []
        for pair in doc:
            if usable(pair) and not (pair[0] in seen or pair[1] in seen):
                seen.update(pair)
                pairs.append(pair)
        if pairs:
            kept.append(pairs)
    return kept


def build(x: str, targets: list[str], pool_per_domain: int, seed_lines: int,
          out: Path) -> dict:
    """Write <out>/pool.tsv (src, en, domain) and <out>/seed-<target>.{x,en}; returns facts."""
    corpora = domains(x)
    unknown = [t for t in targets if t not in corpora]
    if unknown:
        raise SystemExit(f"{x}-en: no domain {unknown} (domains: {', '.join(corpora)})")
    rng = random.Random(SHUFFLE_SEED)
    seen: set[str] = set()
    shuffled = {name: distinct_docs(docs, seen, rng) for name, docs in corpora.items()}
    out.mkdir(parents=True, exist_ok=True)
    facts: dict = {"domains": {}}
    pool: list[tuple[str, str, str]] = []
    for name, docs in shuffled.items():
        total = sum(map(len, docs))
        seed: list[Pair] = []
        rest = docs
        if name in targets:
            want = min(seed_lines, total // 2)
            taken = 0
            while rest and taken < want:
                seed += rest[0][: want - taken]
                taken = len(seed)
                rest = rest[1:]
            for side, lang in ((0, x), (1, "en")):
                (out / f"seed-{name}.{lang}").write_text(
                    "".join(p[side] + "\n" for p in seed), encoding="utf-8")
        share = [p for doc in rest for p in doc][:pool_per_domain]
        pool += [(a, b, name) for a, b in share]
        facts["domains"][name] = {"available": total, "seed": len(seed), "pool": len(share)}
    rng.shuffle(pool)
    (out / "pool.tsv").write_text("".join(f"{a}\t{b}\t{d}\n" for a, b, d in pool),
                                  encoding="utf-8")
    facts["pool_rows"] = len(pool)
    return facts


# -- the jobs ----------------------------------------------------------------------------
def submit(job: str, args: list[str], log_path: Path, master: str) -> float:
    env = spark_env()
    cmd = [str(BIN / "spark-submit"), "--master", master, f"jobs/{job}.py", *args]
    started = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        done = subprocess.run(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        tail = log_path.read_text(encoding="utf-8", errors="replace")[-4000:]
        raise SystemExit(f"{job} failed (exit {done.returncode}), log {log_path}:\n{tail}")
    return elapsed


def clean_domains(lake: Path, pair: str) -> dict[int, str]:
    path = lake / f"tables/bitext/pair={pair}/corpus=pool/outcome=clean/*.parquet"
    rows = duckdb.sql(f"SELECT row_id, extra[1] FROM read_parquet('{path}')").fetchall()
    return dict(rows)


def selected_rows(lake: Path, pair: str, run_id: str) -> list[tuple[int, dict, bool]]:
    path = lake / f"tables/selected/key={pair}/run_id={run_id}/*.parquet"
    return duckdb.sql(f"SELECT row_id, scores, selected FROM read_parquet('{path}')").fetchall()


def precision_at(values: list[tuple[float | None, bool]], n: int, lower_better: bool
                 ) -> float:
    """Expected share of target rows among the n best (value, is_target); rows without a
    value come last; rows tied at the cut count in proportion."""
    worst = float("inf")
    keyed = sorted(((worst if v is None else (v if lower_better else -v)), t)
                   for v, t in values)
    cut = keyed[n - 1][0]
    better = [t for k, t in keyed if k < cut]
    tied = [t for k, t in keyed if k == cut]
    return (sum(better) + (n - len(better)) * sum(tied) / len(tied)) / n


def top_domains(values: list[tuple[float | None, str]], n: int, lower_better: bool
                ) -> dict[str, int]:
    worst = float("inf")
    keyed = sorted(((worst if v is None else (v if lower_better else -v)), i, d)
                   for i, (v, d) in enumerate(values))
    return dict(Counter(d for _, _, d in keyed[:n]).most_common())


def evaluate(lake: Path, pair: str, run_id: str, target: str, methods: list[str]) -> dict:
    domain_of = clean_domains(lake, pair)
    rows = selected_rows(lake, pair, run_id)
    if len(rows) != len(domain_of):
        raise SystemExit(f"{run_id}: {len(rows)} selected rows, {len(domain_of)} in the pool")
    n = sum(d == target for d in domain_of.values())
    result: dict = {"n": n, "pool": len(rows), "random": n / len(rows), "methods": {},
                    "top_domains": {}}
    for m in methods:
        low = m in LOWER_IS_BETTER
        values = [(scores.get(m), domain_of[rid]) for rid, scores, _ in rows]
        result["methods"][m] = precision_at([(v, d == target) for v, d in values], n, low)
        result["top_domains"][m] = top_domains(values, n, low)
    chosen = [domain_of[rid] for rid, _, sel in rows if sel]
    assert len(chosen) == n, (len(chosen), n)
    result["methods"]["combined"] = sum(d == target for d in chosen) / n
    result["top_domains"]["combined"] = dict(Counter(chosen).most_common())
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", default="zh-en,ru-en", help="comma-separated, each xx-en")
    p.add_argument("--targets", default="medical,wmt22-ecommerce",
                   help="comma-separated target domains (news, medical, wiki, conversation, "
                   "wmt22-conversation (zh-en only), wmt22-ecommerce, wmt22-social, wmt22-news)")
    p.add_argument("--pool-per-domain", type=int, default=1000)
    p.add_argument("--seed-lines", type=int, default=500,
                   help="held-apart seed pairs per target (at most half the domain's pairs)")
    p.add_argument("--work", default="/tmp/sluice-select-precision",
                   help="data, lakes and job logs (emptied per pair)")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--methods", default=",".join(METHODS),
                   help="comma-separated bitext methods (bert_domain: the BERT classifier)")
    p.add_argument("--out", help="write the results as JSON here")
    args = p.parse_args()
    methods = args.methods.split(",")
    pairs = args.pairs.split(",")
    targets = args.targets.split(",")
    bad = [q for q in pairs if q.count("-") != 1 or not q.endswith("-en")]
    if bad:
        raise SystemExit(f"pairs must be xx-en: {bad}")
    work = Path(args.work)
    results: dict = {"args": vars(args), "runs": []}
    started = time.monotonic()
    for pair in pairs:
        x = pair.split("-")[0]
        data = work / pair
        if data.exists():
            subprocess.run(["rm", "-rf", str(data)], check=True)
        facts = build(x, targets, args.pool_per_domain, args.seed_lines, data / "data")
        print(f"{pair}: pool {facts['pool_rows']:,} pairs; " + ", ".join(
            f"{d} {f['pool']}" + (f" (+{f['seed']} seed)" if f["seed"] else "")
            for d, f in facts["domains"].items()), flush=True)
        lake = data / "lake"
        filter_s = submit("filter", ["--pair", pair, "--corpus", "pool", "--input",
                                     str(data / "data/pool.tsv"), "--lake", str(lake)],
                          data / "filter.log", args.master)
        print(f"{pair}: filter {filter_s:.0f} s", flush=True)
        for target in targets:
            run_id = f"prec-{target}"
            n = sum(d == target for d in clean_domains(lake, pair).values())
            seed = [str(data / f"data/seed-{target}.{lang}") for lang in (x, "en")]
            select_s = submit("select_data", [
                "--pair", pair, "--corpus", "pool", "--seed", *seed,
                *[a for m in methods for a in ("--method", m)], "--top", str(n),
                "--lake", str(lake), "--run-id", run_id,
            ], data / f"select-{target}.log", args.master)
            res = evaluate(lake, pair, run_id, target, methods)
            res |= {"pair": pair, "target": target, "select_s": round(select_s, 1),
                    "filter_s": round(filter_s, 1),
                    "seed": facts["domains"][target]["seed"], "facts": facts}
            results["runs"].append(res)
            print(f"{pair} {target}: N {n}, select {select_s:.0f} s, combined "
                  f"{res['methods']['combined']:.3f}", flush=True)
    results["total_s"] = round(time.monotonic() - started, 1)
    cols = ["random", *methods, "combined"]
    print(f"\n| pair | target | seed | pool | N | {' | '.join(cols)} |")
    print("|---|---|---|---|---|" + "---|" * len(cols))
    for r in results["runs"]:
        cells = [f"{r['random']:.3f}", *(f"{r['methods'][c]:.3f}" for c in cols[1:])]
        print(f"| {r['pair']} | {r['target']} | {r['seed']} | {r['pool']:,} | {r['n']} | "
              + " | ".join(cells) + " |")
    print(f"\nprecision at N (N = the target's rows in the clean pool); total "
          f"{results['total_s']:.0f} s")
    if args.out:
        write_json(args.out, results, say=True)


if __name__ == "__main__":
    main()

"""What the rules and language ID take from valid web-crawled pairs, per language (issue 39).

The human-labelled ParaCrawl pairs (../shared/data/bitext/paracrawl-human-labels/, English with
25 languages; labels V valid, A misaligned, MT machine translation, E translation error, F free
translation, L wrong language, T tokenization) go through the real filter job
(jobs/filter.py `main`, in this process, a lake in a temporary directory), one run per
language with the default config: no pair scorer, so what is rejected is rejected by the
rules, language ID or dedup. Per language: the share of valid (V) pairs each rule rejects,
and for the trade-off the share of misaligned (A) and wrong-language (L) pairs rejected.
Duplicates are counted apart: a repeated valid pair is not lost to the corpus.

    python -m bench.crawl.rule_loss [--release paracrawl-v7-validation] [--langs fr,de,...]
        [--set langid.backend_by_lang.nb=lid176 ...] [--out loss.json]

About 25 filter runs of 1,000 pairs: ~6 minutes on local[2].
"""

from __future__ import annotations

import argparse
import tempfile
from collections import Counter
from pathlib import Path

import pyarrow.dataset as ds

from bench.kit import SHARED, write_json

LABELS = SHARED / "bitext" / "paracrawl-human-labels"
SHOWN = 6  # rules with the largest loss of valid pairs, as columns


def labelled_pairs(path: Path) -> list[tuple[str, str, str]]:
    """(en, xx, label) of a `sorted.en-xx` file (release 3: label in field 8; later: 6)."""
    release3 = "v3" in path.parent.name
    rows = []
    # Split on newlines only: a field may hold U+2028 or a form feed, which splitlines() cuts.
    for line in path.read_text(encoding="utf-8", errors="replace").split("\n"):
        fields = [f.replace("\r", " ") for f in line.split("\t")]
        label = fields[7] if release3 else fields[5] if len(fields) > 5 else ""
        if len(fields) > 5 and fields[2].strip() and fields[3].strip():
            rows.append((fields[2], fields[3], label.strip().upper()))
    return rows


def run_language(work: Path, lang: str, rows: list[tuple[str, str, str]],
                 sets: list[str]) -> list[dict]:
    from jobs.filtering.job import main

    tsv = work / f"en-{lang}.tsv"
    tsv.write_text("".join(f"{a}\t{b}\n" for a, b, _ in rows), encoding="utf-8")
    lake = work / "lake"
    argv = ["--pair", f"en-{lang}", "--corpus", "crawl", "--input", str(tsv), "--lake",
            str(lake), "--run-id", f"crawl-{lang}", *[x for s in sets for x in ("--set", s)]]
    if main(argv) != 0:
        return []  # refused (the error is printed): shown as such in the table
    table = ds.dataset(str(lake / "tables" / "bitext"), format="parquet", partitioning="hive")
    got = table.to_table(filter=ds.field("run_id") == f"crawl-{lang}",
                         columns=["line", "reject_rule"]).to_pylist()
    return [{"label": rows[r["line"] - 1][2], "rule": r["reject_rule"]} for r in got]


def summary(decided: list[dict]) -> dict:
    by_label: dict[str, Counter] = {}
    for row in decided:
        by_label.setdefault(row["label"], Counter())[row["rule"] or "kept"] += 1
    valid = by_label.get("V", Counter())
    n_valid = sum(valid.values())
    loss = {rule: n / n_valid for rule, n in valid.items()
            if rule not in ("kept", "duplicate") and n_valid}
    rejected = {label: 1 - (c["kept"] + c["duplicate"]) / sum(c.values())
                for label, c in by_label.items() if label in ("A", "L")}
    return {"valid": n_valid, "kept": valid["kept"] / n_valid if n_valid else 0.0,
            "duplicate": valid["duplicate"] / n_valid if n_valid else 0.0, "loss": loss,
            "rejected": rejected, "counts": {k: dict(v) for k, v in by_label.items()}}


def table(results: dict[str, dict]) -> str:
    total = Counter()
    for r in results.values():
        for rule, share in r["loss"].items():
            total[rule] += share * r["valid"]
    rules = [rule for rule, _ in total.most_common(SHOWN)]
    head = ["lang", "valid", "kept", *rules, "other", "A rejected", "L rejected"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for lang, r in sorted(results.items()):
        other = sum(s for rule, s in r["loss"].items() if rule not in rules)
        cells = [lang, str(r["valid"]), f"{r['kept']:.1%}",
                 *[f"{r['loss'].get(rule, 0):.1%}" for rule in rules], f"{other:.1%}",
                 *[f"{r['rejected'][x]:.0%}" if x in r["rejected"] else "-" for x in "AL"]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--release", default="paracrawl-v7-validation")
    p.add_argument("--langs", default="", help="comma-separated; default: every file")
    p.add_argument("--out", type=Path)
    p.add_argument("--set", action="append", default=[], help="a filter setting, as the job's")
    args = p.parse_args()
    files = sorted((LABELS / args.release).glob("sorted.en-*"))
    wanted = set(filter(None, args.langs.split(",")))
    results = {}
    with tempfile.TemporaryDirectory(prefix="sluice-crawl-loss-") as tmp:
        for path in files:
            lang = path.name.rsplit("-", 1)[1]
            if wanted and lang not in wanted:
                continue
            decided = run_language(Path(tmp), lang, labelled_pairs(path), args.set)
            if not decided:
                print(f"en-{lang}: refused", flush=True)
                continue
            results[lang] = summary(decided)
            print(f"en-{lang}: {results[lang]['kept']:.1%} of {results[lang]['valid']} valid "
                  "pairs kept", flush=True)
    print(table(results))
    if args.out:
        write_json(args.out, results)


if __name__ == "__main__":
    main()

"""The `mojibake` special pattern (conf/defaults.yaml) on human-labelled crawl pairs and on clean
text of every seed language (issue 39, item 3).

ParaCrawl's wrong-language (L) pairs that the rules keep are often not another language but
UTF-8 read as Latin-1/Windows-1252 (`böngészÅ'`, `rastlÃ n`). This applies the configured
pattern as the `special_chars` rule sees a side, after the side pass's normalization
(udfs/sides.py `normalize_batch`: invisible characters removed, Moses punctuation, spaces
collapsed), and counts:

- per label of releases 6, 6.2 and 7 (`../shared/data/bitext/paracrawl-human-labels`), the
  pairs either side of which matches; per language, the valid (V) and wrong-language (L) ones;
- per clean corpus (newstest, FLORES and NTREX multiway, the Tatoeba Challenge slices of the
  seed languages, tests/data), the lines that match, with the first few shown: each should be
  real mojibake.

    python -m bench.crawl.mojibake [--out result.json] [--cost]

Seconds: Python's `regex` reads the Java pattern alike (\\p{Ll}, classes, look-ahead), no Spark.
`--cost` also times the pattern in Spark (local[2], `rlike` over release 7's sides ten times):
core-µs a side over the other two default patterns, for the shipped form (each branch from its
lead character, behind a look-ahead for one) and for the same pattern written lowercase first.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict

import pyarrow as pa
import regex

from bench.crawl.rule_loss import LABELS, labelled_pairs
from bench.kit import REPO, SHARED, write_json
from jobs.filtering.config import load_config
from udfs.sides import SideOptions, normalize_batch

RELEASES = ("paracrawl-v6-validation", "paracrawl-v6-2-validation", "paracrawl-v7-validation")
SHOWN = 5  # matching clean lines printed per corpus


def default_patterns() -> dict[str, str]:
    """`rules.special_patterns` as a job loads them (conf/defaults.yaml)."""
    return load_config(extra={"pair": "zh-en"}).rules.special_patterns


def pattern() -> regex.Pattern:
    return regex.compile(default_patterns()["mojibake"])


def normalized(texts: list[str], lang: str) -> list[str]:
    return normalize_batch(pa.array(texts, pa.string()), SideOptions(lang, "")).to_pylist()


def labelled(found: regex.Pattern) -> dict:
    out = {}
    for release in RELEASES:
        per_label, matched = Counter(), Counter()
        per_lang: dict[str, Counter] = defaultdict(Counter)
        for path in sorted((LABELS / release).glob("sorted.en-*")):
            lang = path.name.rsplit("-", 1)[1]
            rows = labelled_pairs(path)
            ens = normalized([r[0] for r in rows], "en")
            xxs = normalized([r[1] for r in rows], lang)
            for en, xx, (_, _, label) in zip(ens, xxs, rows, strict=True):
                hit = bool(found.search(en) or found.search(xx))
                per_label[label] += 1
                matched[label] += hit
                if label in ("V", "L"):
                    per_lang[lang][f"{label}_all"] += 1
                    per_lang[lang][f"{label}_matched"] += hit
        out[release] = {
            "by_label": {k: {"pairs": per_label[k], "matched": matched[k],
                             "share": round(matched[k] / per_label[k], 4)}
                         for k in sorted(per_label) if k},
            "by_language": {k: dict(v) for k, v in sorted(per_lang.items())},
        }
    return out


def clean_corpora() -> list[tuple[str, str, list[str]]]:
    """(name, language, lines) of human-written text that should never match."""
    corpora = []
    for path in sorted((SHARED / "mono").glob("newstest_all.*.txt")):
        corpora.append((path.name, path.name.split(".")[1], path.read_text("utf-8").split("\n")))
    for path in sorted((SHARED / "bitext" / "newstest").glob("*/*")):
        corpora.append((f"newstest/{path.parent.name}/{path.name}", path.suffix[1:],
                        path.read_text("utf-8", errors="replace").split("\n")))
    for name in ("multiway_flores200_devtest.tsv", "multiway_ntrex128.tsv"):
        rows = [line.split("\t") for line in (SHARED / "bitext" / name).read_text(
            "utf-8").split("\n")]
        for i, column in enumerate(rows[0]):
            corpora.append((f"{name}:{column}", column[:3], [r[i] for r in rows[1:] if len(r) > i]))
    for path in sorted((SHARED / "bitext" / "tatoeba-challenge").glob("*/*")):
        if path.is_file() and path.stat().st_size < 200_000_000:
            corpora.append((f"tatoeba-challenge/{path.parent.name}/{path.name}", "en",
                            path.read_text("utf-8", errors="replace").split("\n")))
    for path in sorted((REPO / "tests" / "data" / "langs").glob("*.tsv")):
        corpora.append((f"tests/data/langs/{path.name}", path.name[:2],
                        path.read_text("utf-8").split("\n")))
    return corpora


def clean(found: regex.Pattern) -> dict:
    out = {}
    for name, lang, lines in clean_corpora():
        lines = [line for line in lines if line.strip()]
        hits = [line for line, text in zip(lines, normalized(lines, lang), strict=True)
                if found.search(text)]
        out[name] = {"lines": len(lines), "matched": len(hits), "shown": hits[:SHOWN]}
    return out


# The shipped pattern as first written: the same matches, tried from every position's letter.
LOWERCASE_FIRST = ("\\p{Ll}Â(?!\\s)|\\p{Ll}[ÃÄÅÐÑ]|[ÂÃÄÅÐÑ][¡-ª¬-º¼-¿€‚„†‡‰‹›™]|[ÄÅ][‘’“”•–—]|"
                   "â€")


def spark_cost(shipped: str) -> dict[str, float]:
    """Core-µs a side that `shipped` and LOWERCASE_FIRST add to the other default patterns."""
    import time

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false") \
        .getOrCreate()
    others = [v for k, v in default_patterns().items() if k != "mojibake"]
    sides = [text for path in sorted((LABELS / RELEASES[-1]).glob("sorted.en-*"))
             for row in labelled_pairs(path) for text in row[:2]]
    df = spark.createDataFrame([(t,) for t in sides * 10], "t string").repartition(2).cache()
    n = df.count()

    def best_of_five(patterns: list[str]) -> float:
        times = []
        for _ in range(5):
            start = time.time()
            df.select(F.sum(sum(F.col("t").rlike(p).cast("int") for p in patterns))).collect()
            times.append(time.time() - start)
        return min(times)

    base = best_of_five(others)
    cores = 2  # local[2], both busy
    return {name: round((best_of_five([*others, p]) - base) / n * cores * 1e6, 2)
            for name, p in (("shipped", shipped), ("lowercase_first", LOWERCASE_FIRST))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write the figures as JSON")
    parser.add_argument("--cost", action="store_true", help="also time the pattern in Spark")
    args = parser.parse_args()
    found = pattern()
    result = {"pattern": found.pattern, "labelled": labelled(found), "clean": clean(found)}
    if args.cost:
        result["core_us_a_side"] = spark_cost(found.pattern)
        print(f"core-µs a side in Spark: {result['core_us_a_side']}")
    for release, figures in result["labelled"].items():
        shares = ", ".join(f"{k} {v['matched']}/{v['pairs']} ({100 * v['share']:.2f}%)"
                           for k, v in figures["by_label"].items())
        print(f"{release}: {shares}")
    total = sum(c["lines"] for c in result["clean"].values())
    print(f"clean text: {sum(c['matched'] for c in result['clean'].values())} of {total:,} "
          f"lines in {len(result['clean'])} corpora match")
    for name, figures in result["clean"].items():
        for line in figures["shown"]:
            print(f"  {name}: {line[:120]}")
    if args.out:
        write_json(args.out, result)


if __name__ == "__main__":
    main()

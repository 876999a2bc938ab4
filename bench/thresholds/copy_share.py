"""The `copied_text` rule (copy_share, copied_words) on real pairs and half-translated ones.

Issue 14, failure class 5: embedding cosine rewards half-translated pairs (spans left in the
source language score high). Valid pairs: newstest 2017-2020 (de-en, ru-en, zh-en) and
FLORES-200 devtest (the same pairs). Half-translated: the same pairs with the second half of
the non-English side replaced by the second half of the English side (by words; for zh by
characters), as a machine translation that stops translating midway or a crawl page that
mixes languages. Fully untranslated: the English side as the other side with its first word
dropped (a copy `identical` does not catch).

Pairs are split by a hash into a calibration half (even; the defaults were read off it) and
a report half (odd, printed). Run through the rule's own Spark expressions (local[2]).

    python -m bench.thresholds.copy_share [--data ../shared/data] [--out results.json]
"""

from __future__ import annotations

import argparse
import csv
import zlib
from pathlib import Path

from bench.kit import REPO, SHARED, write_json
from jobs.filtering.config import load_config
from udfs.rules import copied_words, copy_share

THRESHOLDS = (0.1, 0.15, 0.2, 0.25, 0.3, 0.4)


def newstest(data: Path, pair: str, other: str) -> list[tuple[str, str]]:
    folder = data / "bitext/newstest" / pair
    pairs = []
    for year in range(2017, 2021):
        a, b = folder / f"newstest{year}.{other}", folder / f"newstest{year}.en"
        if a.exists() and b.exists():
            pairs += zip(a.read_text(encoding="utf-8").splitlines(),
                         b.read_text(encoding="utf-8").splitlines(), strict=True)
    return pairs


def flores(data: Path, column: str) -> list[tuple[str, str]]:
    with (data / "bitext/multiway_flores200_devtest.tsv").open(encoding="utf-8") as f:
        return [(row[column], row["eng"])
                for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]


def half_translated(other: str, english: str, lang: str) -> str:
    words, eng = other.split(), english.split()
    if lang == "zh":
        return other[: len(other) // 2] + " " + " ".join(eng[len(eng) // 2:])
    return " ".join(words[: len(words) // 2] + eng[len(eng) // 2:])


def cases(data: Path) -> list[tuple[str, str, str, str]]:
    """(lang, kind, other side, English side) for every pair in the report or calibration
    half: kind valid, half_translated or untranslated."""
    out = []
    for lang, column in (("de", "deu"), ("ru", "rus"), ("zh", "zho_Hans")):
        pairs = newstest(data, f"{lang}-en", lang) + flores(data, column)
        for other, english in pairs:
            if not other.strip() or len(english.split()) < 4:
                continue
            out.append((lang, "valid", other, english))
            out.append((lang, "half_translated", half_translated(other, english, lang), english))
            out.append((lang, "untranslated", " ".join(english.split()[1:]), english))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED)
    parser.add_argument("--half", choices=("report", "calibration"), default="report")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = SparkSession.builder.master("local[2]").appName("copy_share").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    wanted = 1 if args.half == "report" else 0
    rows = [c for c in cases(args.data)
            if zlib.crc32((c[2] if c[1] == "valid" else c[3]).encode()) % 2 == wanted]
    df = spark.createDataFrame(rows, "lang string, kind string, src string, tgt string")
    src, tgt = F.col("src"), F.col("tgt")

    def nonspace(col):  # the filter counts these in its Arrow pass (udfs/text_stats.py)
        return F.length(F.replace(col, F.lit(" "), F.lit("")))

    share = copy_share(src, tgt, nonspace(src), nonspace(tgt))
    scored = df.select("lang", "kind", share.alias("share"),
                       F.size(copied_words(F.col("src"), F.col("tgt"))).alias("words"))
    settings = load_config(REPO / "conf/zh-en.yaml")
    min_words = settings.rule_settings["min_copied_words"]
    default = settings.rule_settings["max_copy_share"]
    results: dict = {}
    for lang, kind, share, words in scored.collect():
        r = results.setdefault(lang, {}).setdefault(kind, {"n": 0, **{t: 0 for t in THRESHOLDS}})
        r["n"] += 1
        for t in THRESHOLDS:
            r[t] += words >= min_words and share > t
    print(f"{args.half} half: share of pairs rejected by copied_text (min_copied_words "
          f"{min_words}) at each max_copy_share; default {default}")
    print(f"{'pair':6} {'kind':16} {'n':>6} " + " ".join(f"{t:>6}" for t in THRESHOLDS))
    for lang, kinds in results.items():
        for kind, r in kinds.items():
            print(f"{lang + '-en':6} {kind:16} {r['n']:6d} "
                  + " ".join(f"{r[t] / r['n']:6.1%}" for t in THRESHOLDS))
    if args.out:
        write_json(args.out, results)
    spark.stop()


if __name__ == "__main__":
    main()

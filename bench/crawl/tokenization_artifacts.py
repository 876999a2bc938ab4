"""Do tokenization artifacts mark bad crawl pairs? (issue 67, item 4)

For each label of ParaCrawl's human evaluations (25 languages, English first), the share of
sides holding at least one artifact of udfs/tokenization_artifacts.py (`word , word`, `end .`,
glued sentences, Moses' `@-@`, an escape left), and the AUC of minus the pair's artifact
count (both sides) for valid (V) against wrong tokenization (T) and against all the rest. The
patterns are matched in Python's `regex` (the same syntax as the JVM's for these); the text
is the labelled text as is, not normalized (normalization drops a space before `:;?!` and
unescapes entities: the figures for those patterns are an upper bound of what a run sees).

    python -m bench.crawl.tokenization_artifacts [--release paracrawl-v7-validation]
        [--out result.json]

Seconds, no Spark.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict

import regex

from bench.crawl.rule_loss import LABELS, labelled_pairs
from bench.kit import write_json
from jobs.filtering.pair_score_model import auc
from udfs.tokenization_artifacts import ARTIFACTS, PATTERN


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--release", default="paracrawl-v7-validation")
    p.add_argument("--out")
    args = p.parse_args()
    each = [regex.compile(a) for a in ARTIFACTS]
    every = regex.compile(PATTERN)
    sides: dict[str, Counter] = defaultdict(Counter)  # label -> sides, and sides with each
    counts: dict[str, list[int]] = defaultdict(list)  # label -> artifacts per pair
    for path in sorted((LABELS / args.release).glob("sorted.en-*")):
        for en, xx, label in labelled_pairs(path):
            for text in (en, xx):
                sides[label]["sides"] += 1
                for i, pattern in enumerate(each):
                    sides[label][i] += bool(pattern.search(text))
            counts[label].append(len(every.findall(en)) + len(every.findall(xx)))
    shares = {label: {ARTIFACTS[i]: round(100 * c[i] / c["sides"], 2) for i in range(len(each))}
              for label, c in sorted(sides.items())}
    valid = [-n for n in counts["V"]]
    rest = [-n for label, ns in counts.items() if label != "V" for n in ns]
    result = {"release": args.release, "percent_of_sides_with_each": shares,
              "auc_valid_vs_T": round(auc(valid, [-n for n in counts["T"]]), 4),
              "auc_valid_vs_rest": round(auc(valid, rest), 4)}
    for label, share in shares.items():
        print(label, share)
    print({k: v for k, v in result.items() if k.startswith("auc")})
    if args.out:
        write_json(args.out, result, say=True)


if __name__ == "__main__":
    main()

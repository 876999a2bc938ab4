"""How much training the word aligner needs, and per-pair `align_coverage` thresholds, on
trusted human translations from ../shared/data/bitext (WMT newstest, FLORES-200 devtest).

    python -m bench.thresholds.calibrate_align sizes [--pairs zh-en de-en ru-en] \\
        [--sizes 1000 2000 5000 10000]
    python -m bench.thresholds.calibrate_align thresholds [--pairs zh-en de-en ru-en] [--quantile 5]

Data per pair: every newstest file pair of the direction and of the reverse one (swapped),
distinct pairs, shuffled (seed 7); the first 2,000 are held out (never trained on).
Misaligned pairs ("shifted") are real sentences with the next pair's target.

`sizes`: what the filter job does with a run of N pairs, N = each of --sizes: the aligner is
trained on the run itself, 90% real pairs + 10% shifted ones, and scores it (in-sample), and
scores the held-out real/shifted pairs (out-of-sample, as a reference aligner would). Prints
per N the AUC of coverage (real above shifted), the share of real pairs under 0.6, and the
5th percentile of real coverage; the smallest N where these settle is `align.min_train_pairs`.

`thresholds`: a reference aligner trained on all the non-held-out pairs scores the held-out
newstest pairs and FLORES-200 devtest (trusted, unseen); the --quantile percentile of their
coverage is the pair's `align.min_coverage_by_pair`. Prints it with what it and 0.6 reject of
the trusted and of the shifted pairs.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time

import numpy as np

from bench.kit import SHARED
from udfs.align_model import AlignmentModel, score_texts, train_local

BITEXT = SHARED / "bitext"
FLORES_COLUMNS = {"en": "eng", "zh": "zho_Hans", "ru": "rus", "de": "deu"}
HELD_OUT = 2000
SHIFTED_SHARE = 0.1  # of a simulated run's pairs
PUBLISHED = 0.6

Pairs = list[tuple[str, str]]


def newstest(pair: str) -> Pairs:
    """Distinct newstest pairs of `pair` and of its reverse direction (swapped), shuffled."""
    src_lang, tgt_lang = pair.split("-")
    found: set[tuple[str, str]] = set()
    for folder, swap in ((pair, False), (f"{tgt_lang}-{src_lang}", True)):
        a, b = (tgt_lang, src_lang) if swap else (src_lang, tgt_lang)
        for src_file in sorted((BITEXT / "newstest" / folder).glob(f"*.{a}")):
            src = src_file.read_text(encoding="utf-8").splitlines()
            tgt = src_file.with_suffix(f".{b}").read_text(encoding="utf-8").splitlines()
            for s, t in zip(src, tgt, strict=True):
                if s.strip() and t.strip():
                    found.add((t, s) if swap else (s, t))
    pairs = sorted(found)
    random.Random(7).shuffle(pairs)
    return pairs


def flores(pair: str) -> Pairs:
    src_lang, tgt_lang = pair.split("-")
    lines = (BITEXT / "multiway_flores200_devtest.tsv").read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    i, j = header.index(FLORES_COLUMNS[src_lang]), header.index(FLORES_COLUMNS[tgt_lang])
    return [(row.split("\t")[i], row.split("\t")[j]) for row in lines[1:]]


def shifted(pairs: Pairs) -> Pairs:
    """Each source with the next pair's target: real text, wrong partner."""
    return [(s, pairs[(k + 1) % len(pairs)][1]) for k, (s, _) in enumerate(pairs)]


def train(pairs: Pairs, pair: str, out: str) -> AlignmentModel:
    src_lang, tgt_lang = pair.split("-")
    start = time.perf_counter()
    train_local(pairs, src_lang, tgt_lang, out)
    print(f"  trained on {len(pairs):,} pairs in {time.perf_counter() - start:.0f} s", flush=True)
    return AlignmentModel.load(out)


def coverage(model: AlignmentModel, pairs: Pairs, pair: str) -> np.ndarray:
    src_lang, tgt_lang = pair.split("-")
    src, tgt = zip(*pairs, strict=True)
    return score_texts(model, src, tgt, src_lang, tgt_lang)[:, 2]


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(a real pair scores above a misaligned one), ties half."""
    neg = np.sort(neg)
    below = np.searchsorted(neg, pos, "left")
    tied = np.searchsorted(neg, pos, "right") - below
    return float(np.mean(below + tied / 2) / len(neg))


def summary(real: np.ndarray, bad: np.ndarray) -> str:
    return (
        f"AUC {auc(real, bad):.3f}  real<0.6 {np.mean(real < PUBLISHED):6.1%}  "
        f"shifted>=0.6 {np.mean(bad >= PUBLISHED):6.1%}  real p5 {np.percentile(real, 5):.2f}"
    )


def sizes(pair: str, ns: list[int], tmp: str) -> None:
    pool = newstest(pair)
    held, rest = pool[:HELD_OUT], pool[HELD_OUT:]
    held_bad = shifted(held)
    print(f"{pair}: {len(pool):,} distinct newstest pairs, {HELD_OUT:,} held out")
    for n in ns:
        n_bad = int(n * SHIFTED_SHARE)
        if n > len(rest):
            print(f"  N={n:,}: only {len(rest):,} pairs, skipped")
            continue
        real = rest[: n - n_bad]
        bad = shifted(rest[n - n_bad : n])  # misaligned among themselves, none of `real`
        model = train(real + bad, pair, f"{tmp}/{pair}-{n}")
        inside = summary(coverage(model, real, pair), coverage(model, bad, pair))
        outside = summary(coverage(model, held, pair), coverage(model, held_bad, pair))
        print(f"  N={n:>6,} in-sample   {inside}")
        print(f"  N={n:>6,} held-out    {outside}", flush=True)


def thresholds(pair: str, quantile: float, tmp: str) -> None:
    pool = newstest(pair)
    held, rest = pool[:HELD_OUT], pool[HELD_OUT:]
    print(f"{pair}: reference aligner on {len(rest):,} newstest pairs")
    model = train(rest, pair, f"{tmp}/{pair}-ref")
    trusted = np.r_[coverage(model, held, pair), coverage(model, flores(pair), pair)]
    bad = np.r_[coverage(model, shifted(held), pair), coverage(model, shifted(flores(pair)), pair)]
    cut = float(np.floor(np.percentile(trusted, quantile) * 100) / 100)  # down to 0.01
    pct = " ".join(f"p{q}={np.percentile(trusted, q):.3f}" for q in (1, 2, 5, 10, 50))
    print(f"  trusted ({len(trusted):,}: held-out newstest + FLORES devtest) {pct}")
    for name, t in ((f"p{quantile:g} -> {cut:.2f}", cut), ("published", PUBLISHED)):
        print(
            f"  {name:>12}: rejects trusted {np.mean(trusted < t):6.1%}, "
            f"shifted {np.mean(bad < t):6.1%}  (AUC {auc(trusted, bad):.3f})",
            flush=True,
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=["sizes", "thresholds"])
    p.add_argument("--pairs", nargs="+", default=["zh-en", "de-en", "ru-en"])
    p.add_argument("--sizes", nargs="+", type=int, default=[1000, 2000, 5000, 10000])
    p.add_argument("--quantile", type=float, default=5)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="calibrate-align-") as tmp:
        for pair in args.pairs:
            if args.mode == "sizes":
                sizes(pair, args.sizes, tmp)
            else:
                thresholds(pair, args.quantile, tmp)


if __name__ == "__main__":
    main()

"""Calibrate embedding-score thresholds on real translations (../shared/data/bitext).

For each pair, sample 3N lines and build, in one mixed set as the filter job would see it:
  true      the reference translation (line i with line i),
  random    a wrong partner drawn at random (line i with line j, j != i, same sample),
  adjacent  the next line of the same document (line i with i+1): same topic, a hard negative.
Encode both sides with the configured encoder, score cosine and ratio margin (neighbours:
the whole mixed set, as in one Arrow batch), and print percentiles, thresholds that reject at
most 2/5/10% of true pairs (with what they reject of each negative kind), and AUCs.

    python -m bench.thresholds.calibrate_embed [--n 2000] [--model models/use-multilingual-v3]
"""

from __future__ import annotations

import argparse
import csv
import time

import numpy as np
import pandas as pd

from bench.kit import SHARED
from udfs.embed import EncoderSpec, cosine_and_margin, encode

BITEXT = SHARED / "bitext"
NEWSTEST_YEARS = (2017, 2018, 2019, 2020)
PERCENTILES = (1, 5, 10, 25, 50, 75, 90, 95, 99)
TRUE_REJECT = (0.02, 0.05, 0.10)


def newstest(pair: str) -> pd.DataFrame:
    """src, tgt, doc (file) in file order for newstest 2017-2020 of `pair` (e.g. zh-en)."""
    src_lang, tgt_lang = pair.split("-")
    frames = []
    for year in NEWSTEST_YEARS:
        base = BITEXT / "newstest" / pair / f"newstest{year}"
        src = base.with_suffix(f".{src_lang}").read_text(encoding="utf-8").splitlines()
        tgt = base.with_suffix(f".{tgt_lang}").read_text(encoding="utf-8").splitlines()
        frames.append(pd.DataFrame({"src": src, "tgt": tgt, "doc": f"newstest{year}"}))
    return pd.concat(frames, ignore_index=True)


def multiway_ru_zh() -> pd.DataFrame:
    """ru-zh from the FLORES-200 devtest and NTREX-128 multiway files, in file order."""
    frames = []
    for name, zh_col in (
        ("multiway_flores200_devtest.tsv", "zho_Hans"),
        ("multiway_ntrex128.tsv", "zho_Hans"),
    ):
        table = pd.read_csv(
            BITEXT / name, sep="\t", quoting=csv.QUOTE_NONE, keep_default_na=False, dtype=str
        )
        frames.append(pd.DataFrame({"src": table["rus"], "tgt": table[zh_col], "doc": name}))
    return pd.concat(frames, ignore_index=True)


def build_sample(pairs: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """n true, n random-partner and n next-line pairs from distinct source lines."""
    has_next = pairs["doc"].eq(pairs["doc"].shift(-1)).to_numpy()
    candidates = np.flatnonzero(has_next)
    n = min(n, len(candidates) // 3)
    rng = np.random.default_rng(seed)
    picked = rng.choice(candidates, size=3 * n, replace=False)
    true_i, rand_i, adj_i = picked[:n], picked[n : 2 * n], picked[2 * n :]
    partner = rand_i[(np.arange(n) + 1 + rng.integers(0, n - 1)) % n]  # never itself
    src, tgt = pairs["src"].to_numpy(), pairs["tgt"].to_numpy()
    return pd.DataFrame(
        {
            "kind": ["true"] * n + ["random"] * n + ["adjacent"] * n,
            "src": np.concatenate([src[true_i], src[rand_i], src[adj_i]]),
            "tgt": np.concatenate([tgt[true_i], tgt[partner], tgt[adj_i + 1]]),
        }
    )


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """Mann-Whitney AUC: P(score of a true pair > score of a negative), ties half."""
    ranks = pd.Series(np.concatenate([pos, neg])).rank().to_numpy()
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def report(name: str, sample: pd.DataFrame) -> None:
    print(f"\n== {name}: {(sample.kind == 'true').sum()} pairs per kind")
    for score in ("cosine", "margin"):
        print(f"{score:>8} percentiles " + " ".join(f"{f'p{p}':>6}" for p in PERCENTILES))
        for kind, rows in sample.groupby("kind", sort=False):
            values = np.percentile(rows[score], PERCENTILES)
            print(f"{kind:>20} " + " ".join(f"{v:6.3f}" for v in values))
    true = sample[sample.kind == "true"]
    for score in ("cosine", "margin"):
        for share in TRUE_REJECT:
            threshold = float(np.quantile(true[score], share))
            rejected = {
                kind: float((rows[score] < threshold).mean())
                for kind, rows in sample.groupby("kind", sort=False)
            }
            print(
                f"{score} >= {threshold:.3f} rejects "
                + ", ".join(f"{k} {v:.1%}" for k, v in rejected.items())
            )
    for neg in ("random", "adjacent"):
        negatives = sample[sample.kind == neg]
        print(
            f"AUC true vs {neg}: cosine {auc(true.cosine, negatives.cosine):.4f}, "
            f"margin {auc(true.margin, negatives.margin):.4f}"
        )


def clean_batch(sample: pd.DataFrame, src: np.ndarray, tgt: np.ndarray, k: int) -> None:
    """Margins of the true pairs when they are the whole batch (a clean corpus): the margin
    depends on the neighbourhood, so a threshold must hold for both compositions."""
    true = (sample.kind == "true").to_numpy()
    _, margin = cosine_and_margin(src[true], tgt[true], k)
    values = np.percentile(margin, (2, 5, 10, 50))
    print(
        "true pairs alone in the batch: margin p2/p5/p10/p50 "
        + " ".join(f"{v:.3f}" for v in values)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="pairs per kind and language pair")
    parser.add_argument("--backend", default="use")
    parser.add_argument("--model", default="models/use-multilingual-v3")
    parser.add_argument("--k", type=int, default=4, help="margin neighbours")
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()
    spec = EncoderSpec(args.backend, args.model)
    print(f"encoder {args.backend} {args.model}, margin k={args.k}")
    sets = {
        "zh-en newstest2017-2020": lambda: newstest("zh-en"),
        "ru-en newstest2017-2020": lambda: newstest("ru-en"),
        "ru-zh FLORES-200 devtest + NTREX-128": multiway_ru_zh,
    }
    for name, load in sets.items():
        sample = build_sample(load(), args.n, args.seed)
        start = time.perf_counter()
        src, tgt = encode(spec, list(sample.src)), encode(spec, list(sample.tgt))
        seconds = time.perf_counter() - start
        sample["cosine"], sample["margin"] = cosine_and_margin(src, tgt, args.k)
        report(name, sample)
        clean_batch(sample, src, tgt, args.k)
        print(f"encoded {2 * len(sample)} sentences in {seconds:.1f} s")


if __name__ == "__main__":
    main()

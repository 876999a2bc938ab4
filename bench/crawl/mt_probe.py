"""Can surface features separate machine-translated crawl pairs from valid ones? (issue 39, 4)

Machine translation (MT) is a quarter of ParaCrawl's labelled pairs (releases 6.2 and 7: 5,460
and 6,566 of ~25,000 each), and every score sluice has ranks it like a valid pair (AUC valid
vs MT ~0.52): an MT'd web page is aligned, in the right language and close in meaning, so the
cosine and the rules see nothing wrong. This bench tries the translationese cues
a pair carries on its face (`translationese`: punctuation carried over unchanged, words left
untranslated, a length ratio far from its language's usual one, the target's type-token ratio,
the sentence's length) and the names a translation keeps (`capitals_gap`, a pair_score feature
since this probe found it), and asks, leaving one language out as bench/crawl/pair_score.py
does (trained on release 6.2 of the other 24, judged on release 7 of the one left out):

- how well the cues alone rank valid pairs above MT ones;
- whether they help the pair_score: its features before capitals_gap, with it (as shipped),
  and with the cues too, the same learner for each (logistic regression), valid vs rest, vs
  misaligned (A) and vs MT, over the pairs the rules keep;
- the same for the English side's fluency (`english_fluency`, shipped since this probe
  found it: the English side's log10 per token under the LM `make setup` trains from
  conf/lm/en-open.txt.gz): the shipped features without it, and with it under an LM of
  other English (`--english-text FILE`, plain or .gz: e.g. newstest 2008-2023's English,
  ../shared/data/mono/newstest_all.en.txt) in its place. An MT'd page is often English
  turned into the other language, and sometimes the other way.

It reads the features bench/crawl/pair_score.py keeps in --work (computed there once: ~6
minutes with USE on 2 cores, ~75 with e5-small); then it takes a minute.

    python -m bench.crawl.mt_probe [--encoder use-multilingual|e5-small] [--work DIR]
        [--english-text FILE] [--out result.json]
"""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path
from typing import Any

from bench.crawl.pair_score import (
    SHIPPED_FEATURES,
    TEST_RELEASE,
    TRAIN_RELEASE,
    all_langs,
    cached_features,
)
from bench.kit import write_json

PUNCT = re.compile(r"[.,;:!?()\"'«»“”„\-–—/%]")
WORD = re.compile(r"\w+")
# Without `log_src_chars`: whether a score may prefer short sentences is a separate question
# (it would tilt a corpus towards them), so the cues are measured with and without it.
CUES = ("same_punctuation", "comma_gap", "untranslated_share", "char_ratio_off",
        "word_ratio_off", "tgt_type_token_ratio", "log_src_chars")
RAW = ("same_punctuation", "comma_gap", "untranslated_share", "char_ratio", "word_ratio",
       "tgt_type_token_ratio", "log_src_chars")


def translationese(src: str, tgt: str) -> list[float]:
    """The RAW cues of a pair."""
    src_words, tgt_words = WORD.findall(src), WORD.findall(tgt)
    src_vocab = {w.lower() for w in src_words if not w.isdigit() and len(w) > 2}
    tgt_vocab = {w.lower() for w in tgt_words if not w.isdigit() and len(w) > 2}
    return [
        float(PUNCT.findall(src) == PUNCT.findall(tgt)),
        abs(src.count(",") - tgt.count(",")),
        len(src_vocab & tgt_vocab) / max(1, len(tgt_vocab)),
        math.log((len(tgt) + 1) / (len(src) + 1)),
        math.log((len(tgt_words) + 1) / (len(src_words) + 1)),
        len(set(tgt_words)) / max(1, len(tgt_words)),
        math.log(len(src) + 1),
    ]


def with_cues(df: Any) -> Any:
    """`df` (one release's features, with src and tgt) plus the CUES columns; the two ratio
    gaps are taken from each language's own median, as a run would from its data."""
    import numpy as np

    raw = np.array([translationese(s, t) for s, t in zip(df.src, df.tgt, strict=True)])
    out = df.copy()
    for i, name in enumerate(RAW):
        out[name] = raw[:, i]
    for ratio in ("char_ratio", "word_ratio"):
        median = out.groupby("lang")[ratio].transform("median")
        out[f"{ratio}_off"] = (out[ratio] - median).abs()
    return out


def with_text_fluency(df: Any, text: Path, work: Path) -> Any:
    """`df` plus `text_fluency`: the English side's log10 per token (as the filter's
    `english_lm`) under a 5-gram LM trained on `text` (kept in `work`, trained again when
    `text` changes)."""
    import gzip

    from udfs.ngram import lm_tokens, load_lm, train_lm
    from udfs.side_lm import logprob_per_token

    stat = text.stat()
    model = work / f"english-{stat.st_size}-{stat.st_mtime_ns}.5.klm"
    if not model.exists():
        opener = gzip.open if text.suffix == ".gz" else open
        with opener(text, "rt", encoding="utf-8") as lines:
            train_lm((lm_tokens(line, "en") for line in lines), 5, str(model))
    lm = load_lm(str(model))
    out = df.copy()
    out["text_fluency"] = [logprob_per_token(lm, s, "en") for s in df.src]
    return out


def fitted(train: Any, names: list[str], bad: tuple[str, ...] | None) -> Any:
    """Logistic regression of valid (1) against `bad` labels (None: every other label) on
    standardized features, missing values at the training mean."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rows = train if bad is None else train[train.label.isin(("V", *bad))]
    x = rows[names].to_numpy(dtype=float)
    means = np.nanmean(x, axis=0)
    model = make_pipeline(StandardScaler(), LogisticRegression(C=0.1, max_iter=5000,
                                                               class_weight="balanced"))
    model.fit(np.where(np.isnan(x), means, x), (rows.label == "V").to_numpy())
    return lambda df: model.decision_function(
        np.where(np.isnan(df[names].to_numpy(dtype=float)), means,
                 df[names].to_numpy(dtype=float)))


def aucs(score: Any, label: Any) -> dict[str, float | None]:
    from jobs.filtering.pair_score_model import auc

    out: dict[str, float | None] = {}
    for against, bad in {"rest": label != "V", "A": label == "A", "MT": label == "MT"}.items():
        pos, neg = score[label == "V"], score[bad]
        out[against] = round(auc(list(pos), list(neg)), 4) if len(pos) and len(neg) else None
    return out


def probe(train: Any, test: Any, langs: list[str]) -> dict[str, Any]:
    """Per held-out language: AUCs of the cues alone (trained valid vs MT), the shipped
    features, and both together (trained valid vs rest), over the pairs the rules keep."""
    shipped = list(SHIPPED_FEATURES)
    without_fluency = [n for n in shipped if n != "english_fluency"]
    before = [n for n in without_fluency if n != "capitals_gap"]
    cues = [c for c in CUES if c != "log_src_chars"]
    variants = {
        "cues_vs_MT": (cues, ("MT",)),
        "cues_and_length_vs_MT": (list(CUES), ("MT",)),
        "capitals_gap_vs_MT": (["capitals_gap"], ("MT",)),
        "before_capitals_gap": (before, None),
        "without_english_fluency": (without_fluency, None),
        "english_fluency_vs_MT": (["english_fluency"], ("MT",)),
        "shipped": (shipped, None),
        "shipped_and_cues": (shipped + cues, None),
        "shipped_cues_and_length": (shipped + list(CUES), None),
    }
    if "text_fluency" in train:  # --english-text: fluency under that text's LM instead
        variants |= {"text_fluency_vs_MT": (["text_fluency"], ("MT",)),
                     "shipped_with_text_fluency": (without_fluency + ["text_fluency"], None)}
    results: dict[str, Any] = {}
    for lang in langs:
        rows, held = train[(train.lang != lang) & train.alive], test[(test.lang == lang)
                                                                    & test.alive]
        label = held.label.to_numpy()
        results[lang] = {name: aucs(fitted(rows, names, bad)(held), label)
                         for name, (names, bad) in variants.items()}
        r = results[lang]
        print(f"en-{lang}: V vs MT, cues alone {r['cues_vs_MT']['MT']}; V vs rest, shipped "
              f"{r['shipped']['rest']} -> with cues {r['shipped_and_cues']['rest']}", flush=True)
    return results


def table(results: dict[str, Any]) -> str:
    import numpy as np

    variants = list(next(iter(results.values())))
    lines = ["| variant | V vs rest | V vs A | V vs MT | languages better than before "
             "capitals_gap (V vs rest) |", "|---|---|---|---|---|"]
    for v in variants:
        mean = {k: np.mean([r[v][k] for r in results.values() if r[v][k] is not None])
                for k in ("rest", "A", "MT")}
        better = sum(r[v]["rest"] > r["before_capitals_gap"]["rest"]
                     for r in results.values())
        lines.append(f"| {v} | {mean['rest']:.3f} | {mean['A']:.3f} | {mean['MT']:.3f} | "
                     f"{better} of {len(results)} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--encoder", default="use-multilingual")
    p.add_argument("--work", type=Path, default=Path("/tmp/sluice-crawl-pair-score"))
    p.add_argument("--english-text", type=Path,
                   help="other English, one sentence a line (.gz too), for an LM in place "
                        "of the shipped one")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    features = cached_features(args.work, all_langs(), args.encoder)
    data = {release: with_cues(df) for release, df in features.items()}
    if args.english_text:
        data = {release: with_text_fluency(df, args.english_text, args.work)
                for release, df in data.items()}
    results = probe(data[TRAIN_RELEASE], data[TEST_RELEASE], all_langs())
    print(table(results))
    if args.out:
        write_json(args.out, results)


if __name__ == "__main__":
    main()

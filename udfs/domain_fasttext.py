"""fastText domain classifier (HW-TSC WMT news recipe): trained on the driver with the seed's
lines as `__label__in` and a pool sample as `__label__out`; a row's score is P(in-domain).

A row's features are its sides' LM tokens (udfs/ngram.lm_tokens: words, or characters for
Chinese), the sides joined by ` ||| `, so one classifier sees a pair whole. Cross-fitted like
udfs/domain_lm.py: one classifier per fold of the pool, its negatives drawn from that fold; a
row is scored by the other fold's classifier, which never saw it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from functools import cache

import fasttext
import pandas as pd

from udfs.ngram import lm_tokens
from udfs.paths import on_this_worker

IN, OUT = "__label__in", "__label__out"
SIDE_JOIN = " ||| "


def features(texts: Sequence[str | None], langs: Sequence[str]) -> str:
    """One line of classifier input for a row (empty when no side has a token)."""
    parts = [lm_tokens(t or "", lang) for t, lang in zip(texts, langs, strict=True)]
    return SIDE_JOIN.join(parts) if any(parts) else ""


# Trained in a child process: in one process, a second training with the same lines and seed
# gave another model (fastText keeps state between trainings: in the suite, P(in) 0.976 vs
# 0.990 for the same line), and after a few trainings it stopped with "Encountered NaN"
# every time; a fresh process gave the same model bytes 6 of 6 times.
_TRAIN = """
import json, sys, fasttext
fasttext.FastText.eprint = lambda *args, **kwargs: None
data, out, settings = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
fasttext.train_supervised(input=data, thread=1, verbose=0, **settings).save_model(out)
"""


def train_classifier(positives: list[str], negatives: list[str], out_path: str,
                     settings: dict) -> str:
    """Train on feature lines (from `features`) and save the model (.bin) at `out_path`.
    One thread in a fresh process: the same lines and seed give the same model."""
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "train.txt")
        with open(data, "w", encoding="utf-8") as fh:
            for label, lines in ((IN, positives), (OUT, negatives)):
                fh.writelines(f"{label} {line}\n" for line in lines if line)
        done = subprocess.run([sys.executable, "-c", _TRAIN, data, out_path,
                               json.dumps(settings)], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"fastText training failed: {done.stderr.strip()[-2000:]}")
    return out_path


@cache
def load_classifier(path: str) -> fasttext.FastText._FastText:
    fasttext.FastText.eprint = lambda *args, **kwargs: None
    return fasttext.load_model(path)


def p_in_domain(model: fasttext.FastText._FastText, lines: list[str]) -> list[float]:
    labels, probs = model.predict(lines, k=2)
    return [
        float(min(dict(zip(lab, pr, strict=True)).get(IN, 0.0), 1.0))
        for lab, pr in zip(labels, probs, strict=True)
    ]


def classifier_scorer(model_paths: tuple[str, ...], sides: tuple[str, ...],
                      langs: tuple[str, ...]
                      ) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """The mapInPandas function: (row_id, fold, src[, tgt]) in, (row_id, score, reason) out.
    `model_paths[f]` scores the rows of fold 1 - f."""

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        models = [load_classifier(on_this_worker(p)) for p in model_paths]
        for pdf in batches:
            lines = [features(texts, langs)
                     for texts in zip(*(pdf[s].tolist() for s in sides), strict=True)]
            folds = pdf["fold"].tolist()
            scores: list[float | None] = [None] * len(lines)
            for fold in (0, 1):
                live = [i for i, line in enumerate(lines) if line and folds[i] == fold]
                if not live:
                    continue
                model = models[(1 - fold) % len(models)]
                for i, p in zip(live, p_in_domain(model, [lines[i] for i in live]),
                                strict=True):
                    scores[i] = p
            yield pd.DataFrame({
                "row_id": pdf["row_id"],
                "score": scores,
                "reason": [None if line else "no_tokens" for line in lines],
            })

    return run

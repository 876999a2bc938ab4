"""Language-model scores of pool rows, on the executors: Moore-Lewis cross-entropy difference
and LM fluency (udfs/ngram.py trains and loads the KenLM models; they load once per worker).

Moore-Lewis (Moore & Lewis 2010; bilingual: Axelrod et al. 2011, DiDi WMT20): for each side,
H_in(s) - H_gen(s), the per-token cross-entropies (bits) of the side under an LM of the
in-domain seed and under one of a random pool sample; the row's score is the sum over its
sides. Lower is more in-domain.

Fluency (cc_net, Wenzek et al. 2020): the perplexity 2^H(s) of the text under a general LM.
Lower is more fluent.

Cross-fitting: a general LM trained on pool rows would know those rows, and score them as
more general than their unseen neighbours (on a 600-row pool that alone moved a fifth of the
medical rows out of the top). So the pool is split in two folds by a hash of row_id, a
general model is trained on a sample of each, and a row is scored by the other fold's model.

A row whose side has no token (e.g. only spaces) cannot be scored: its score is null and its
reason says which side.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from udfs.ngram import cross_entropy, lm_tokens, load_lm
from udfs.paths import on_this_worker

if TYPE_CHECKING:
    import kenlm

SCORE_SCHEMA = "row_id long, score double, reason string"


@dataclass(frozen=True)
class LmSpec:
    """The pool's sides (`src`, then `tgt` for pairs), their languages, and model paths as
    executors see them: `general[fold][side]`, and for Moore-Lewis `in_domain[side]` (None:
    fluency). A row of fold f is scored with general[1 - f] (one model: used for both)."""

    sides: tuple[str, ...]
    langs: tuple[str, ...]
    general: tuple[tuple[str, ...], ...]
    in_domain: tuple[str, ...] | None = None


def row_score(spec: LmSpec, models: Models, texts: tuple[str | None, ...], fold: int
              ) -> tuple[float | None, str | None]:
    """The row's score and, when it has none, why. `models`: `load_models(spec)`."""
    total = 0.0
    general = models.general[(1 - fold) % len(models.general)]
    for i, (side, lang, text) in enumerate(zip(spec.sides, spec.langs, texts, strict=True)):
        tokens = lm_tokens(text or "", lang)
        if not tokens:
            return None, f"empty_{side}"
        h_gen = cross_entropy(general[i], tokens)
        if models.in_domain is None:
            total += 2.0**h_gen
        else:
            total += cross_entropy(models.in_domain[i], tokens) - h_gen
    if math.isnan(total):
        return None, "not_scorable"
    return total, None


@dataclass(frozen=True)
class Models:
    general: tuple[tuple[kenlm.Model, ...], ...]
    in_domain: tuple[kenlm.Model, ...] | None


def load_models(spec: LmSpec) -> Models:
    """The spec's models, found on this worker and loaded (once per worker: udfs/ngram)."""
    general = tuple(tuple(load_lm(on_this_worker(p)) for p in fold) for fold in spec.general)
    in_domain = (None if spec.in_domain is None
                 else tuple(load_lm(on_this_worker(p)) for p in spec.in_domain))
    return Models(general, in_domain)


def lm_scorer(spec: LmSpec) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """The mapInPandas function: (row_id, fold, src[, tgt]) in, (row_id, score, reason) out."""

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        models = load_models(spec)  # resolved once per task, not per row
        for pdf in batches:
            columns = [pdf[side].tolist() for side in spec.sides]
            rows = zip(pdf["fold"].tolist(), *columns, strict=True)
            scored = [row_score(spec, models, texts, fold) for fold, *texts in rows]
            yield pd.DataFrame(
                {
                    "row_id": pdf["row_id"],
                    "score": [s for s, _ in scored],
                    "reason": [r for _, r in scored],
                }
            )

    return run

"""An n-gram LM's score of each side of a pair: the mean log10 probability per token (</s>
counted) under a KenLM model of the side's language, as DiDi WMT20 filters bitext by
"sentences whose n-gram scores from language models are low". Higher is more fluent; a side
the LM has never seen the like of (another language, markup, a word list) scores low.

One `mapInPandas` pass over the alive rows (udfs/scoring.py); each model is loaded once per
Python worker (udfs/ngram.py `load_lm`), never per batch. Tokens as the LM was trained on them
(udfs/ngram.py `lm_tokens`: characters for zh/ja/th, lowercased words elsewhere)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql.types import DoubleType, StructField, StructType

from udfs.ngram import LOG2_10, cross_entropy, lm_tokens, load_lm
from udfs.paths import on_this_worker
from udfs.scoring import score_where

SIDE_COLUMNS = {"src": "lm_src", "tgt": "lm_tgt"}


def logprob_per_token(model: object, text: str | None, lang: str) -> float | None:
    """Mean log10 probability per token of `text`; None for no text."""
    if text is None:
        return None
    bits = cross_entropy(model, lm_tokens(text, lang))  # type: ignore[arg-type]
    return None if math.isnan(bits) else -bits / LOG2_10


def add_lm_scores(df: DataFrame, models: dict[str, tuple[str, str]], alive: Column) -> DataFrame:
    """`df` plus `lm_src`/`lm_tgt`: `models` maps a side (src, tgt) to its (language, model path
    as the executors see it); a side without a model gets null scores."""
    columns = list(SIDE_COLUMNS.values())

    def score_batches(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        loaded = {side: (lang, load_lm(on_this_worker(path)))
                  for side, (lang, path) in models.items()}
        for batch in batches:
            for side, column in SIDE_COLUMNS.items():
                if side in loaded:
                    lang, model = loaded[side]
                    scores = [logprob_per_token(model, t, lang) for t in batch[side]]
                else:
                    scores = [None] * len(batch)
                batch[column] = pd.array(scores, dtype="Float64")
            yield batch

    def score(live: DataFrame) -> DataFrame:
        fields = [StructField(c, DoubleType(), True) for c in columns]
        return live.mapInPandas(score_batches, StructType([*live.schema.fields, *fields]))

    return score_where(df, alive, columns, score)

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
from pyspark.sql import functions as F
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
    return add_side_scores(df, {column: (side, *models[side]) if side in models else None
                                for side, column in SIDE_COLUMNS.items()}, alive)


def add_side_scores(df: DataFrame, columns: dict[str, tuple[str, str, str] | None],
                    alive: Column) -> DataFrame:
    """`df` plus a double column per entry of `columns`: its name maps to (side, language,
    model path as the executors see it), the side's score under that model; None: null."""

    def score_batches(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        loaded = {column: (side, lang, load_lm(on_this_worker(path)))
                  for column, (side, lang, path) in
                  ((c, spec) for c, spec in columns.items() if spec is not None)}
        for batch in batches:
            for column in columns:
                if column in loaded:
                    side, lang, model = loaded[column]
                    scores = [logprob_per_token(model, t, lang) for t in batch[side]]
                else:
                    scores = [None] * len(batch)
                batch[column] = pd.array(scores, dtype="Float64")
            yield batch

    def score(live: DataFrame) -> DataFrame:
        fields = [StructField(c, DoubleType(), True) for c in columns]
        return live.mapInPandas(score_batches, StructType([*live.schema.fields, *fields]))

    return score_where(df, alive, list(columns), score)


# The English side's score under an English LM: the pair_score's `english_fluency` feature
# (udfs/pair_features.py), which reads the same column whichever side is English.
ENGLISH_LM = "english_lm"


def english_side(sides: list[tuple[str, str]]) -> str | None:
    """The column (src, tgt) of the first English side of `sides` ((column, language) pairs),
    None when no side is English."""
    return next((side for side, lang in sides if lang == "en"), None)


def add_english_lm(df: DataFrame, sides: list[tuple[str, str]], path: str,
                   alive: Column) -> DataFrame:
    """`df` plus `english_lm`: the English side's score under the English LM at `path` (as the
    executors see it); null on every row when no side is English."""
    side = english_side(sides)
    if side is None:
        return df.withColumn(ENGLISH_LM, F.lit(None).cast("double"))
    return add_side_scores(df, {ENGLISH_LM: (side, "en", path)}, alive)

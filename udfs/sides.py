"""One Python pass per side: the work that needs a library (OpenCC, jieba, fastText).

`analyze_texts` is the pure function (testable without Spark); `side_analyzer` wraps it as a
vectorized pandas UDF returning a struct, so both sides of a pair share one Arrow round trip.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
from pyspark.sql import Column
from pyspark.sql.functions import pandas_udf

from udfs.brackets import bracket_profile
from udfs.chinese import fullwidth_to_halfwidth, to_simplified
from udfs.langid import identify_all
from udfs.tokens import tokenize

SIDE_SCHEMA = (
    "text string, n_tokens int, max_token_chars int, lang string, lang_prob float, "
    "lang_probs map<string, float>, brackets array<int>"
)
FULLWIDTH_LANGS = frozenset({"zh", "ja"})


@dataclass(frozen=True)
class SideOptions:
    lang: str
    langid_model: str
    to_simplified: bool = True
    fullwidth_to_halfwidth: bool = True


def normalize_text(text: str, opts: SideOptions) -> str:
    if opts.lang == "zh" and opts.to_simplified:
        text = to_simplified(text)
    if opts.lang in FULLWIDTH_LANGS and opts.fullwidth_to_halfwidth:
        text = fullwidth_to_halfwidth(text)
    return text


def analyze_texts(texts: list[str | None], opts: SideOptions) -> pd.DataFrame:
    """Normalized text, token count, longest token, top language and its probability, every
    likely language's probability, and the bracket/quote profile of each text (None ->
    nulls)."""
    present = [i for i, t in enumerate(texts) if t is not None]
    normalized = [normalize_text(texts[i], opts) for i in present]
    tokens = [tokenize(t, opts.lang) for t in normalized]
    langs, probs, all_probs = (
        identify_all(opts.langid_model, normalized) if normalized else ([], [], [])
    )

    def column(values: list, dtype: str | type) -> pd.Series:
        if len(present) < len(texts):  # put the values back among the nulls
            spread: list = [None] * len(texts)
            for i, value in zip(present, values, strict=True):
                spread[i] = value
            values = spread
        return pd.Series(values, dtype=dtype)

    return pd.DataFrame(
        {
            "text": column(normalized, object),
            "n_tokens": column([len(t) for t in tokens], "Int32"),
            "max_token_chars": column([max(map(len, t), default=0) for t in tokens], "Int32"),
            "lang": column(langs, object),
            "lang_prob": column(probs, "Float32"),
            "lang_probs": column(all_probs, object),
            "brackets": column([bracket_profile(t) for t in normalized], object),
        }
    )


def side_analyzer(opts: SideOptions) -> Callable[[Column], Column]:
    @pandas_udf(SIDE_SCHEMA)
    def analyze(texts: pd.Series) -> pd.DataFrame:
        return analyze_texts(texts.tolist(), opts)

    return analyze

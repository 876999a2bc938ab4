"""One Python pass per side: the normalization every line goes through (Arrow kernels over
the batch: invisible characters, Moses punctuation, whitespace) and the work that needs a
library (OpenCC, jieba or ICU words, language ID).

`analyze_batch` is the pure function (testable without Spark); `side_analyzer` wraps it as an
Arrow UDF returning a struct (Arrow arrays in and out, no pandas), so the side's work shares
one round trip.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql.functions import arrow_udf

from udfs import normalize as N
from udfs.brackets import bracket_profile
from udfs.chinese import fullwidth_to_halfwidth, to_simplified
from udfs.langid_backends import identify_all
from udfs.moses_punct import moses_punct_normalize
from udfs.scripts import cjk, main_script
from udfs.text_stats import STATS_SCHEMA, char_counts
from udfs.tokens import tokenize

SIDE_SCHEMA = (
    "text string, n_tokens int, max_token_chars int, lang string, lang_prob float, "
    f"lang_probs map<string, float>, brackets array<int>, {STATS_SCHEMA}"
)
FULLWIDTH_SCRIPTS = frozenset({"Hani", "Kana", "Hira"})  # full-width forms folded (zh, ja)


@dataclass(frozen=True)
class SideOptions:
    """One side's language, language-ID model and normalization steps (`normalize:`), and
    the language-ID backend that reads it (udfs/langid_backends.py)."""

    lang: str
    langid_model: str
    to_simplified: bool = True
    fullwidth_to_halfwidth: bool = True
    remove_invisible: bool = True
    moses_punct: bool = True
    collapse_whitespace: bool = True
    langid_backend: str = "lid176"


def normalize_batch(texts: pa.Array, opts: SideOptions) -> pa.Array:
    """The steps every line goes through, each one pass of a C++ kernel over the batch (the JVM
    ran them first, as unescaping and tag stripping still do: jobs/filtering/stages.py)."""
    if opts.remove_invisible:
        texts = N.remove_invisible(texts)
    # Moses' punctuation rules are for alphabetic text; Han, kana and Hangul keep CJK forms.
    if opts.moses_punct and not cjk(opts.lang):
        texts = moses_punct_normalize(texts, opts.lang)
    if opts.collapse_whitespace:
        texts = N.collapse_whitespace(texts)
    return texts


def normalize_text(text: str, opts: SideOptions) -> str:
    if opts.lang == "zh" and opts.to_simplified:
        text = to_simplified(text)
    if opts.fullwidth_to_halfwidth and main_script(opts.lang) in FULLWIDTH_SCRIPTS:
        text = fullwidth_to_halfwidth(text)
    return text


def analyze_batch(texts: pa.Array, opts: SideOptions) -> pa.StructArray:
    """Per text (SIDE_SCHEMA): the normalized text (`normalize_batch`, then OpenCC and
    full-width forms), token count, longest token, top language and its probability, every
    likely language's probability, the bracket/quote profile and the character counts
    (udfs/text_stats.py). A null text gets nulls."""
    texts = normalize_batch(texts, opts).to_pylist()
    present = [i for i, t in enumerate(texts) if t is not None]
    normalized = [normalize_text(texts[i], opts) for i in present]
    tokens = [tokenize(t, opts.lang) for t in normalized]
    langs, probs, all_probs = (
        identify_all(opts.langid_backend, opts.langid_model, normalized)
        if normalized else ([], [], [])
    )

    def column(values: list, dtype: pa.DataType) -> pa.Array:
        if len(present) < len(texts):  # put the values back among the nulls
            spread: list = [None] * len(texts)
            for i, value in zip(present, values, strict=True):
                spread[i] = value
            values = spread
        return pa.array(values, dtype)

    text = column(normalized, pa.string())
    fields = {
        "text": text,
        "n_tokens": column([len(t) for t in tokens], pa.int32()),
        "max_token_chars": column([max(map(len, t), default=0) for t in tokens], pa.int32()),
        "lang": column(langs, pa.string()),
        "lang_prob": column(probs, pa.float32()),
        "lang_probs": column([list(p.items()) for p in all_probs],
                             pa.map_(pa.string(), pa.float32())),
        "brackets": column([bracket_profile(t) for t in normalized], pa.list_(pa.int32())),
        **{name: counts.cast(pa.int32()) for name, counts in char_counts(text).items()},
    }
    return pa.StructArray.from_arrays(list(fields.values()), names=list(fields))


def analyze_texts(texts: list[str | None], opts: SideOptions) -> pd.DataFrame:
    """`analyze_batch` of a list, as a DataFrame (maps as dicts): for tests and benchmarks."""
    batch = analyze_batch(pa.array(texts, pa.string()), opts)
    return pa.Table.from_struct_array(batch).to_pandas(maps_as_pydicts="strict")


def side_analyzer(opts: SideOptions) -> Callable[[Column], Column]:
    @arrow_udf(SIDE_SCHEMA)
    def analyze(texts: pa.Array) -> pa.Array:
        return analyze_batch(texts, opts)

    return analyze

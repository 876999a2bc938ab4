"""Sentence-level BLEU and chrF of a synthetic sentence against its reference: the filter of
distilled pairs. Issue 38's reading of DiDi WMT20 ("we filter out data according to the
sentence-level BLEU scores whose English translations lower than 28"): the teacher translates
the bitext's source and the output is scored against the bitext's own target. The paper does
not say what it scores against, and its introduction has distillation use "source-side
monolingual data", which has no reference. sacrebleu computes both, as WMT reports them:
BLEU with its `exp` smoothing and effective order (a short sentence without 4-gram matches
does not score 0), tokenized for the target language (`zh` for Chinese, characters for the
other languages written without spaces, `13a` elsewhere); chrF with its defaults."""

from __future__ import annotations

from functools import cache

import pandas as pd
from pyspark.sql import Column
from pyspark.sql import functions as F

from udfs.scripts import unspaced

REF_SCHEMA = "ref_bleu double, ref_chrf double"


def bleu_tokenizer(lang: str) -> str:
    if lang.split("-")[0] == "zh":
        return "zh"
    return "char" if unspaced(lang.split("-")[0]) else "13a"


@cache
def _metrics(lang: str) -> tuple:
    from sacrebleu.metrics import BLEU, CHRF

    return BLEU(tokenize=bleu_tokenizer(lang), effective_order=True), CHRF()


def sentence_scores(hypothesis: str | None, reference: str | None,
                    lang: str) -> tuple[float | None, float | None]:
    """(BLEU, chrF) of one hypothesis against one reference, 0-100; None without either."""
    if hypothesis is None or reference is None:
        return None, None
    bleu, chrf = _metrics(lang)
    return (bleu.sentence_score(hypothesis, [reference]).score,
            chrf.sentence_score(hypothesis, [reference]).score)


def ref_scores(hypothesis: Column, reference: Column, lang: str) -> Column:
    """A struct column (ref_bleu, ref_chrf) of each row's hypothesis against its reference."""

    @F.pandas_udf(REF_SCHEMA)
    def score(hyps: pd.Series, refs: pd.Series) -> pd.DataFrame:
        rows = [sentence_scores(h, r, lang) for h, r in
                zip(hyps.where(hyps.notna(), None), refs.where(refs.notna(), None), strict=True)]
        return pd.DataFrame(rows, columns=["ref_bleu", "ref_chrf"], dtype="float64")

    return score(hypothesis, reference)

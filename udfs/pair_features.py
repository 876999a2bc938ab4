"""The learned `pair_score`: its features over the stored scores, and the model as one Spark
expression.

The features are Spark Column expressions over the score columns a filter run stores (rule
scores, word alignment, embeddings), so training (jobs/filtering/pair_score_model.py) and scoring
see
the very same numbers. A model is a logistic regression over standardized features,
`pair_score = 1 / (1 + exp(-(b + sum w_i * (x_i - mean_i) / std_i)))`, a missing feature
taking its training mean; or additive (`learner: additive`,
jobs/filtering/pair_score_additive.py), `1 / (1 + exp(-(b + sum f_i(x_i))))` with each f_i a
monotone step function, a missing feature its own step. Applying either is arithmetic and
CASEs on columns: no Python worker, no model file on the executors.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from udfs.rules import Row, expected_lang_prob
from udfs.tokenization_artifacts import tokenization_artifacts


def _abs_log_ratio(a: Column, b: Column) -> Column:
    return F.abs(F.log((a + 1.0) / (b + 1.0)))


def _numbers(text: Column) -> Column:
    return F.array_distinct(F.regexp_extract_all(text, F.lit(r"\d+"), 0))


def number_mismatch(src: Column, tgt: Column) -> Column:
    """1 - Jaccard of the two sides' digit runs; 0 where neither side has one. A document's
    neighbouring sentences share names but seldom every number."""
    both = F.size(F.array_union(_numbers(src), _numbers(tgt)))
    shared = F.size(F.array_intersect(_numbers(src), _numbers(tgt)))
    return F.when(both == 0, F.lit(0.0)).otherwise(1.0 - shared / both)


# A sentence's end: a CJK full stop, or Latin end punctuation before a space or the end.
SENTENCE_END = r"[。！？；]|[.!?;:](?=\s|$)"


def sentence_ends(text: Column) -> Column:
    return F.length(text) - F.length(F.regexp_replace(text, SENTENCE_END, ""))


def capitalised_words(text: Column) -> Column:
    """Words after the first that start with a capital (names, titles, acronyms); null where
    fewer than half the letters are of a cased script (Han, Arabic, Devanagari: no capitals
    to count)."""
    letters = F.length(F.regexp_replace(text, r"\P{L}", ""))
    cased = F.length(F.regexp_replace(text, r"[^\p{Lu}\p{Ll}\p{Lt}]", ""))
    starts = F.size(F.regexp_extract_all(text, F.lit(r"(?U)\b\p{Lu}"), 0))
    first = F.when(text.rlike(r"(?U)^\W*\p{Lu}"), 1).otherwise(0)
    return F.when((letters > 0) & (cased * 2 >= letters), starts - first)


def capitals_gap(src: Column, tgt: Column) -> Column:
    """|a - b| / (1 + max(a, b)) of the two sides' capitalised words: a translation keeps a
    sentence's names; a misaligned or machine-translated pair often does not (issue 39's probe,
    bench/crawl/mt_probe.py). Null where a side has no capitals to count."""
    a, b = capitalised_words(src), capitalised_words(tgt)
    return F.abs(a - b) / (F.greatest(a, b) + 1.0)


# How close to 0 or 1 a probability feature may come before its log-odds (the benches that
# train on these features clip with the same floor).
LOG_ODDS_FLOOR = 1e-4


def log_odds(p: Column, floor: float = LOG_ODDS_FLOOR) -> Column:
    """log(p / (1 - p)), p kept within [floor, 1 - floor]: a probability a linear model can
    weigh."""
    clipped = F.least(F.greatest(p, F.lit(floor)), F.lit(1 - floor))
    return F.log(clipped / (1 - clipped))


@dataclass(frozen=True)
class Feature:
    name: str
    needs: tuple[str, ...]  # the stored columns it reads: skipped when one is not stored
    expr: Callable[[Row], Column]
    # +1: a higher value means a likelier valid pair; -1: a less likely one. A monotone model
    # (jobs/filtering/pair_score_model.py `fit_monotone`) may only weigh it that way round.
    better: int


FEATURES: tuple[Feature, ...] = (
    Feature("char_len_ratio", ("src_chars", "tgt_chars"),
            lambda r: _abs_log_ratio(F.col("src_chars"), F.col("tgt_chars")), -1),
    Feature("token_len_ratio", ("src_tokens", "tgt_tokens"),
            lambda r: _abs_log_ratio(F.col("src_tokens"), F.col("tgt_tokens")), -1),
    # Longer pairs carry more evidence; a crawl's short lines are menus, names and boilerplate.
    Feature("min_tokens", ("src_tokens", "tgt_tokens"),
            lambda r: F.log1p(F.least("src_tokens", "tgt_tokens")), +1),
    Feature("src_lang_fit", ("src_lang_probs",), lambda r: expected_lang_prob(r, r.src), +1),
    Feature("tgt_lang_fit", ("tgt_lang_probs",), lambda r: expected_lang_prob(r, r.tgt), +1),
    Feature("src_script_share", ("src_script_share",), lambda r: F.col("src_script_share"), +1),
    Feature("tgt_script_share", ("tgt_script_share",), lambda r: F.col("tgt_script_share"), +1),
    Feature("punct_share_diff", ("src_punct_share", "tgt_punct_share"),
            lambda r: F.abs(F.col("src_punct_share") - F.col("tgt_punct_share")), -1),
    Feature("bracket_mismatch", ("bracket_mismatch",), lambda r: F.col("bracket_mismatch"), -1),
    Feature("copy_share", ("copy_share",), lambda r: F.col("copy_share"), -1),
    Feature("align_coverage", ("align_coverage",), lambda r: F.col("align_coverage"), +1),
    Feature("align_fwd_logprob", ("align_fwd_logprob",), lambda r: F.col("align_fwd_logprob"),
            +1),
    Feature("align_rev_logprob", ("align_rev_logprob",), lambda r: F.col("align_rev_logprob"),
            +1),
    Feature("embed_cosine", ("embed_cosine",), lambda r: F.col("embed_cosine"), +1),
    Feature("embed_margin", ("embed_margin",), lambda r: F.col("embed_margin"), +1),
    Feature("number_mismatch", ("src", "tgt"),
            lambda r: number_mismatch(F.col("src"), F.col("tgt")), -1),
    # One side holding a sentence more (a crawl's partial alignments).
    Feature("sentence_end_diff", ("src", "tgt"),
            lambda r: F.abs(sentence_ends(F.col("src")) - sentence_ends(F.col("tgt"))), -1),
    Feature("capitals_gap", ("src", "tgt"),
            lambda r: capitals_gap(F.col("src"), F.col("tgt")), -1),
    # The English side's log10 per token under an English LM (udfs/side_lm.py): misaligned
    # and machine-translated crawl English reads less like edited text (issue 39's probe,
    # bench/crawl/mt_probe.py). Null on a pair with no English side.
    Feature("english_fluency", ("english_lm",), lambda r: F.col("english_lm"), +1),
    # The fine-tuned cross-encoder's probability that the pair is a valid translation, as
    # log-odds: the classifier's probabilities crowd at 0 and 1, where a linear model cannot
    # tell 0.99 from 0.9999 (bench/crawl/mt_evidence.py measured both).
    Feature("cross_encoder", ("cross_encoder",), lambda r: log_odds(F.col("cross_encoder")),
            +1),
    # The MT detector's probability that the translation is human text (udfs/cross_encoder.py).
    Feature("mt_human", ("mt_human",), lambda r: F.col("mt_human"), +1),
    # The pair's website (jobs/filtering/hosts.py): what its other pairs say. Big multilingual
    # sites are where MT'd pages come from (fewer languages, fewer pairs: likelier valid).
    Feature("host_mt", ("host_mt",), lambda r: F.col("host_mt"), +1),
    Feature("host_langs", ("host_langs",), lambda r: F.log1p(F.col("host_langs")), -1),
    Feature("host_pairs", ("host_pairs",), lambda r: F.log1p(F.col("host_pairs")), -1),
    # Text a tokenizer went through (udfs/tokenization_artifacts.py).
    Feature("src_tok_artifacts", ("src",), lambda r: tokenization_artifacts(F.col("src")), -1),
    Feature("tgt_tok_artifacts", ("tgt",), lambda r: tokenization_artifacts(F.col("tgt")), -1),
)
BY_NAME = {f.name: f for f in FEATURES}


def available(columns: list[str]) -> list[str]:
    """The features whose stored columns are all present (and not all-null by design:
    `embed_margin` only with margin_k > 0, which the caller decides)."""
    return [f.name for f in FEATURES if all(c in columns for c in f.needs)]


def feature_columns(names: list[str], row: Row) -> dict[str, Column]:
    return {f"f_{name}": BY_NAME[name].expr(row).cast("double") for name in names}


def score_expression(model: dict[str, Any], row: Row) -> Column:
    """The model's `pair_score` for each row, as one Column (see the module docstring)."""
    return score_of(model, {name: BY_NAME[name].expr(row).cast("double")
                            for name in model["features"]})


def score_of(model: dict[str, Any], features: dict[str, Column]) -> Column:
    """The model's `pair_score` of its features' double columns, by name."""
    logit: Column = F.lit(float(model["intercept"]))
    if model.get("learner") == "additive":
        for name, step in zip(model["features"], model["shapes"], strict=True):
            if step["edges"] or step["missing"] != step["values"][0]:
                logit = logit + _step_expression(features[name], step)
            elif step["values"][0]:  # one step: a constant, the feature not computed
                logit = logit + float(step["values"][0])
    else:
        for name, weight, mean, std in zip(model["features"], model["weights"], model["means"],
                                           model["stds"], strict=True):
            x = F.coalesce(features[name], F.lit(float(mean)))
            logit = logit + float(weight) * (x - float(mean)) / float(std)
    return 1.0 / (1.0 + F.exp(-logit))


def _step_expression(x: Column, step: dict[str, Any]) -> Column:
    """One feature's step function (jobs/filtering/pair_score_additive.py `shape`): the value
    of the first edge at or above x, the last value above them all; missing (null or NaN) its
    own value."""
    case = F.when(x.isNull() | F.isnan(x), F.lit(float(step["missing"])))
    for edge, value in zip(step["edges"], step["values"], strict=False):
        case = case.when(x <= float(edge), F.lit(float(value)))
    return case.otherwise(F.lit(float(step["values"][-1])))


def score_python(model: dict[str, Any], features: dict[str, float | None]) -> float:
    """The same score from feature values (tests, benchmarks)."""
    logit = float(model["intercept"])
    if model.get("learner") == "additive":
        for name, step in zip(model["features"], model["shapes"], strict=True):
            x = features.get(name)
            missing = x is None or (isinstance(x, float) and math.isnan(x))
            logit += step["missing"] if missing else \
                step["values"][bisect.bisect_left(step["edges"], x)]
    else:
        for name, weight, mean, std in zip(model["features"], model["weights"], model["means"],
                                           model["stds"], strict=True):
            x = features.get(name)
            x = mean if x is None or (isinstance(x, float) and math.isnan(x)) else x
            logit += weight * (x - mean) / std
    return 1.0 / (1.0 + math.exp(-logit))

"""Keep test sets out of training mixtures.

Eval segments are registered in the lake (`eval_sets`: name, pair, role, side, lang, line,
text, norm). A pool row is contaminated by a set when
- exact: its normalized source or target equals a normalized segment of the set (always
  excluded), or
- overlap: it holds at least `min_containment` of some segment's n-grams (13-grams by
  default, the GPT-3 / PaLM contamination unit; tokens are words, or characters for Chinese,
  Japanese, Thai, ...): a test sentence inside a longer training line. Segments shorter
  than n tokens have no n-gram and are caught by the exact match only. Such rows are
  excluded or flagged (`ngram_action`).

Normalization (`norm`) drops case, whitespace, punctuation and symbols, so a copy that
differs in spacing or a full stop still matches. It is a native Spark expression (JVM
regex); `normalize` is its Python twin for tests and the driver. Eval sets are small (dev
and test sets): they are broadcast, and the pool is never shuffled for the exact match."""

from __future__ import annotations

import unicodedata

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from udfs.langid_backends import LABELS
from udfs.scripts import unspaced

# The languages written without spaces between words (udfs/scripts.py) among those the
# language-ID backends know: a set, for the Spark expression that holds the language in a column.
UNSPACED_LANGS = frozenset(lang for labels in LABELS.values() for lang in labels
                           if "-" not in lang and unspaced(lang))  # not ja-Latn (romanized)

EVAL_SCHEMA = ("pair string, role string, side string, lang string, line long, text string, "
               "norm string, run_id string, name string")
DROPPED = r"[\p{P}\p{S}\p{Z}\s]+"  # punctuation, symbols, separators, whitespace
SEPARATORS = r"[\p{P}\p{S}\p{Z}\s]+"  # what splits words for the n-grams


def normalize(text: str) -> str:
    """Lowercase, without punctuation, symbols and whitespace (= `norm_col`)."""
    return "".join(ch for ch in text.lower()
                   if unicodedata.category(ch)[0] not in "PSZ" and not ch.isspace())


def tokens(text: str, lang: str) -> list[str]:
    """Tokens for n-grams (= `token_col`)."""
    if unspaced(lang):
        return list(normalize(text))
    spaced = "".join(" " if unicodedata.category(ch)[0] in "PSZ" or ch.isspace() else ch
                     for ch in text.lower())
    return spaced.split()


def ngrams(toks: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(toks[i:i + n]) for i in range(len(toks) - n + 1)}


def contains(row: list[list[str]], segment: list[str], n: int, min_containment: float) -> bool:
    """Whether a row (its sides' tokens) holds `min_containment` of the segment's n-grams
    (the Python twin of `contamination`'s overlap)."""
    wanted = ngrams(segment, n)
    if not wanted:
        return False
    held = set().union(*(ngrams(side, n) for side in row))
    return len(wanted & held) >= len(wanted) * min_containment


def norm_col(text: Column) -> Column:
    return F.regexp_replace(F.lower(text), DROPPED, "")


def token_col(text: Column, lang: Column) -> Column:
    """Tokens for n-grams: characters of the normalized text for languages written without
    spaces, else lowercased words without punctuation."""
    chars = F.split(norm_col(text), "(?!$)")  # every character, no empty last one
    words = F.filter(F.split(F.trim(F.regexp_replace(F.lower(text), SEPARATORS, " ")), " "),
                     lambda w: w != "")
    unspaced = lang.isin(*sorted(UNSPACED_LANGS))
    return F.when(unspaced, F.filter(chars, lambda c: c != "")).otherwise(words)


def gram_col(tokens: Column, n: int) -> Column:
    """The hashes of the token n-grams (none if there are fewer than n tokens). Give it a
    plain column: Spark evaluates an expression passed in again inside the lambda, once per
    n-gram (quadratic in a Chinese line's length)."""
    count = F.size(tokens) - n
    grams = F.transform(F.sequence(F.lit(0), F.greatest(count, F.lit(0))),
                        lambda i: F.xxhash64(F.concat_ws("\u0001", F.slice(tokens, i + 1, n))))
    return F.when(count >= 0, F.array_distinct(grams)).otherwise(F.array().cast("array<bigint>"))


def contamination(pool: DataFrame, evals: DataFrame, n: int, min_containment: float
                  ) -> DataFrame:
    """`pool` (rows with `_uid`, `src`, `tgt`, `_src_lang`, `_tgt_lang`) with `_exact` and
    `_overlap`: the names of the eval sets that contaminate each row (empty: none)."""
    empty = F.array().cast("array<string>")
    by_norm = (evals.where(F.col("norm") != "").groupBy("norm")
               .agg(F.array_sort(F.collect_set("name")).alias("_names")))
    out = pool.withColumn("_sn", norm_col(F.col("src"))).withColumn("_tn", norm_col(F.col("tgt")))
    for side in ("_sn", "_tn"):
        hits = F.broadcast(by_norm.withColumnRenamed("norm", side)
                           .withColumnRenamed("_names", f"{side}_hit"))
        out = out.join(hits, side, "left")
    out = out.withColumn("_exact", F.array_sort(F.array_union(
        F.coalesce(F.col("_sn_hit"), empty), F.coalesce(F.col("_tn_hit"), empty))))
    out = out.drop("_sn", "_tn", "_sn_hit", "_tn_hit")
    segments = evals.select(
        "name", F.xxhash64("name", "pair", "side", "line").alias("_seg"),
        token_col(F.col("text"), F.col("lang")).alias("_tokens"),
    ).select("name", "_seg", gram_col(F.col("_tokens"), n).alias("_grams"))
    segments = segments.where(F.size("_grams") > 0).withColumn("_total", F.size("_grams"))
    seg_grams = segments.select("name", "_seg", "_total", F.explode("_grams").alias("_gram"))
    known = seg_grams.select("_gram").distinct()
    tokens = pool.select("_uid", token_col(F.col("src"), F.col("_src_lang")).alias("_ts"),
                         token_col(F.col("tgt"), F.col("_tgt_lang")).alias("_tt"))
    row_grams = tokens.select("_uid", F.explode(F.array_union(
        gram_col(F.col("_ts"), n), gram_col(F.col("_tt"), n))).alias("_gram"))
    shared = row_grams.join(F.broadcast(known), "_gram").distinct()
    overlap = (shared.join(F.broadcast(seg_grams), "_gram")
               .groupBy("_uid", "name", "_seg", "_total").agg(F.count("*").alias("_hits"))
               .where(F.col("_hits") >= F.col("_total") * F.lit(min_containment))
               .groupBy("_uid").agg(F.array_sort(F.collect_set("name")).alias("_overlap")))
    out = out.join(overlap, "_uid", "left")
    return out.withColumn("_overlap", F.coalesce(F.col("_overlap"), empty))

"""The heuristic rules: each computes named score columns (stored), then a rule compares a
score with thresholds from config. Score, then decide (DESIGN §4).

`score_columns` needs the normalized `src`/`tgt` and the per-side analysis structs
`src_a`/`tgt_a` (udfs/sides.py). `rule_failures` maps each rule name to a boolean Column
over those scores; the first failing rule in configured order becomes `reject_rule`.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from jobs.config import FilterConfig
from udfs.normalize import ATTRIBUTES

# Opening/closing forms counted together, so `（ABC)` balances.
BRACKETS = [("([（", ")]）"), ("{｛", "}｝"), ("【〔", "】〕"), ("《〈", "》〉"), ("“", "”")]
URL_EMAIL_HTML = (
    r"(?i)(?:\b(?:https?|ftp)://|\bwww\.)\S+"
    r"|[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[a-z]{2,}"
    rf"|</?[a-z][a-z0-9]*{ATTRIBUTES}/?>"
    r"|&(?:[a-z]+|#\d+|#x[0-9a-f]+);"
)
URL_EMAIL_HTML_GUARD = r"[:@<&]|(?i:www\.)"  # every match of URL_EMAIL_HTML has one of these
PUNCT = r"[\p{P}\p{S}]+"
# The script a language is written in (Java regex classes); Latin unless listed.
SCRIPTS = {
    "zh": r"\p{IsHan}",
    "ja": r"[\p{IsHan}\p{IsHiragana}\p{IsKatakana}]",
    "ko": r"\p{IsHangul}",
    "ru": r"\p{IsCyrillic}",
    "uk": r"\p{IsCyrillic}",
    "bg": r"\p{IsCyrillic}",
    "sr": r"\p{IsCyrillic}",
    "kk": r"\p{IsCyrillic}",
    "ar": r"\p{IsArabic}",
    "fa": r"\p{IsArabic}",
    "el": r"\p{IsGreek}",
    "he": r"\p{IsHebrew}",
    "th": r"\p{IsThai}",
    "hi": r"\p{IsDevanagari}",
}
# The script's most common letters as plain ranges: Java tests a class's parts in order, and a
# range test is far cheaper than a script lookup (\p{IsLatin} is a binary search per char).
COMMON_LETTERS = {
    "zh": r"\u4E00-\u9FFF",
    "ja": r"\u3041-\u3096\u30A1-\u30FA\u4E00-\u9FFF",
    "ru": r"\u0410-\u044F",
    "uk": r"\u0410-\u044F",
    "bg": r"\u0410-\u044F",
    "sr": r"\u0410-\u044F",
    "kk": r"\u0410-\u044F",
    "ko": r"\uAC00-\uD7A3",
}


def script_share(col: Column, lang: str) -> Column:
    """Letters in `lang`'s script over those letters plus the runs (words) of other letters,
    so a Chinese line with two English names ("Tom 不想让Mary走") still scores 4/6."""
    script = SCRIPTS.get(lang, r"\p{IsLatin}").strip("[]")
    common = COMMON_LETTERS.get(lang, "a-zA-Z" if lang not in SCRIPTS else "")
    # Non-letters are dropped by the cheap \p{L}\p{Nl} test before any script lookup.
    in_script = F.length(F.regexp_replace(col, f"[^{common}[\\p{{L}}\\p{{Nl}}&&[{script}]]]+", ""))
    foreign_runs = F.regexp_count(col, F.lit(f"[^{common}\\P{{L}}{script}]+"))  # other letters
    share = F.when(in_script + foreign_runs > 0, in_script / (in_script + foreign_runs))
    # An ASCII-only line (most English) has only Latin letters: 1 for Latin, else 0.
    ascii_share = F.when(col.rlike("[a-zA-Z]"), F.lit(0.0 if lang in SCRIPTS else 1.0))
    return F.when(~col.rlike("[^\\x00-\\x7F]"), ascii_share).otherwise(share)


def count_chars(col: Column, chars: str) -> Column:
    """How many times any of `chars` occurs in `col` (JVM `replace`, no regex)."""
    total = F.lit(0)
    for ch in chars:
        total = total + F.length(col) - F.length(F.replace(col, F.lit(ch), F.lit("")))
    return total


def bracket_mismatch(col: Column) -> Column:
    """Unmatched brackets/quotes: |opens - closes| per kind, plus an odd count of `"`."""
    total = F.lit(0)
    for opens, closes in BRACKETS:
        total = total + F.abs(count_chars(col, opens) - count_chars(col, closes))
    return F.coalesce(total + count_chars(col, '"') % 2, F.lit(0))  # a null side has none


def nonspace_chars(col: Column) -> Column:
    return F.length(F.replace(col, F.lit(" "), F.lit("")))


def punct_share(col: Column) -> Column:
    chars = nonspace_chars(col)
    punct = F.length(col) - F.length(F.regexp_replace(col, PUNCT, ""))
    return F.when(chars > 0, punct / chars)


def first_match(src: Column, tgt: Column, pattern: str, guard: str) -> Column:
    """The first text matching `pattern` on the source side, else the target side, else null.
    `guard` (a cheap regex every match contains) spares most lines the full pattern."""

    def extract(col: Column) -> Column:
        found = F.regexp_extract(col, f"({pattern})", 1)
        # Nested, not `guard & found`: Spark would evaluate a `found` used twice up front.
        return F.when(col.rlike(guard), F.when(found != "", found))

    return F.coalesce(extract(src), extract(tgt))


def special_match(src: Column, tgt: Column, patterns: dict[str, str]) -> Column:
    """Name of the first configured special-character pattern found on either side."""
    hits = [F.when(src.rlike(rx) | tgt.rlike(rx), F.lit(name)) for name, rx in patterns.items()]
    return F.coalesce(*hits) if hits else F.lit(None).cast("string")


def score_columns(cfg: FilterConfig) -> dict[str, Column]:
    src, tgt = F.col("src"), F.col("tgt")
    src_lang, tgt_lang = cfg.langs
    src_tokens, tgt_tokens = F.col("src_a.n_tokens"), F.col("tgt_a.n_tokens")
    return {
        "src_chars": F.length(src),
        "tgt_chars": F.length(tgt),
        # Lowercasing keeps a line's length (outside a few letters such as U+0130), so the
        # length test spares nearly every row the two lower() calls.
        "identical": (F.length(src) == F.length(tgt)) & (F.lower(src) == F.lower(tgt)),
        "src_tokens": src_tokens,
        "tgt_tokens": tgt_tokens,
        "src_max_word_chars": F.col("src_a.max_token_chars"),
        "tgt_max_word_chars": F.col("tgt_a.max_token_chars"),
        "token_ratio": F.when(tgt_tokens > 0, src_tokens / tgt_tokens),
        "src_char_word_ratio": F.when(src_tokens > 0, nonspace_chars(src) / src_tokens),
        "tgt_char_word_ratio": F.when(tgt_tokens > 0, nonspace_chars(tgt) / tgt_tokens),
        "src_punct_share": punct_share(src),
        "tgt_punct_share": punct_share(tgt),
        "bracket_mismatch": bracket_mismatch(src) + bracket_mismatch(tgt),
        "url_email_html": first_match(src, tgt, URL_EMAIL_HTML, URL_EMAIL_HTML_GUARD),
        "special_chars": special_match(src, tgt, cfg.rules.special_patterns),
        "src_script_share": script_share(src, src_lang),
        "tgt_script_share": script_share(tgt, tgt_lang),
        "src_lang": F.col("src_a.lang"),
        "src_lang_prob": F.col("src_a.lang_prob"),
        "tgt_lang": F.col("tgt_a.lang"),
        "tgt_lang_prob": F.col("tgt_a.lang_prob"),
    }


def outside(col: Column, low: float, high: float) -> Column:
    return (col < low) | (col > high)


def rule_failures(cfg: FilterConfig) -> dict[str, Column]:
    """Rule name -> Column that is true when the row fails it (null counts as passing)."""
    r, c = cfg.rules, F.col
    src_lang, tgt_lang = cfg.langs
    src_cw, tgt_cw = r.char_word_range(src_lang), r.char_word_range(tgt_lang)

    def wrong_lang(side: str, lang: str) -> Column:
        """Wrong script, or (on text long enough for fastText) wrong language / low prob."""
        lid = cfg.langid
        wrong = ~c(f"{side}_lang").isin(lid.accepted_labels(lang))
        unsure = c(f"{side}_lang_prob") < lid.min_prob
        long_enough = c(f"{side}_chars") >= lid.min_chars_for(lang)
        return (c(f"{side}_script_share") < lid.min_script_share) | (long_enough & (wrong | unsure))

    return {
        # A null side (Parquet input can hold nulls) is empty too, so it cannot pass as clean.
        "empty": (F.coalesce(c("src_chars"), F.lit(0)) == 0)
        | (F.lit(not cfg.mono) & (F.coalesce(c("tgt_chars"), F.lit(0)) == 0)),
        "identical": c("identical"),
        "too_many_tokens": F.greatest("src_tokens", "tgt_tokens") > r.max_tokens,
        "long_word": F.greatest("src_max_word_chars", "tgt_max_word_chars") > r.max_word_chars,
        "token_ratio": outside(c("token_ratio"), r.token_ratio.min, r.token_ratio.max),
        "char_word_ratio": outside(c("src_char_word_ratio"), src_cw.min, src_cw.max)
        | outside(c("tgt_char_word_ratio"), tgt_cw.min, tgt_cw.max),
        "punct_share": F.greatest("src_punct_share", "tgt_punct_share") > r.max_punct_share,
        "unbalanced_brackets": c("bracket_mismatch") > 0,
        "url_email_html": c("url_email_html").isNotNull(),
        "special_chars": c("special_chars").isNotNull(),
        "langid_src": wrong_lang("src", src_lang),
        "langid_tgt": wrong_lang("tgt", tgt_lang),
    }


RULE_STAGE = {"langid_src": "langid", "langid_tgt": "langid"}  # the rest are stage "rules"


def first_failure(cfg: FilterConfig) -> Column:
    """Name of the first failing rule in configured order, or null when all pass."""
    failures = rule_failures(cfg)
    return F.coalesce(
        *[
            F.when(F.coalesce(failures[name], F.lit(False)), F.lit(name))
            for name in cfg.rule_order
        ],
        F.lit(None).cast("string"),
    )

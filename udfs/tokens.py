"""What a "token" (word) is per language, for the length, ratio and word-length rules.

- zh: jieba words (rjieba, the Rust port: same dictionary and cuts, ~16x faster), spaces dropped.
- Other languages written without spaces between words (main script Han, kana, Thai, Lao,
  Khmer or Burmese: ja, th, lo, km, my, yue, ...): ICU's word break iterator, which has a
  dictionary for each (PyICU; udfs/scripts.py says which languages), spaces dropped.
  Punctuation counts as a token, as jieba's does.
- everything else: whitespace-separated tokens.
"""

from __future__ import annotations

from functools import cache

import icu
import rjieba

from udfs.scripts import unspaced


@cache
def word_breaker(lang: str) -> icu.BreakIterator:
    """One ICU word break iterator per language and Python worker (reused: setText resets)."""
    return icu.BreakIterator.createWordInstance(icu.Locale(lang))


def icu_words(text: str, lang: str) -> list[str]:
    """`text` cut at ICU's word boundaries, whitespace dropped."""
    breaker = word_breaker(lang)
    breaker.setText(text)
    # PyICU's offsets are UTF-16 code units; a str indexes code points. They differ only
    # where a character lies outside the BMP, so such a text is cut through its UTF-16 form.
    bounds = [0, *breaker]
    spans = zip(bounds, bounds[1:], strict=False)
    if any(ord(ch) > 0xFFFF for ch in text):
        units = text.encode("utf-16-le")
        pieces = [units[2 * a: 2 * b].decode("utf-16-le") for a, b in spans]
    else:
        pieces = [text[a:b] for a, b in spans]
    return [piece for piece in pieces if not piece.isspace()]


def tokenize(text: str, lang: str) -> list[str]:
    if lang == "zh":
        return [tok for tok in rjieba.cut(text, True) if not tok.isspace()]
    if unspaced(lang):
        return icu_words(text, lang)
    return text.split()

"""What a "token" (word) is per language, for the length, ratio and word-length rules.

- zh: jieba words (rjieba, the Rust port: same dictionary and cuts, ~16x faster), spaces dropped.
- ja, th, lo, km, my: characters (no spaces between words; jieba's dictionary is Chinese).
- everything else: whitespace-separated tokens.
"""

from __future__ import annotations

import rjieba

CHARACTER_LANGS = frozenset({"ja", "th", "lo", "km", "my"})


def tokenize(text: str, lang: str) -> list[str]:
    if lang == "zh":
        return [tok for tok in rjieba.cut(text, True) if not tok.isspace()]
    if lang in CHARACTER_LANGS:
        return [ch for ch in text if not ch.isspace()]
    return text.split()

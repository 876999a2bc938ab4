"""Chinese-specific normalization (pure Python): OpenCC traditional->simplified and
full-width->half-width forms."""

from __future__ import annotations

import re
from functools import cache

import opencc

# Full-width ASCII forms U+FF01..U+FF5E map to U+0021..U+007E; the ideographic space to ' '.
FULLWIDTH_TABLE = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}

# Full-width punctuation that is the convention in Chinese text (GB/T 15834): kept next to
# Chinese characters, converted elsewhere (`ＡＢＣ１２３！` -> `ABC123!`, `你好！` stays).
CHINESE_PUNCT = "！，：；？（）"
CJK = r"\u2E80-\u2FFF\u3001-\u303F\u3040-\u30FF\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF\uFF00-\uFF0F"
KEPT_PUNCT = re.compile(rf"(?<=[{CJK}])[{CHINESE_PUNCT}]|[{CHINESE_PUNCT}](?=[{CJK}])")
PLACEHOLDER_BASE = 0xF0000  # Supplementary Private Use Area: never in real text we keep


@cache
def _converter(config: str) -> opencc.OpenCC:
    return opencc.OpenCC(config)


def to_simplified(text: str) -> str:
    """OpenCC `t2s` (characters and phrases, e.g. 後來 -> 后来, 頭髮 -> 头发)."""
    return _converter("t2s").convert(text)


def fullwidth_to_halfwidth(text: str) -> str:
    """ASCII-range full-width forms become ASCII, except Chinese punctuation next to Chinese."""
    if not any("\uff01" <= ch <= "\uff5e" or ch == "\u3000" for ch in text):
        return text
    kept = {m.start() for m in KEPT_PUNCT.finditer(text)}
    if not kept:
        return text.translate(FULLWIDTH_TABLE)
    chars = list(text)
    for i in kept:  # shield kept punctuation from the table, then restore it
        chars[i] = chr(PLACEHOLDER_BASE + CHINESE_PUNCT.index(chars[i]))
    out = "".join(chars).translate(FULLWIDTH_TABLE)
    return "".join(
        CHINESE_PUNCT[ord(ch) - PLACEHOLDER_BASE] if ord(ch) >= PLACEHOLDER_BASE else ch
        for ch in out
    )

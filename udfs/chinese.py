"""Chinese-specific normalization (pure Python): OpenCC traditional->simplified and
full-width->half-width forms."""

from __future__ import annotations

import re
from functools import cache

import opencc

# Full-width ASCII forms U+FF01..U+FF5E map to U+0021..U+007E; the ideographic space to ' '.
FULLWIDTH_TABLE = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}

# Full-width punctuation that is the convention in Chinese text (GB/T 15834): kept next to
# Chinese characters or Chinese punctuation (`“冠状”，`), converted elsewhere (`ＡＢＣ１２３！` ->
# `ABC123!`, `你好！` stays). A run of it (`好！！`, `什么？！`) is kept as a whole when the run
# touches Chinese, and brackets go by pairs: `华伦天奴（Valentino）` keeps both.
CHINESE_PUNCT = "！，：；？（）"
CJK = r"\u2E80-\u2FFF\u3001-\u303F\u3040-\u30FF\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF"
# Punctuation outside those blocks that Chinese text uses: · — ‘ ’ “ ” …
CHINESE_MARKS = r"\u00B7\u2014\u2018\u2019\u201C\u201D\u2026"
CONTEXT = CJK + CHINESE_MARKS
FULLWIDTH = re.compile("[\uff01-\uff5e\u3000]")
KEPT_PUNCT = re.compile(rf"(?<=[{CONTEXT}])[{CHINESE_PUNCT}]+|[{CHINESE_PUNCT}]+(?=[{CONTEXT}])")


@cache
def _converter(config: str) -> opencc.OpenCC:
    return opencc.OpenCC(config)


def to_simplified(text: str) -> str:
    """OpenCC `t2s` (characters and phrases, e.g. 後來 -> 后来, 頭髮 -> 头发)."""
    return _converter("t2s").convert(text)


def fullwidth_to_halfwidth(text: str) -> str:
    """ASCII-range full-width forms become ASCII, except Chinese punctuation next to Chinese."""
    if not FULLWIDTH.search(text):
        return text
    out = text.translate(FULLWIDTH_TABLE)  # one code point for one: positions still match
    kept = {i for m in KEPT_PUNCT.finditer(text) for i in range(*m.span())}
    opened = []
    for i, ch in enumerate(text):  # a bracket pair is kept when either of its brackets is
        if ch == "（":
            opened.append(i)
        elif ch == "）" and opened:
            j = opened.pop()
            if i in kept or j in kept:
                kept |= {i, j}
    if not kept:
        return out
    chars = list(out)
    for i in kept:
        chars[i] = text[i]
    return "".join(chars)

"""The character counts the rules read (udfs/text_stats.py), counted by Arrow kernels in the
side pass, against plain Python on real lines (tests/data, see ATTRIBUTION.md)."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pyarrow as pa

from udfs.text_stats import char_counts


def python_counts(text: str) -> tuple[int, int, int]:
    punct = sum(unicodedata.category(c)[0] in "PS" for c in text)
    return len(text), len(text) - text.count(" "), punct


def test_counts_equal_python_on_real_lines(data_dir: Path) -> None:
    lines: list[str] = []
    for name in ("moses_en.txt", "moses_ru.txt", "moses_zh.txt", "tatoeba-zh-en.zh"):
        lines += (data_dir / name).read_text(encoding="utf-8").splitlines()
    # Beyond the BMP (emoji, a Unicode 14 symbol), spaces other than U+0020, an empty line.
    lines += ["ok 👍🏽 then 🫠!", "a\u00a0b\u3000c  d", ""]
    got = char_counts(pa.array(lines, pa.string()))
    counts = list(zip(*(got[k].to_pylist() for k in ("chars", "nonspace_chars", "punct_chars")),
                      strict=True))
    want = [python_counts(line) for line in lines]
    bad = [(line, g, w) for line, g, w in zip(lines, counts, want, strict=True) if g != w]
    assert not bad, bad[:5]
    assert sum(w[2] for w in want) > 1000  # not vacuous: the lines hold punctuation


def test_null_text_has_null_counts() -> None:
    got = char_counts(pa.array([None, "a, b"], pa.string()))
    assert {k: v.to_pylist() for k, v in got.items()} == {
        "chars": [None, 4], "nonspace_chars": [None, 3], "punct_chars": [None, 1]}

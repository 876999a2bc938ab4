"""A side's bracket/quote profile, computed in the per-side Python pass (udfs/sides.py): one
`str.count` per character on text already in hand costs ~2 µs a side, where the same counts as
Spark expressions (a `replace` and two `length`s per character, 28 characters, both sides) were
the job's costliest score (issue 15: ~5x the time of any other rule's scores)."""

from __future__ import annotations

import re

# Opening/closing forms counted together, so `（ABC)` balances.
BRACKETS = [("([（", ")]）"), ("{｛", "}｝"), ("【〔", "】〕"), ("《〈", "》〉")]
# Double quotation marks of every script, counted together: which mark opens and which closes
# differs by language (German „…“, English “…”, Russian «…», Chinese “…” or 「…」), but a quoted
# span has two of them in any of them.
DOUBLE_QUOTES = '"“”„«»「」『』＂'
PROFILE_SIZE = len(BRACKETS) + 1
_ANY = frozenset("".join(o + c for o, c in BRACKETS) + DOUBLE_QUOTES)
# A list item's marker at the start of a line: `3)`, `10.)`, `d)`, `iv)`, `b）`. Its bracket
# closes the marker, not something the line opened, so it is not counted: crawled legal and
# technical text is full of such items, each a line of its own (ParaCrawl's valid pairs: 0.4
# points of the rule's 1.3 on release 7, python -m bench.crawl.rule_loss).
LIST_MARKER = re.compile(r"\s*(?:\d{1,3}|[A-Za-z]|[ivx]{2,4}|[IVX]{2,4})\.?[)）]")


def bracket_profile(text: str) -> list[int]:
    """Unmatched brackets per kind (opens - closes, signed), then 1 if the text has an odd
    number of double quotation marks, else 0. A leading list marker's bracket does not count."""
    if _ANY.isdisjoint(text):  # most lines: one pass in C instead of 28 counts
        return [0] * PROFILE_SIZE
    marker = LIST_MARKER.match(text)
    if marker:
        text = text[marker.end():]

    def count(chars: str) -> int:
        return sum(map(text.count, chars))

    kinds = [count(opens) - count(closes) for opens, closes in BRACKETS]
    return [*kinds, count(DOUBLE_QUOTES) % 2]

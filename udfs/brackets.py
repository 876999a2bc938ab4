"""A side's bracket/quote profile, computed in the per-side Python pass (udfs/sides.py): one
`str.count` per character on text already in hand costs ~2 µs a side, where the same counts as
Spark expressions (a `replace` and two `length`s per character, 28 characters, both sides) were
the job's costliest score (issue 15: ~5x the time of any other rule's scores)."""

from __future__ import annotations

# Opening/closing forms counted together, so `（ABC)` balances.
BRACKETS = [("([（", ")]）"), ("{｛", "}｝"), ("【〔", "】〕"), ("《〈", "》〉")]
# Double quotation marks of every script, counted together: which mark opens and which closes
# differs by language (German „…“, English “…”, Russian «…», Chinese “…” or 「…」), but a quoted
# span has two of them in any of them.
DOUBLE_QUOTES = '"“”„«»「」『』＂'
PROFILE_SIZE = len(BRACKETS) + 1
_ANY = frozenset("".join(o + c for o, c in BRACKETS) + DOUBLE_QUOTES)


def bracket_profile(text: str) -> list[int]:
    """Unmatched brackets per kind (opens - closes, signed), then 1 if the text has an odd
    number of double quotation marks, else 0."""
    if _ANY.isdisjoint(text):  # most lines: one pass in C instead of 28 counts
        return [0] * PROFILE_SIZE

    def count(chars: str) -> int:
        return sum(map(text.count, chars))

    kinds = [count(opens) - count(closes) for opens, closes in BRACKETS]
    return [*kinds, count(DOUBLE_QUOTES) % 2]

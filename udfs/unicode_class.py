"""RE2 character classes spelled out from Python's Unicode tables: a class built so matches
what Python's `re` (or `unicodedata`) sees, whatever Unicode version the RE2 inside pyarrow
has (udfs/moses_punct.py, udfs/text_stats.py)."""

from __future__ import annotations

from collections.abc import Callable


def chars_where(pred: Callable[[str], bool]) -> str:
    """Every code point `pred` holds for, as one string."""
    return "".join(c for c in map(chr, range(0x110000)) if pred(c))


def re2_class(chars: str) -> str:
    """An RE2 character class matching exactly `chars`, as \\x{...} ranges."""
    ranges: list[list[int]] = []
    for cp in map(ord, chars):
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    parts = [f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges]
    return "[" + "".join(parts) + "]"

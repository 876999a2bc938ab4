"""Character counts of a side the rules read (udfs/rules.py), counted in the per-side Arrow
pass (udfs/sides.py) on the normalized text: C++ kernels over the batch, where the same counts
as Spark expressions cost a UTF-8 scan each (`length`), a byte-by-byte `replace` and a
java.util.regex pass with a UTF-8 -> UTF-16 round trip (issue 28: a fifth of the main stage's
JVM samples).

Characters are code points, as Spark's `length` counts them.
"""

from __future__ import annotations

import unicodedata

import pyarrow as pa
import pyarrow.compute as pc

from udfs.unicode_class import chars_where, re2_class

# Punctuation and symbols (Unicode categories P* and S*), the classes java.util.regex spelled
# [\p{P}\p{S}] when this rule ran in the JVM. Spelled from Python's Unicode tables (14.0 for
# Python 3.11) rather than RE2's, so the class does not move with the pyarrow version. Java 17
# knew Unicode 13.0: the 198 code points that are P or S since 14.0 (U+061D, U+20C0, U+2E53..,
# emoji) count as punctuation now, and none else differs (every code point compared).
PUNCT = re2_class(chars_where(lambda c: unicodedata.category(c)[0] in "PS")) + "+"

STATS_SCHEMA = "chars int, nonspace_chars int, punct_chars int"


def char_counts(texts: pa.Array) -> dict[str, pa.Array]:
    """Per text: characters, characters other than the plain space (U+0020), and punctuation
    or symbol characters (null text -> nulls)."""
    chars = pc.utf8_length(texts)
    spaces = pc.count_substring(texts, " ")
    no_punct = pc.utf8_length(pc.replace_substring_regex(texts, PUNCT, ""))
    return {
        "chars": chars,
        "nonspace_chars": pc.subtract(chars, spaces),
        "punct_chars": pc.subtract(chars, no_punct),
    }

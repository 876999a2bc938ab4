"""Moses punctuation normalization as native Spark Column expressions (no Python UDF).

A rule-for-rule port of sacremoses' ``MosesPunctNormalizer(lang=lang)`` with its default
options (penn=True, norm_quote_commas=True, norm_numbers=True, pre_replace_unicode_punct=False,
post_remove_control_chars=False, perl_parity=False), itself a port of Moses'
``normalize-punctuation.perl``. The rules below are sacremoses' lists in sacremoses' order,
rewritten from Python ``re`` syntax into ``java.util.regex`` syntax, where they differ:

* group references in replacements are ``$1``, not ``\\g<1>``;
* ``\\d`` and ``\\s`` are ASCII-only in Java but Unicode in Python ``re`` on ``str``
  (``str.isdecimal`` / ``str.isspace``), so they are spelled as explicit classes (``DIGIT``,
  ``SPACE``) generated from the running Python, which also pins the Unicode version to the one
  sacremoses sees (Java 17's ``\\p{Nd}`` is Unicode 13, Python 3.11's ``\\d`` is Unicode 14);
* the final ``str.strip()`` is Spark's ``btrim(s, chars)`` with Python's whitespace characters
  (plain ``trim`` removes only U+0020);
* ``[^<]`` and the classes match a whole code point in both engines (surrogate pairs included).

For speed, without changing any result: rules that are plain literals run as ``replace`` (no
regex), the two DIGIT rules get a cheap lookahead guard, lines that no rule can change
(``TRIGGER``) skip the chain, and three rules that can never change the output are left out.
Nothing else needed translating: no sacremoses rule uses ``^``/``$``, an unescaped ``.``,
lookaround or case folding. Null in, null out (sacremoses would turn None into "None").
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F

# (java.util.regex pattern, Matcher.replaceAll replacement); a pattern that is a plain literal
# runs as a literal replace, so its replacement must hold no $ or \.
Rule = tuple[str, str]


def _java_class(chars: str) -> str:
    """A java.util.regex character class matching exactly `chars`, as \\x{...} ranges."""
    ranges: list[list[int]] = []
    for cp in map(ord, chars):
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    parts = [f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges]
    return "[" + "".join(parts) + "]"


def _chars(pred: Callable[[str], bool]) -> str:
    return "".join(c for c in map(chr, range(0x110000)) if pred(c))


DIGIT = _java_class(_chars(str.isdecimal))  # Python re's \d on str (Unicode category Nd)
SPACE_CHARS = _chars(str.isspace)  # Python re's \s on str, and what str.strip() strips
SPACE = _java_class(SPACE_CHARS)
NBSP = "\u00a0"

# Speed, not meaning: Java tries a pattern at every position of the line, and testing DIGIT (a
# union of ~65 ranges) there costs ~20 us per rule on a news line. Each DIGIT rule therefore
# starts with the guard (?s)(?=.X), "the next code point is followed by X" (X a literal), which
# fails fast; the match itself is unchanged. (A lookbehind would not do: Java's lookbehind
# misreads \x{...} classes that hold supplementary code points, e.g. Tangsa digits.)
EXTRA_WHITESPACE: list[Rule] = [
    ("\r", ""),  # a literal CR
    (r"\(", " ("),
    (r"\)", ") "),
    (r" +", " "),
    (r"\) ([.!:?;,])", ")$1"),
    (r"\( ", "("),
    (r" \)", ")"),
    (rf"(?s)(?=. %)({DIGIT}) %", "$1%"),
    (r" :", ":"),
    (r" ;", ";"),
]

# sacremoses applies these when penn=True (its default), despite the name.
NORMALIZE_UNICODE_IF_NOT_PENN: list[Rule] = [("`", "'"), ("''", ' " ')]

# Left out, as they cannot change the result: sacremoses' ([a-zA-Z])‘([a-zA-Z]) -> \1'\2 and
# the same for ’ (the unconditional ‘ -> ' and ’ -> ' rules right after them turn every ‘ and ’
# into ' anyway, and nothing runs in between), and ´´ -> " (´ -> ' has already removed every ´).
NORMALIZE_UNICODE: list[Rule] = [
    ("„", '"'),
    ("“", '"'),
    ("”", '"'),
    ("–", "-"),
    ("—", " - "),
    (r" +", " "),
    ("´", "'"),
    ("‘", "'"),
    ("‚", "'"),
    ("’", "'"),
    ("''", '"'),
    ("…", "..."),
]

FRENCH_QUOTES: list[Rule] = [  # applied for every language
    (f"{NBSP}«{NBSP}", '"'),
    (f"«{NBSP}", '"'),
    ("«", '"'),
    (f"{NBSP}»{NBSP}", '"'),
    (f"{NBSP}»", '"'),
    ("»", '"'),
]

HANDLE_PSEUDO_SPACES: list[Rule] = [
    (f"{NBSP}%", "%"),
    (f"nº{NBSP}", "nº "),
    (f"{NBSP}:", ":"),
    (f"{NBSP}ºC", " ºC"),
    (f"{NBSP}cm", " cm"),
    (rf"{NBSP}\?", "?"),
    (f"{NBSP}!", "!"),
    (f"{NBSP};", ";"),
    (f",{NBSP}", ", "),
    (r" +", " "),
]

EN_QUOTATION_FOLLOWED_BY_COMMA: list[Rule] = [(r'"([,.]+)', '$1"')]

DE_ES_FR_QUOTATION_FOLLOWED_BY_COMMA: list[Rule] = [
    (',"', '",'),
    (rf'(\.+)"({SPACE}*[^<])', '"$1$2'),  # don't fix period at end of sentence
]

# Both digits are consumed, as in re.sub: "1 2 3" (no-break spaces) gives "1.2 3".
DE_ES_CZ_CS_FR: list[Rule] = [(f"(?s)(?=.{NBSP})({DIGIT}){NBSP}({DIGIT})", "$1,$2")]
OTHER: list[Rule] = [(f"(?s)(?=.{NBSP})({DIGIT}){NBSP}({DIGIT})", "$1.$2")]


def _literal(pattern: str) -> str | None:
    """The text `pattern` matches if it is a plain literal (\\-escaped punctuation allowed)."""
    text, escaped = [], False
    for ch in pattern:
        if escaped:
            if ch.isalnum():
                return None
            text.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in "^$.|?*+()[]{}":
            return None
        else:
            text.append(ch)
    return "".join(text)


def moses_punct_rules(lang: str) -> list[Rule]:
    """The ordered rules for ``lang``, chosen exactly as sacremoses does (case-sensitive codes:
    "en"; "de"/"es"/"fr"; "de"/"es"/"cz"/"cs"/"fr"; anything else gets the generic branch).
    The final ``str.strip()`` is not a rule: see ``moses_punct_normalize``."""
    rules = [*EXTRA_WHITESPACE, *NORMALIZE_UNICODE_IF_NOT_PENN, *NORMALIZE_UNICODE]
    rules += [*FRENCH_QUOTES, *HANDLE_PSEUDO_SPACES]
    if lang == "en":
        rules += EN_QUOTATION_FOLLOWED_BY_COMMA
    elif lang in ("de", "es", "fr"):
        rules += DE_ES_FR_QUOTATION_FOLLOWED_BY_COMMA
    return rules + (DE_ES_CZ_CS_FR if lang in ("de", "es", "cz", "cs", "fr") else OTHER)


# A line holding none of these, and neither starting nor ending with whitespace, is left as it
# is by every rule, so the chain is skipped for it (~75% of news lines; this test costs a
# fraction of the chain). Every rule needs one of them to change anything: \r ( ) ` ´ " « »
# NBSP, a char in U+2013-U+2026 („ “ ” – — ‘ ‚ ’ …), or a pair "  " (" +" only changes runs of
# 2+ spaces), " %", " :", " ;", "''". Matching more (e.g. "' ") only costs time. Keep it in step
# with the rules; test_random_strings_match_sacremoses catches a gap.
TRIGGER = f"[\\r()`´«»{NBSP}\"\\u2013-\\u2026]|[ '][ '%:;]"


def moses_punct_normalize(col: Column, lang: str) -> Column:
    """``MosesPunctNormalizer(lang=lang).normalize(s)`` for every row of a string column."""
    out = col
    for pattern, replacement in moses_punct_rules(lang):
        text = _literal(pattern)
        if text is not None:
            # replace() works on the UTF-8 bytes, without regexp_replace's decode to a Java
            # String and back, and replaces left to right without overlap, like re.sub.
            out = F.replace(out, F.lit(text), F.lit(replacement))
        else:
            out = F.regexp_replace(out, pattern, replacement)
    # str.strip(): btrim(s, chars) drops any of `chars` (by code point) from both ends.
    spaces = F.lit(SPACE_CHARS)
    out = F.btrim(out, spaces)
    at_edge = F.instr(spaces, F.substring(col, 1, 1)) + F.instr(spaces, F.substring(col, -1, 1))
    return F.when(col.rlike(TRIGGER) | (at_edge > 0), out).otherwise(col)

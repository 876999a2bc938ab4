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
* the final ``str.strip()`` is a regex over ``SPACE`` (Spark's ``trim`` removes only U+0020),
  anchored with ``\\A``/``\\z`` because Java's ``$`` may also match before a final line
  terminator;
* a ``[^<]`` or a class consumes a whole code point in both engines (surrogate pairs included).

No rule uses lookaround, ``$``/``^``, ``.`` or case folding, so nothing else needs translating.
Null in, null out (sacremoses would turn None into the string "None").
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

Rule = tuple[str, str]  # (java.util.regex pattern, Matcher.replaceAll replacement)


def _py_class(pred) -> str:
    """A Java character class of all code points for which ``pred(chr(cp))`` holds."""
    ranges: list[list[int]] = []
    for cp in range(0x110000):
        if pred(chr(cp)):
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1][1] = cp
            else:
                ranges.append([cp, cp])
    parts = (f"\\x{{{a:X}}}" + (f"-\\x{{{b:X}}}" if b > a else "") for a, b in ranges)
    return "[" + "".join(parts) + "]"


DIGIT = _py_class(str.isdecimal)  # Python re's \d on str (Unicode category Nd)
SPACE = _py_class(str.isspace)  # Python re's \s on str, and what str.strip() removes
NBSP = "\u00a0"

EXTRA_WHITESPACE: list[Rule] = [
    (r"\r", ""),
    (r"\(", " ("),
    (r"\)", ") "),
    (r" +", " "),
    (r"\) ([.!:?;,])", ")$1"),
    (r"\( ", "("),
    (r" \)", ")"),
    (rf"({DIGIT}) %", "$1%"),
    (r" :", ":"),
    (r" ;", ";"),
]

# sacremoses applies these when penn=True (its default), despite the name.
NORMALIZE_UNICODE_IF_NOT_PENN: list[Rule] = [("`", "'"), ("''", ' " ')]

NORMALIZE_UNICODE: list[Rule] = [
    ("„", '"'),
    ("“", '"'),
    ("”", '"'),
    ("–", "-"),
    ("—", " - "),
    (r" +", " "),
    ("´", "'"),
    ("([a-zA-Z])‘([a-zA-Z])", "$1'$2"),
    ("([a-zA-Z])’([a-zA-Z])", "$1'$2"),
    ("‘", "'"),
    ("‚", "'"),
    ("’", "'"),
    ("''", '"'),
    ("´´", '"'),  # dead (´ is gone by now) but kept, as in sacremoses
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

DE_ES_CZ_CS_FR: list[Rule] = [(f"({DIGIT}){NBSP}({DIGIT})", "$1,$2")]
OTHER: list[Rule] = [(f"({DIGIT}){NBSP}({DIGIT})", "$1.$2")]

STRIP: Rule = (rf"\A{SPACE}+|{SPACE}+\z", "")  # str.strip()

_REGEX_META = set("\\^$.|?*+()[]{}")


def moses_punct_rules(lang: str) -> list[Rule]:
    """The ordered rules for ``lang``, chosen exactly as sacremoses does (case-sensitive codes:
    "en"; "de"/"es"/"fr"; "de"/"es"/"cz"/"cs"/"fr"; anything else gets the generic branch)."""
    rules = [*EXTRA_WHITESPACE, *NORMALIZE_UNICODE_IF_NOT_PENN, *NORMALIZE_UNICODE]
    rules += [*FRENCH_QUOTES, *HANDLE_PSEUDO_SPACES]
    if lang == "en":
        rules += EN_QUOTATION_FOLLOWED_BY_COMMA
    elif lang in ("de", "es", "fr"):
        rules += DE_ES_FR_QUOTATION_FOLLOWED_BY_COMMA
    rules += DE_ES_CZ_CS_FR if lang in ("de", "es", "cz", "cs", "fr") else OTHER
    return [*rules, STRIP]


def moses_punct_normalize(col: Column, lang: str) -> Column:
    """``MosesPunctNormalizer(lang=lang).normalize(s)`` for every row of a string column."""
    for pattern, replacement in moses_punct_rules(lang):
        if _REGEX_META.isdisjoint(pattern):
            # A literal: replace() works on the UTF-8 bytes, without regexp_replace's decode to
            # a Java String and back, and replaces left to right without overlap, like re.sub.
            col = F.replace(col, F.lit(pattern), F.lit(replacement))
        else:
            col = F.regexp_replace(col, pattern, replacement)
    return col

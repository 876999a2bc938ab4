"""Moses punctuation normalization over Arrow arrays (pyarrow.compute: RE2 and literal
replaces, vectorized over a batch; no per-row Python).

A rule-for-rule port of sacremoses' ``MosesPunctNormalizer(lang=lang)`` with its default
options (penn=True, norm_quote_commas=True, norm_numbers=True, pre_replace_unicode_punct=False,
post_remove_control_chars=False, perl_parity=False), itself a port of Moses'
``normalize-punctuation.perl``. The rules below are sacremoses' lists in sacremoses' order,
rewritten from Python ``re`` syntax into RE2 syntax, where they differ:

* group references in replacements are ``\\1`` (sacremoses writes ``\\g<1>``);
* ``\\d`` and ``\\s`` are ASCII-only in RE2 but Unicode in Python ``re`` on ``str``
  (``str.isdecimal`` / ``str.isspace``), so they are spelled as explicit classes (``DIGIT``,
  ``SPACE``) generated from the running Python, which also pins the Unicode version to the one
  sacremoses sees;
* the final ``str.strip()`` is ``utf8_trim`` with Python's whitespace characters;
* RE2 matches code points of UTF-8 text, as ``re`` matches those of a ``str``.

For speed, without changing any result: rules that are plain literals run as literal replaces
(no regex), `` +`` -> `` `` is spelled ``  +`` (a lone space is left as it is, not rewritten:
RE2 pays per match), and three rules that can never change the output are left out. Nothing
else needed translating: no sacremoses rule uses ``^``/``$``, an unescaped ``.``, lookaround
or case folding. Null in, null out (sacremoses would turn None into "None").

This ran as a chain of Spark column expressions until issue 28: 0.12 ms of JVM CPU per pair
(UTF8String.replace's byte-by-byte search and java.util.regex), against ~3 us per line here.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from udfs.unicode_class import chars_where, re2_class

# (RE2 pattern, replacement with \\1 group references); a pattern that is a plain literal runs
# as a literal replace, so its replacement must hold no backslash.
Rule = tuple[str, str]


DIGIT = re2_class(chars_where(str.isdecimal))  # Python re's \d on str (Unicode category Nd)
SPACE_CHARS = chars_where(str.isspace)  # Python re's \s on str, and what str.strip() strips
SPACE = re2_class(SPACE_CHARS)
NBSP = "\u00a0"

EXTRA_WHITESPACE: list[Rule] = [
    ("\r", ""),  # a literal CR
    (r"\(", " ("),
    (r"\)", ") "),
    (r"  +", " "),
    (r"\) ([.!:?;,])", r")\1"),
    (r"\( ", "("),
    (r" \)", ")"),
    (rf"({DIGIT}) %", r"\1%"),
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
    (r"  +", " "),
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
    (r"  +", " "),
]

EN_QUOTATION_FOLLOWED_BY_COMMA: list[Rule] = [(r'"([,.]+)', r'\1"')]

DE_ES_FR_QUOTATION_FOLLOWED_BY_COMMA: list[Rule] = [
    (',"', '",'),
    (rf'(\.+)"({SPACE}*[^<])', r'"\1\2'),  # don't fix period at end of sentence
]

# Both digits are consumed, as in re.sub: "1 2 3" (no-break spaces) gives "1.2 3".
DE_ES_CZ_CS_FR: list[Rule] = [(f"({DIGIT}){NBSP}({DIGIT})", r"\1,\2")]
OTHER: list[Rule] = [(f"({DIGIT}){NBSP}({DIGIT})", r"\1.\2")]


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


def moses_punct_normalize(texts: pa.Array, lang: str) -> pa.Array:
    """``MosesPunctNormalizer(lang=lang).normalize(s)`` for every string of `texts`."""
    out = texts
    for pattern, replacement in moses_punct_rules(lang):
        text = _literal(pattern)
        if text is not None:  # left to right without overlap, like re.sub
            out = pc.replace_substring(out, text, replacement)
        else:
            out = pc.replace_substring_regex(out, pattern, replacement)
    return pc.utf8_trim(out, SPACE_CHARS)  # str.strip()

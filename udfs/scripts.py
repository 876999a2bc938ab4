"""The scripts a language is written in, from ICU's locale data, not a hand table.

ICU's `uscript_getCode` (PyICU `icu.Script.getCode`) reads CLDR's likely subtags and expands
composite scripts: `bn` -> Beng, `ta` -> Taml, `ja` -> Kana Hira Hani, `ko` -> Hang Hani,
`sr` -> Cyrl. Scripts are ISO 15924 codes, which Java's regex takes as they are
(`\\p{IsBeng}`), so the script rule stays a JVM expression. A language written in more than
one script (Serbian in Latin too, Punjabi in Shahmukhi, Javanese in its own script) gets the
others from `langid.scripts` in conf/defaults.yaml, which replaces ICU's list for that
language. A code ICU knows no script for is unknown: never Latin by default.

Words: zh is cut by jieba (udfs/tokens.py); other text in a script written without spaces
between words (Han, kana, Thai, Lao, Khmer, Burmese) by ICU's dictionary word break iterator.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

import icu

# Scripts written without spaces between words: ICU's word break iterator has a dictionary
# for each (CJ, Thai, Lao, Khmer, Burmese).
UNSPACED_SCRIPTS = frozenset({"Hani", "Hira", "Kana", "Thai", "Laoo", "Khmr", "Mymr"})
# Scripts whose text uses full-width forms and CJK punctuation (Moses' rules do not apply).
CJK_SCRIPTS = frozenset({"Hani", "Hira", "Kana", "Hang"})
# The most common letters of a script as plain ranges: Java tests a class's parts in order,
# and a range test is far cheaper than a script lookup (a binary search per character).
COMMON_LETTERS = {
    "Latn": "a-zA-Z",
    "Hani": r"\u4E00-\u9FFF",
    "Hira": r"\u3041-\u3096",
    "Kana": r"\u30A1-\u30FA",
    "Cyrl": r"\u0410-\u044F",
    "Hang": r"\uAC00-\uD7A3",
}


@cache
def icu_scripts(lang: str) -> tuple[str, ...]:
    """ICU's scripts for `lang` (ISO 15924 short names), () when ICU knows none."""
    try:
        codes = icu.Script.getCode(lang)
    except icu.ICUError:
        return ()
    return tuple(icu.Script(code).getShortName() for code in codes)


def scripts_of(lang: str, overrides: Mapping[str, list[str]] | None = None) -> tuple[str, ...]:
    """The scripts `lang` is written in: the config's list when it has one, else ICU's."""
    if overrides and lang in overrides:
        return tuple(overrides[lang])
    return icu_scripts(lang)


def known_script(code: str) -> bool:
    """An ISO 15924 code ICU knows, spelled as ISO spells it (Latn, Beng, ...)."""
    try:
        codes = icu.Script.getCode(code)
    except icu.ICUError:
        return False
    return len(codes) == 1 and icu.Script(codes[0]).getShortName() == code


def script_class(scripts: tuple[str, ...]) -> str:
    """A Java regex class body matching letters of any of `scripts`: `\\p{IsBeng}\\p{IsLatn}`."""
    return "".join(f"\\p{{Is{s}}}" for s in scripts)


def common_letters(scripts: tuple[str, ...]) -> str:
    """The plain ranges of `scripts`' most common letters (a fast path before the lookup)."""
    return "".join(COMMON_LETTERS.get(s, "") for s in scripts)


def main_script(lang: str, overrides: Mapping[str, list[str]] | None = None) -> str | None:
    """The first of `lang`'s scripts (ICU lists the main one first: ko -> Hang Hani)."""
    scripts = scripts_of(lang, overrides)
    return scripts[0] if scripts else None


def unspaced(lang: str, overrides: Mapping[str, list[str]] | None = None) -> bool:
    """Whether `lang` is written without spaces between words (its words need a segmenter):
    its main script is (ja -> Kana: yes; ko -> Hang: no, though Hanja is Han)."""
    return main_script(lang, overrides) in UNSPACED_SCRIPTS


def cjk(lang: str, overrides: Mapping[str, list[str]] | None = None) -> bool:
    """Whether `lang`'s main script is Han, kana or Hangul (CJK punctuation, not Moses')."""
    return main_script(lang, overrides) in CJK_SCRIPTS

"""Language identification with Google's CLD3 (the `cld3-py` wheel, import `gcld3`; its model
is compiled into the extension), for the languages fastText lid.176 lacks: ha, xh, zu, ig,
yo, sn, st, ny, sm, mi, haw, hmn. One identifier per Python worker.

CLD3 gives no full distribution: it splits a text into spans of one language and gives each
span's language with a probability. A label's probability here is the sum, over its spans, of
span probability x the span's share of the text, so a line that is half English has at most
0.5 for English, as lid.176's distribution would say.
"""

from __future__ import annotations

from functools import cache

import gcld3

# CLD3's labels (its README's 107 languages), in sluice's codes: CLD3 says `iw` for Hebrew
# and `fil` for Tagalog/Filipino. Romanized variants (`ja-Latn`, `hi-Latn`, ...) are labels
# of their own, never a language's code.
RENAMED = {"iw": "he", "fil": "tl"}
LABELS = frozenset(
    RENAMED.get(code, code)
    for code in [
        "af", "am", "ar", "bg", "bg-Latn", "bn", "bs", "ca", "ceb", "co", "cs", "cy", "da",
        "de", "el", "el-Latn", "en", "eo", "es", "et", "eu", "fa", "fi", "fil", "fr", "fy",
        "ga", "gd", "gl", "gu", "ha", "haw", "hi", "hi-Latn", "hmn", "hr", "ht", "hu", "hy",
        "id", "ig", "is", "it", "iw", "ja", "ja-Latn", "jv", "ka", "kk", "km", "kn", "ko", "ku",
        "ky", "la", "lb", "lo", "lt", "lv", "mg", "mi", "mk", "ml", "mn", "mr", "ms", "mt",
        "my", "ne", "nl", "no", "ny", "pa", "pl", "ps", "pt", "ro", "ru", "ru-Latn", "sd", "si",
        "sk", "sl", "sm", "sn", "so", "sq", "sr", "st", "su", "sv", "sw", "ta", "te", "tg",
        "th", "tr", "uk", "ur", "uz", "vi", "xh", "yi", "yo", "zh", "zh-Latn", "zu",
    ]
)
MAX_BYTES = 1000  # CLD3 reads at most this many bytes of a text (its own default)
TOP_SPANS = 3  # languages asked for per text (spans of other languages)


@cache
def identifier() -> gcld3.NNetLanguageIdentifier:
    return gcld3.NNetLanguageIdentifier(min_num_bytes=0, max_num_bytes=MAX_BYTES)


def identify_one(ident: gcld3.NNetLanguageIdentifier, text: str
                 ) -> tuple[str, float, dict[str, float]]:
    """Top language, its probability, and each language's probability weighted by its share
    of the text (empty text -> ("", 0.0, {}))."""
    if not text.strip():
        return "", 0.0, {}
    found: dict[str, float] = {}
    spans = ident.FindTopNMostFreqLangs(text.replace("\n", " "), TOP_SPANS)
    for span in spans:
        if span.language != "und" and span.proportion > 0:
            lang = RENAMED.get(span.language, span.language)
            found[lang] = min(found.get(lang, 0.0) + span.probability * span.proportion, 1.0)
    if not spans:
        return "und", 0.0, found
    return RENAMED.get(spans[0].language, spans[0].language), float(spans[0].probability), found


def identify_all(texts: list[str]) -> tuple[list[str], list[float], list[dict[str, float]]]:
    """`identify_one` of each text, as three lists (udfs/langid_backends.py's shape)."""
    ident = identifier()
    results = [identify_one(ident, text) for text in texts]
    return [r[0] for r in results], [r[1] for r in results], [r[2] for r in results]

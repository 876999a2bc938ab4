"""Which language-ID backend reads a language, and the one call the side pass makes.

Two backends, each loaded once per Python worker: fastText lid.176 (udfs/langid.py; 176
languages, calibrated on news and Tatoeba) and CLD3 (udfs/langid_cld3.py; 107 languages, among
them ha, xh, zu, ig, yo, sn, st that lid.176 lacks). A language takes the first backend of
`langid.backends` that knows it, unless `langid.backend_by_lang` names one. Both give the same
shape (top label, its probability, every likely label's probability), so the langid rules
decide the same way whichever backend read the side (udfs/rules.py `wrong_language`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from udfs import langid as lid176
from udfs import langid_cld3 as cld3

LABELS: dict[str, frozenset[str]] = {"lid176": lid176.LABELS, "cld3": cld3.LABELS}
NAMES = {"lid176": "fastText lid.176", "cld3": "CLD3"}
DEFAULT_ORDER = ("lid176", "cld3")  # conf/defaults.yaml `langid.backends` says the same
NONE = "none"  # a language checked by its script only (`langid.skip`)


def backend_for(
    lang: str, order: Sequence[str] = DEFAULT_ORDER, by_lang: Mapping[str, str] | None = None,
    accepted: Sequence[str] | None = None,
) -> str | None:
    """The backend that reads `lang`: the configured one, else the first in `order` that knows
    it or one of its `accepted` labels (Norwegian Bokmål `nb` is `no` to both backends);
    None when none does."""
    if by_lang and lang in by_lang:
        return by_lang[lang]
    return next((name for name in order if knows(name, lang, accepted)), None)


def knows(backend: str, lang: str, accepted: Sequence[str] | None = None) -> bool:
    """Whether `backend` gives `lang`, or one of the labels accepted for it, as a label."""
    return any(label in LABELS[backend] for label in (accepted or [lang]))


def describe() -> str:
    """The backends, for an error message: `lid176 (fastText lid.176, 176 languages), ...`."""
    return ", ".join(f"{b} ({NAMES[b]}, {len(LABELS[b])} languages)" for b in LABELS)


def identify_all(
    backend: str, model_path: str, texts: list[str]
) -> tuple[list[str], list[float], list[dict[str, float]]]:
    """Top language, its probability and every likely language's probability per text, by
    `backend` (`none`: no language ID, empty results)."""
    if backend == "lid176":
        return lid176.identify_all(model_path, texts)
    if backend == "cld3":
        return cld3.identify_all(texts)
    if backend == NONE:
        return [""] * len(texts), [0.0] * len(texts), [{} for _ in texts]
    raise ValueError(f"unknown language-ID backend {backend!r}")

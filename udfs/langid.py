"""Language identification with fastText lid.176, loaded once per Python worker: the backend
for the 176 languages it knows (udfs/langid_backends.py picks one per language)."""

from __future__ import annotations

import os
import re
from functools import cache

import fasttext

from udfs.paths import shipped

LABEL_PREFIX = "__label__"
# The languages lid.176 tells apart, as its labels (__label__xx). tests/test_bad_input.py
# checks this list against the shipped model's labels.
LABELS = frozenset([
    "af", "als", "am", "an", "ar", "arz", "as", "ast", "av", "az", "azb", "ba", "bar", "bcl",
    "be", "bg", "bh", "bn", "bo", "bpy", "br", "bs", "bxr", "ca", "cbk", "ce", "ceb", "ckb",
    "co", "cs", "cv", "cy", "da", "de", "diq", "dsb", "dty", "dv", "el", "eml", "en", "eo",
    "es", "et", "eu", "fa", "fi", "fr", "frr", "fy", "ga", "gd", "gl", "gn", "gom", "gu", "gv",
    "he", "hi", "hif", "hr", "hsb", "ht", "hu", "hy", "ia", "id", "ie", "ilo", "io", "is", "it",
    "ja", "jbo", "jv", "ka", "kk", "km", "kn", "ko", "krc", "ku", "kv", "kw", "ky", "la", "lb",
    "lez", "li", "lmo", "lo", "lrc", "lt", "lv", "mai", "mg", "mhr", "min", "mk", "ml", "mn",
    "mr", "mrj", "ms", "mt", "mwl", "my", "myv", "mzn", "nah", "nap", "nds", "ne", "new", "nl",
    "nn", "no", "oc", "or", "os", "pa", "pam", "pfl", "pl", "pms", "pnb", "ps", "pt", "qu",
    "rm", "ro", "ru", "rue", "sa", "sah", "sc", "scn", "sco", "sd", "sh", "si", "sk", "sl",
    "so", "sq", "sr", "su", "sv", "sw", "ta", "te", "tg", "th", "tk", "tl", "tr", "tt", "tyv",
    "ug", "uk", "ur", "uz", "vec", "vep", "vi", "vls", "vo", "wa", "war", "wuu", "xal", "xmf",
    "yi", "yo", "yue", "zh",
])
KANA = re.compile(r"[\u3040-\u30FF\u31F0-\u31FF\uFF66-\uFF9F]")
HAN = re.compile(r"[\u3400-\u4DBF\u4E00-\u9FFF]")


@cache
def load_model(path: str) -> fasttext.FastText._FastText:
    """Resolve `path` (also a file shipped with --files / SparkContext.addFile) and load it."""
    resolved = path if os.path.exists(path) else shipped(path)
    if resolved is None:
        raise FileNotFoundError(f"fastText model not found: {path} (nor shipped to this worker)")
    fasttext.FastText.eprint = lambda *args, **kwargs: None  # silence the load warning
    return fasttext.load_model(resolved)


def correct_label(label: str, text: str) -> str:
    """lid.176 calls ~5% of short Mandarin lines `ja` (Tatoeba cmn_Hans); Japanese writing
    always has kana, so Han text without kana is Chinese."""
    if label == "ja" and not KANA.search(text) and HAN.search(text):
        return "zh"
    return label


# The stored language probabilities: lid.176's top labels down to this probability. The
# langid rules' thresholds start at 0.05, so a label below 0.01 never decides anything.
TOP_K = 10
MIN_STORED_PROB = 0.01


def identify(model_path: str, texts: list[str]) -> tuple[list[str], list[float]]:
    """Top language and its probability for each text (empty text -> ("", 0.0))."""
    langs, probs, _ = identify_all(model_path, texts)
    return langs, probs


def identify_all(
    model_path: str, texts: list[str]
) -> tuple[list[str], list[float], list[dict[str, float]]]:
    """Top language, its probability, and every language of the top TOP_K with at least
    MIN_STORED_PROB (labels after `correct_label`, so ja-without-kana adds to zh) for each text.
    Empty text -> ("", 0.0, {})."""
    model = load_model(model_path)
    lines = [t.replace("\n", " ") for t in texts]
    # A threshold prunes fastText's search (~25% less time); it sits a little under the stored
    # minimum as fastText compares in float log space (0.01 itself dropped labels at 0.010001).
    # A text with no label above it (a flat distribution) is asked again for its top label.
    labels, probs = model.predict(lines, k=TOP_K, threshold=MIN_STORED_PROB * 0.9)
    flat = [i for i, found in enumerate(labels) if len(found) == 0]
    if flat:
        top_labels, top_p = model.predict([lines[i] for i in flat], k=1)
        for i, label, prob in zip(flat, top_labels, top_p, strict=True):
            labels[i], probs[i] = label, prob
    langs: list[str] = []
    top_probs: list[float] = []
    all_probs: list[dict[str, float]] = []
    for text, text_labels, text_probs in zip(texts, labels, probs, strict=True):
        if not text.strip():
            langs.append("")
            top_probs.append(0.0)
            all_probs.append({})
            continue
        found: dict[str, float] = {}
        for label, prob in zip(text_labels, text_probs, strict=True):
            if prob >= MIN_STORED_PROB:
                lang = correct_label(label.removeprefix(LABEL_PREFIX), text)
                found[lang] = min(found.get(lang, 0.0) + float(prob), 1.0)
        top = correct_label(text_labels[0].removeprefix(LABEL_PREFIX), text)
        langs.append(top)
        top_probs.append(float(min(text_probs[0], 1.0)))
        all_probs.append(found)
    return langs, top_probs, all_probs

"""Language ID on short text: the old rule (top label + flat minimum) vs the length-aware one.

Issue 14, failure class 1: `langid_src`/`langid_tgt` rejected short valid web phrases
("Double room, shower, toilet": p(en) 0.41 < 0.5). The rule now decides on the probability
of the *expected* language (its accepted labels among lid.176's top 10 summed) against a
threshold that grows with the side's length (`udfs/rules.py: expected_lang_threshold`).

Valid text: every side of FLORES-200 devtest, NTREX-128, Tatoeba test (Mandarin lines only
for zh) and WMT22's domain test sets (conversation, e-commerce, social: the short web-style
segments). Wrong language: the same lines checked as if they were the other language of a
same-script pair (German as English, English as German: a different script is the script
check's job), and Tatoeba's Cantonese/Wu lines checked as Mandarin.

Lines are split by a hash into a calibration half (even) and a report half (odd); the
thresholds in conf/defaults.yaml were read off the calibration half; the table printed is
the report half.

    python -m bench.thresholds.langid_length [--data ../shared/data] [--out results.json]
"""

from __future__ import annotations

import argparse
import csv
import zlib
from pathlib import Path

from bench.kit import REPO, SHARED, write_json
from jobs.filtering.config import load_config
from udfs.langid import identify_all
from udfs.rules import expected_lang_threshold
from udfs.sides import SideOptions, normalize_text

BUCKETS = ((0, 10), (10, 20), (20, 30), (30, 50), (50, 80), (80, 10**6))


def tsv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8-sig").splitlines()


def load_sides(data: Path) -> tuple[dict[str, list[str]], list[str]]:
    """Valid text per language, and Tatoeba's Cantonese/Wu lines (wrong for zh)."""
    bitext = data / "bitext"
    sides: dict[str, list[str]] = {"en": [], "de": [], "ru": [], "zh": []}
    for name, columns in (("multiway_flores200_devtest.tsv", ("eng", "zho_Hans", "rus", "deu")),
                          ("multiway_ntrex128.tsv", ("eng_src", "zho_Hans", "rus", "deu"))):
        for row in tsv(bitext / name):
            for lang, column in zip(("en", "zh", "ru", "de"), columns, strict=True):
                sides[lang].append(row[column])
    for row in tsv(bitext / "wmt22_domains_en-zh.tsv"):
        sides["en"].append(row["src"])
        sides["zh"].append(row["ref_A"])
    for row in tsv(bitext / "wmt22_domains_ru-en.tsv"):
        sides["ru"].append(row["src"])
        sides["en"].append(row["ref_A"])
    tatoeba = bitext / "tatoeba"
    for pair, langs in (("deu-eng", ("de", "en")), ("eng-rus", ("en", "ru"))):
        for lang, ext in zip(langs, pair.split("-"), strict=True):
            sides[lang] += lines(tatoeba / pair / f"tatoeba-test-v2021-08-07.{ext}")
    sides["en"] += lines(tatoeba / "eng-zho/tatoeba-test-v2021-08-07.eng")
    chinese = zip(lines(tatoeba / "eng-zho/tatoeba-test-v2021-08-07.zho.labels"),
                  lines(tatoeba / "eng-zho/tatoeba-test-v2021-08-07.zho"), strict=True)
    not_mandarin = []
    for label, text in chinese:
        if label.startswith("cmn_Han"):
            sides["zh"].append(text)
        elif label.startswith(("yue", "wuu")):
            not_mandarin.append(text)
    return sides, not_mandarin


def report_half(texts: list[str]) -> list[str]:
    return [t for t in texts if t.strip() and zlib.crc32(t.encode()) % 2 == 1]


def rejected(texts: list[str], lang: str, settings: dict, model: str) -> dict[str, list]:
    """Per text: characters, the old rule's and the new rule's verdict (language part only)."""
    opts = SideOptions(lang=lang, langid_model=model)
    normalized = [normalize_text(t, opts) for t in texts]
    accepted = settings["accept"].get(lang, [lang])
    top, top_prob, all_probs = identify_all(model, normalized)
    expected = [sum(p for lang, p in probs.items() if lang in accepted) for probs in all_probs]
    old_min_chars = 0 if lang == "zh" else 20  # the old defaults: min_prob 0.5 from 20 chars
    out: dict[str, list] = {"chars": [], "old": [], "new": []}
    for text, label, p_top, p_expected in zip(normalized, top, top_prob, expected, strict=True):
        chars = len(text)
        out["chars"].append(chars)
        out["old"].append(chars >= old_min_chars and (label not in accepted or p_top < 0.5))
        threshold = expected_lang_threshold(chars, lang, settings)
        out["new"].append(threshold is not None and p_expected < threshold)
    return out


def table(name: str, verdicts: dict[str, list]) -> dict:
    rows = {}
    for lo, hi in BUCKETS:
        picked = [i for i, c in enumerate(verdicts["chars"]) if lo <= c < hi]
        if picked:
            rows[f"{lo}-{hi if hi < 10**6 else ''}"] = {
                "n": len(picked),
                "old": sum(verdicts["old"][i] for i in picked) / len(picked),
                "new": sum(verdicts["new"][i] for i in picked) / len(picked),
            }
    n = len(verdicts["chars"])
    rows["all"] = {"n": n, "old": sum(verdicts["old"]) / n, "new": sum(verdicts["new"]) / n}
    print(f"\n{name}: share rejected, old rule -> length-aware rule")
    for bucket, r in rows.items():
        print(f"  {bucket:>8} chars  n={r['n']:6d}  {r['old']:6.1%} -> {r['new']:6.1%}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    cfg = load_config(REPO / "conf/zh-en.yaml")
    settings = cfg.rule_settings
    model = str(REPO / cfg.langid.model)
    sides, not_mandarin = load_sides(args.data)
    results = {}
    for lang in ("en", "de", "ru", "zh"):
        results[f"valid {lang}"] = table(f"valid {lang}",
                                         rejected(report_half(sides[lang]), lang, settings, model))
    for text_lang, as_lang in (("de", "en"), ("en", "de")):
        results[f"{text_lang} as {as_lang}"] = table(
            f"wrong language: {text_lang} text checked as {as_lang}",
            rejected(report_half(sides[text_lang]), as_lang, settings, model))
    results["yue/wuu as zh"] = table("wrong language: Cantonese/Wu checked as Mandarin",
                                     rejected(report_half(not_mandarin), "zh", settings, model))
    if args.out:
        write_json(args.out, results)


if __name__ == "__main__":
    main()

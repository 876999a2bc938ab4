"""Language ID for every language of the seed systems: real pairs kept, wrong-language pairs
rejected, per language pair (issue 35).

Data (`../shared/data`): Tatoeba-Challenge test sets (English with ta, jv, ms, tl, ha, xh,
zu, bn, hi, is, ja), FLORES-200 devtest and NTREX-128 (en, zh, ru, de). Each pair is checked
as a run would check it: the langid decision of udfs/rules.py (script share, then the expected
language's probability against the length ramp, the configured accept-lists) on sides
normalized and identified by the side pass (udfs/sides.py), with the backend the config
picks for the language. The script share is computed here in Python with ICU's script of
each character, as the rule's JVM expression computes it.

Wrong-language pairs: each real pair twice, once with its source and once with its target
replaced by a line of another language (round-robin over the other languages' lines), so
every language is checked against every other, close relatives (xh/zu, ms/id) included.

Lines are split by a hash into a calibration half (even) and a report half (odd): settings
in conf/defaults.yaml were read off the calibration half, the table printed is the report
half (`--half all` for both).

    python -m bench.thresholds.langid_seeds [--data ../shared/data] [--half report] [--out r.json]
"""

from __future__ import annotations

import argparse
import csv
import zlib
from collections.abc import Callable
from pathlib import Path

import icu

from bench.kit import REPO, SHARED, write_json
from jobs.filtering.config import FilterConfig, load_config
from udfs.rules import expected_lang_threshold
from udfs.sides import SideOptions, analyze_texts

TATOEBA = {  # directory -> (language of column 3, of column 4)
    "eng-tam": ("en", "ta"), "eng-jav": ("en", "jv"), "eng-msa": ("en", "ms"),
    "eng-tgl": ("en", "tl"), "eng-hau": ("en", "ha"), "eng-xho": ("en", "xh"),
    "eng-zul": ("en", "zu"), "ben-eng": ("bn", "en"), "eng-hin": ("en", "hi"),
    "eng-isl": ("en", "is"), "eng-jpn": ("en", "ja"),
}
MULTIWAY = {"multiway_flores200_devtest.tsv": ("eng", "zho_Hans", "rus", "deu"),
            "multiway_ntrex128.tsv": ("eng_src", "zho_Hans", "rus", "deu")}
MULTIWAY_LANGS = ("en", "zh", "ru", "de")
MULTIWAY_PAIRS = (("zh", "en"), ("de", "en"), ("ru", "zh"))


def in_half(text: str, half: str) -> bool:
    if half == "all":
        return True
    return zlib.crc32(text.encode()) % 2 == (0 if half == "calibration" else 1)


def load_pairs(data: Path, half: str) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(src lang, tgt lang) -> real pairs, foreign language first where English is one side."""
    pairs: dict[tuple[str, str], list[tuple[str, str]]] = {}
    root = data / "bitext" / "tatoeba-challenge"
    for name, (a, b) in TATOEBA.items():
        rows = []
        for line in (root / name / "test.txt").read_text(encoding="utf-8").splitlines():
            fields = line.split("\t")
            if len(fields) == 4 and in_half(fields[2] + fields[3], half):
                rows.append((fields[2], fields[3]))
        if a == "en":  # foreign language as the source, as the seed systems' xx-en pairs
            a, b, rows = b, a, [(y, x) for x, y in rows]
        pairs[(a, b)] = rows
    multi: dict[str, list[str]] = {lang: [] for lang in MULTIWAY_LANGS}
    for name, columns in MULTIWAY.items():
        with (data / "bitext" / name).open(encoding="utf-8") as f:
            for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                if in_half(row[columns[0]], half):
                    for lang, column in zip(MULTIWAY_LANGS, columns, strict=True):
                        multi[lang].append(row[column])
    for a, b in MULTIWAY_PAIRS:
        pairs[(a, b)] = list(zip(multi[a], multi[b], strict=True))
    return pairs


def script_share(text: str, scripts: tuple[str, ...]) -> float | None:
    """udfs/rules.py `script_share` in Python: letters in the scripts over those plus runs of
    other letters; ASCII-only text is 1 for Latin-script languages, else 0."""
    if text.isascii():
        return (1.0 if "Latn" in scripts else 0.0) if any(c.isalpha() for c in text) else None
    in_script, runs, in_run = 0, 0, False
    for ch in text:
        if not ch.isalpha():
            in_run = False
            continue
        if icu.Script.getScript(ch).getShortName() in scripts:
            in_script += 1
            in_run = False
        elif not in_run:
            runs, in_run = runs + 1, True
    return in_script / (in_script + runs) if in_script + runs else None


def side_checker(cfg: FilterConfig, lang: str) -> Callable[[list[str]], list[bool]]:
    """The langid decision for `lang` sides: True where a side passes."""
    opts = SideOptions(lang, str(REPO / cfg.langid.model), langid_backend=cfg.langid.backend(lang))
    settings = cfg.rule_settings
    scripts = cfg.langid.scripts_of(lang)
    accepted = settings["accept"].get(lang, [lang])

    def check(texts: list[str]) -> list[bool]:
        df = analyze_texts(texts, opts)
        passed = []
        for text, chars, probs in zip(df["text"], df["chars"], df["lang_probs"], strict=True):
            share = script_share(text, scripts)
            if share is not None and share < settings["min_script_share"]:
                passed.append(False)
                continue
            if lang in settings["skip"]:
                passed.append(True)
                continue
            need = expected_lang_threshold(int(chars), lang, settings)
            prob = sum(p for label, p in (probs or {}).items() if label in accepted)
            passed.append(need is None or prob >= need)
        return passed

    return check


def measure(cfg: FilterConfig, pairs: dict[tuple[str, str], list[tuple[str, str]]]) -> list[dict]:
    pool = [(lang, text) for (a, b), rows in pairs.items()
            for lang, texts in ((a, [r[0] for r in rows]), (b, [r[1] for r in rows]))
            for text in texts]
    checkers: dict[str, Callable[[list[str]], list[bool]]] = {}
    results = []
    for (a, b), rows in pairs.items():
        for lang in (a, b):
            checkers.setdefault(lang, side_checker(cfg, lang))

        def others(lang: str, offset: int, n: int = len(rows)) -> list[str]:
            """n lines of languages other than `lang`, spread over the whole pool."""
            foreign = [text for other, text in pool if other != lang]
            step = max(len(foreign) // max(n, 1), 1)
            return [foreign[(offset + i * step) % len(foreign)] for i in range(n)]

        src_ok = checkers[a]([r[0] for r in rows])
        tgt_ok = checkers[b]([r[1] for r in rows])
        kept = sum(s and t for s, t in zip(src_ok, tgt_ok, strict=True))
        wrong_src = checkers[a](others(a, 0))  # a foreign line as the source
        wrong_tgt = checkers[b](others(b, 1))
        rejected = (sum(not (w and t) for w, t in zip(wrong_src, tgt_ok, strict=True))
                    + sum(not (s and w) for s, w in zip(src_ok, wrong_tgt, strict=True)))
        results.append({
            "pair": f"{a}-{b}",
            "backends": f"{cfg.langid.backend(a)}/{cfg.langid.backend(b)}",
            "pairs": len(rows),
            "kept": kept / len(rows),
            "src_kept": sum(src_ok) / len(rows),
            "tgt_kept": sum(tgt_ok) / len(rows),
            "wrong_rejected": rejected / (2 * len(rows)),
        })
    return results


def close_relatives(cfg: FilterConfig, pairs: dict) -> list[dict]:
    """Each side of a close relative checked as the other: how often it passes."""
    by_lang = {lang: texts for (a, b), rows in pairs.items()
               for lang, texts in ((a, [r[0] for r in rows]), (b, [r[1] for r in rows]))}
    out = []
    for actual, checked_as in (("xh", "zu"), ("zu", "xh"), ("hi", "bn"), ("bn", "hi")):
        passed = side_checker(cfg, checked_as)(by_lang[actual])
        out.append({"text": actual, "checked_as": checked_as,
                    "passed": sum(passed) / len(passed), "lines": len(passed)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED)
    parser.add_argument("--half", choices=("calibration", "report", "all"), default="report")
    parser.add_argument("--set", action="append", default=[], help="config override")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    cfg = load_config(overrides=args.set, extra={"pair": "zh-en"})
    pairs = load_pairs(args.data, args.half)
    results = measure(cfg, pairs)
    print(f"{'pair':8} {'backends':14} {'pairs':>6} {'kept':>7} {'wrong rejected':>15}")
    for r in results:
        print(f"{r['pair']:8} {r['backends']:14} {r['pairs']:6d} {r['kept']:7.1%} "
              f"{r['wrong_rejected']:15.1%}   (src {r['src_kept']:.1%}, tgt {r['tgt_kept']:.1%})")
    relatives = close_relatives(cfg, pairs)
    for r in relatives:
        print(f"{r['text']} lines checked as {r['checked_as']}: {r['passed']:.1%} pass "
              f"({r['lines']} lines)")
    if args.out:
        write_json(args.out, {"half": args.half, "pairs": results,
                              "close_relatives": relatives})


if __name__ == "__main__":
    main()

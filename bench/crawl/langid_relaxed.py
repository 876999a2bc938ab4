"""Would a more lenient language ID keep valid crawl lines without letting wrong-language
ones through (issue 39, item 3)?

Valid Slovenian, Slovak, Danish and Norwegian crawl lines are where the target side's
language ID loses most (docs/filtering.md, the rule-loss table): lid.176 often puts the
expected language first but spreads the rest over its neighbours (`sl` 0.26, `bs` 0.18, `sh`
0.11), so p(expected) stays under the length ramp's threshold. Each variant here passes what
the shipped rule passes (udfs/rules.py `wrong_language`, conf/defaults.yaml, through the side
pass of udfs/sides.py) and also:

- `top_half`: a side whose top label is accepted, at half the threshold;
- `cld3_sure`: a side CLD3 gives an accepted label at >= 0.95, from 20 characters;
- `both_top`: a side whose top label is accepted by lid.176 and by CLD3.

Judged on ParaCrawl's human labels, target sides only (the languages in question): valid (V)
pairs' sides kept, wrong-language (L) pairs' sides rejected, and the balanced accuracy of the
two, pooled over the 25 languages of each release. A variant is worth shipping only if it
raises the balanced accuracy on release 6 (calibration) and on release 7.

    python -m bench.crawl.langid_relaxed [--releases paracrawl-v6-validation ...] [--out r.json]

A few minutes on 2 cores: the side pass and CLD3 on each V and L target side, no Spark.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import cache
from pathlib import Path

from bench.crawl.rule_loss import LABELS, labelled_pairs
from bench.kit import REPO, write_json
from bench.thresholds.langid_seeds import script_share
from jobs.filtering.config import FilterConfig, load_config
from udfs.langid_cld3 import identify_all as cld3_identify
from udfs.rules import expected_lang_threshold
from udfs.sides import SideOptions, analyze_texts

RELEASES = ("paracrawl-v6-validation", "paracrawl-v7-validation")
VARIANTS = ("shipped", "top_half", "cld3_sure", "both_top")
CLD3_SURE, CLD3_MIN_CHARS = 0.95, 20
Verdict = Callable[[str, int, str, dict, str, float], bool]


@cache
def config() -> FilterConfig:
    """The defaults (every langid setting is per language, so any pair's config will do)."""
    return load_config(extra={"pair": "zh-en"})


def verdicts(lang: str) -> dict[str, Verdict]:
    """Variant -> (text, chars, the side pass's top label, its label probabilities, CLD3's
    top label, its probability) -> whether a side of `lang` passes."""
    settings, scripts = config().rule_settings, config().langid.scripts_of(lang)
    accepted = set(settings["accept"].get(lang, [lang]))

    def shipped(text: str, chars: int, top: str, probs: dict, c_top: str, c_p: float) -> bool:
        share = script_share(text, scripts)
        if share is not None and share < settings["min_script_share"]:
            return False
        need = expected_lang_threshold(chars, lang, settings)
        return need is None or sum(p for k, p in probs.items() if k in accepted) >= need

    def top_half(text, chars, top, probs, c_top, c_p) -> bool:
        need = expected_lang_threshold(chars, lang, settings) or 0.0
        prob = sum(p for k, p in probs.items() if k in accepted)
        return shipped(text, chars, top, probs, c_top, c_p) or (
            top in accepted and prob >= need / 2)

    def cld3_sure(text, chars, top, probs, c_top, c_p) -> bool:
        return shipped(text, chars, top, probs, c_top, c_p) or (
            c_top in accepted and c_p >= CLD3_SURE and chars >= CLD3_MIN_CHARS)

    def both_top(text, chars, top, probs, c_top, c_p) -> bool:
        return shipped(text, chars, top, probs, c_top, c_p) or (
            top in accepted and c_top in accepted)

    return {"shipped": shipped, "top_half": top_half, "cld3_sure": cld3_sure,
            "both_top": both_top}


def measure_language(path: Path, lang: str) -> dict[str, dict[str, list[int]]]:
    """Variant -> {"V": [kept, of], "L": [rejected, of]} for one `sorted.en-xx` file."""
    rows = [(tgt, label) for _, tgt, label in labelled_pairs(path) if label in ("V", "L")]
    texts = [tgt for tgt, _ in rows]
    side = analyze_texts(texts, SideOptions(lang, str(REPO / config().langid.model),
                                            langid_backend=config().langid.backend(lang)))
    c_top, c_p, _ = cld3_identify(list(side["text"]))
    counts = {v: {"V": [0, 0], "L": [0, 0]} for v in VARIANTS}
    checks = verdicts(lang)
    for i, (_, label) in enumerate(rows):
        args = (side["text"][i], int(side["chars"][i]), side["lang"][i],
                side["lang_probs"][i] or {}, c_top[i], c_p[i])
        for variant, check in checks.items():
            passed = check(*args)
            counts[variant][label][0] += passed if label == "V" else not passed
            counts[variant][label][1] += 1
    return counts


def measure(release: str) -> dict[str, dict]:
    by_lang = {}
    for path in sorted((LABELS / release).glob("sorted.en-*")):
        by_lang[path.name.rsplit("-", 1)[1]] = measure_language(path, path.name.rsplit("-", 1)[1])
    pooled = {}
    for variant in VARIANTS:
        kept = sum(c[variant]["V"][0] for c in by_lang.values())
        valid = sum(c[variant]["V"][1] for c in by_lang.values())
        rejected = sum(c[variant]["L"][0] for c in by_lang.values())
        wrong = sum(c[variant]["L"][1] for c in by_lang.values())
        pooled[variant] = {"valid_kept": kept / valid, "wrong_rejected": rejected / wrong,
                           "balanced": (kept / valid + rejected / wrong) / 2}
    return {"pooled": pooled, "by_lang": by_lang}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--releases", nargs="+", default=list(RELEASES))
    ap.add_argument("--out", type=Path, help="the figures as JSON")
    args = ap.parse_args(argv)
    result = {release: measure(release) for release in args.releases}
    print("| release | variant | valid kept | wrong language rejected | balanced |\n"
          "|---|---|---|---|---|")
    for release, found in result.items():
        for variant, f in found["pooled"].items():
            print(f"| {release} | {variant} | {f['valid_kept']:.1%} | {f['wrong_rejected']:.1%}"
                  f" | {f['balanced']:.1%} |")
    if args.out:
        write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How much of ParaCrawl's "wrong language" label can sentence-level language ID see (issue 39)?

Issue 39 asks that the filter reject 95% of the human-labelled wrong-language (L) crawl pairs
while keeping 90% of the valid (V) ones. This measures the most any sentence-level language
ID can do towards that: for each L pair, whether the side the annotator flagged
(`L_sentence_source` / `L_sentence_target` in the comments; both sides when unsaid) has a
top-1 label outside the languages sluice accepts for it (conf/defaults.yaml `langid.accept`),
by fastText lid.176 and by CLD3; and for each V pair, whether either side has. A rule on the
top-1 label alone rejects at most the first share of L pairs, at the cost of the second of V
pairs (sluice's rule is more lenient on short text: docs/filtering.md "Language ID").

    python -m bench.crawl.langid_ceiling [--release paracrawl-v7-validation] [--out result.json]

Seconds: one prediction per side, no Spark.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from bench.crawl.rule_loss import LABELS
from bench.kit import REPO, write_json

BACKENDS = ("lid176", "cld3")


def flagged_sides(path: Path) -> list[tuple[str, str, str, tuple[bool, bool]]]:
    """(en, xx, label, (source flagged, target flagged)) of the V and L pairs of a
    `sorted.en-xx` file of release 6 or later."""
    rows = []
    for line in path.read_text(encoding="utf-8", errors="replace").split("\n"):
        fields = [f.replace("\r", " ") for f in line.split("\t")]
        if len(fields) < 6 or fields[5].strip() not in ("V", "L"):
            continue
        comment = fields[6] if len(fields) > 6 else ""
        source, target = "L_sentence_source" in comment, "L_sentence_target" in comment
        rows.append((fields[2], fields[3], fields[5].strip(),
                     (source, target) if source or target else (True, True)))
    return rows


def predictors() -> dict[str, object]:
    """Top-1 label of a line, per backend."""
    import fasttext
    import gcld3

    fasttext.FastText.eprint = lambda *args, **kwargs: None  # its load warning
    lid = fasttext.load_model(str(REPO / "models" / "lid.176.ftz"))
    cld3 = gcld3.NNetLanguageIdentifier(0, 1000)
    return {
        "lid176": lambda text: lid.predict(" ".join(text.split()))[0][0].removeprefix(
            "__label__"),
        "cld3": lambda text: cld3.FindLanguage(text).language,
    }


def measure(release: str) -> dict[str, dict]:
    from jobs.filtering.config import load_config

    top1 = predictors()
    out: dict[str, dict] = {}
    for path in sorted((LABELS / release).glob("sorted.en-*")):
        lang = path.name.rsplit("-", 1)[1]
        accept = load_config(None, [], {"pair": f"en-{lang}"}).langid.accept
        wanted = ({*accept.get("en", ["en"])}, {*accept.get(lang, [lang])})
        counts: Counter = Counter()
        for en, xx, label, flagged in flagged_sides(path):
            sides = [text for text, on in zip((en, xx), flagged, strict=True) if on] \
                if label == "L" else [en, xx]
            expected = [want for want, on in zip(wanted, flagged, strict=True) if on] \
                if label == "L" else list(wanted)
            counts[label] += 1
            wrong = {b: any(top1[b](t) not in w for t, w in zip(sides, expected, strict=True))
                     for b in BACKENDS}
            for backend, is_wrong in wrong.items():
                counts[label, backend] += is_wrong
            counts[label, "either"] += any(wrong.values())
        out[lang] = {label: {"pairs": counts[label],
                             **{b: counts[label, b] / max(counts[label], 1)
                                for b in (*BACKENDS, "either")}}
                     for label in ("V", "L")}
    return out


def table(result: dict[str, dict]) -> str:
    lines = ["| lang | L pairs | L flagged side off by lid.176 | by CLD3 | by either | "
             "V with a side off by lid.176 | by CLD3 |", "|---|---|---|---|---|---|---|"]
    total: Counter = Counter()
    for lang, r in result.items():
        lines.append(f"| {lang} | {r['L']['pairs']} | {r['L']['lid176']:.0%} | "
                     f"{r['L']['cld3']:.0%} | {r['L']['either']:.0%} | {r['V']['lid176']:.0%} | "
                     f"{r['V']['cld3']:.0%} |")
        for label in ("V", "L"):
            total[label] += r[label]["pairs"]
            for b in (*BACKENDS, "either"):
                total[label, b] += r[label][b] * r[label]["pairs"]
    share = {key: total[key] / max(total[key[0]], 1) for key in total if isinstance(key, tuple)}
    lines.append(f"| all | {total['L']} | {share['L', 'lid176']:.0%} | {share['L', 'cld3']:.0%} "
                 f"| {share['L', 'either']:.0%} | {share['V', 'lid176']:.0%} | "
                 f"{share['V', 'cld3']:.0%} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", default="paracrawl-v7-validation")
    ap.add_argument("--out", type=Path, help="the figures as JSON")
    args = ap.parse_args(argv)
    result = measure(args.release)
    print(table(result))
    if args.out:
        write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

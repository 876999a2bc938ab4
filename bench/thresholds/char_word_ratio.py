"""How often `char_word_ratio`'s range ([1.5, 12], zh [1.0, 4.0]) rejects human-written text
(newstest and FLORES devtest, which should pass), by the side's token count: the data behind
`rules.char_word_min_tokens` (conf/defaults.yaml).

    python -m bench.thresholds.char_word_ratio
"""

from __future__ import annotations

from bench.kit import SHARED
from jobs.filtering.config import load_config
from udfs.tokens import tokenize

FLORES = {"eng": "en", "zho_Hans": "zh", "rus": "ru", "deu": "de"}


def texts() -> dict[str, list[str]]:
    out = {lang: (SHARED / f"mono/newstest_all.{lang}.txt").read_text("utf-8").splitlines()
           for lang in FLORES.values()}
    header, *rows = (SHARED / "bitext/multiway_flores200_devtest.tsv").read_text(
        "utf-8").splitlines()
    names = header.split("\t")
    for row in rows:
        fields = row.split("\t")
        if len(fields) == len(names):
            for name, text in zip(names, fields, strict=True):
                out[FLORES[name]].append(text)
    return out


def main() -> None:
    rules = load_config(None, [], {"pair": "de-en"}).rules
    print("| language | segments < 3 tokens | rejected | segments >= 3 tokens | rejected |")
    print("|---|---|---|---|---|")
    for lang, lines in texts().items():
        limits = rules.char_word_ratio_by_lang.get(lang, rules.char_word_ratio)
        short, long = [0, 0], [0, 0]
        for line in lines:
            tokens = tokenize(line, lang)
            if not tokens:
                continue
            ratio = len(line.replace(" ", "")) / len(tokens)
            bucket = short if len(tokens) < 3 else long
            bucket[0] += 1
            bucket[1] += not (limits.min <= ratio <= limits.max)
        print(f"| {lang} | {short[0]:,} | {short[1] / max(short[0], 1):.2%} | {long[0]:,} | "
              f"{long[1] / max(long[0], 1):.2%} |")


if __name__ == "__main__":
    main()

"""Train an n-gram language model of one language for the filter's `lm` scorer (udfs/side_lm.py).

    python jobs/train_lm.py --lang zh --order 5 --out models/lm/zh.binlm news.2020.zh.gz

Text files, one sentence a line (plain or gzip), tokenized as the scorer reads a side
(udfs/ngram.py `lm_tokens`: characters for zh/ja/th, lowercased words elsewhere) and trained
with KenLM's lmplz (VariKN where lmplz is missing). Train it on clean text of the domain the
bitext should read like (news for a news system), not on the bitext it will judge. No Spark.
"""

from __future__ import annotations

import argparse
import gzip
import sys
from collections.abc import Iterator
from pathlib import Path

from jobs.kit.errors import EXIT_USAGE, InputError
from udfs.ngram import MAX_ORDER, lm_tokens, train_lm


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="jobs/train_lm.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", type=Path, help="text, one sentence a line (.gz too)")
    p.add_argument("--lang", required=True, help="ISO 639 code of the text's language")
    p.add_argument("--order", type=int, default=5, help=f"n-gram order, 2..{MAX_ORDER}")
    p.add_argument("--out", required=True, help="the model file to write (a KenLM binary)")
    return p.parse_args(argv)


def lines(files: list[Path], lang: str) -> Iterator[str]:
    for path in files:
        opener = gzip.open if path.suffix == ".gz" else open
        try:
            with opener(path, "rt", encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    if "\x00" in line:
                        raise InputError(f"{path}:{number}: a NUL byte: not a text file")
                    yield lm_tokens(line, lang)
        except (OSError, UnicodeDecodeError) as err:
            raise InputError(f"{path}: {err}") from None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not 2 <= args.order <= MAX_ORDER:
        print(f"sluice: error: --order must be 2..{MAX_ORDER}", file=sys.stderr)
        return EXIT_USAGE
    try:
        train_lm(lines(args.files, args.lang), args.order, args.out)
    except (InputError, ValueError) as err:
        print(f"sluice: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    print(f"{args.out}: {args.order}-gram {args.lang} LM")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

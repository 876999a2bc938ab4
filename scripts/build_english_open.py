"""Rebuild conf/lm/en-open.txt.gz, the openly licensed English text the shipped English LM is
trained on (conf/lm/README.md says what it is and why), from ../shared/data/bitext/.

    python scripts/build_english_open.py [--shared ../shared] [--out conf/lm/en-open.txt.gz]

Only a maintainer runs this (the file is committed; `make setup` trains the LM from it): the
English of FLORES-200 devtest and NTREX-128 (CC-BY-SA 4.0), TICO-19's test set (CC0) and the
OpenNMT toy en-de source side (MIT, its HTML escapes undone), each line once, in that order;
never the English of the labelled en-de dev set drawn from the same toy data
(tests/data/labelled/opennmt-toy-ende-400.tsv, which bench/crawl/dev_set.py judges the shipped
pair_score on).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import html
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEV_SET = REPO / "tests/data/labelled/opennmt-toy-ende-400.tsv"


def spaced(line: str) -> str:
    return " ".join(line.split())


def held_out() -> set[str]:
    """The dev set's English sides, as they read once their escapes are undone."""
    return {spaced(html.unescape(row["en"])) for row in column_rows(DEV_SET)}


def column_rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def column(path: Path, name: str) -> Iterator[str]:
    for row in column_rows(path):
        yield row[name]


def plain(path: Path, unescape: bool = False) -> Iterator[str]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            yield html.unescape(line) if unescape else line


def sources(bitext: Path) -> Iterator[str]:
    yield from column(bitext / "multiway_flores200_devtest.tsv", "eng")
    yield from column(bitext / "multiway_ntrex128.tsv", "eng_src")
    for pair in ("en-ru", "en-zh"):
        yield from plain(bitext / "tico19" / pair / "tico19-test.en")
    for part in ("train", "val", "test"):
        yield from plain(bitext / "opennmt-toy-ende" / "data" / f"src-{part}.txt", unescape=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    p.add_argument("--out", type=Path, default=REPO / "conf" / "lm" / "en-open.txt.gz")
    args = p.parse_args()
    seen, kept = held_out(), []
    for line in sources(args.shared / "data" / "bitext"):
        line = spaced(line)
        if line and line not in seen:
            seen.add(line)
            kept.append(line + "\n")
    # mtime 0: the same text gives the same bytes (a rebuild changes nothing in git)
    args.out.write_bytes(gzip.compress("".join(kept).encode(), compresslevel=9, mtime=0))
    print(f"{args.out}: {len(kept):,} lines")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

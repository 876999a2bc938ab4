"""Build tests/data/select/: a small multi-domain zh-en pool and held-apart seeds.

    python -m bench.downstream.make_select_sample   # from the repository root, ../shared beside it

Each domain's pairs are deduplicated (no line repeated on either side) and shuffled with seed
12; the first SEED_PAIRS are its seed, the next POOL_PAIRS its share of the pool.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

from bench.kit import SHARED

BITEXT = SHARED / "bitext"
OUT = Path("tests/data/select")
SEED_PAIRS, POOL_PAIRS = 120, 150


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def tico19() -> list[tuple[str, str]]:
    base = BITEXT / "tico19/en-zh/tico19-test"
    return list(zip(lines(Path(f"{base}.zh")), lines(Path(f"{base}.en")), strict=True))


def multiway(name: str) -> list[tuple[str, str]]:
    with open(BITEXT / name, encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    return [(r[1], r[0]) for r in rows]


def tatoeba() -> list[tuple[str, str]]:
    base = BITEXT / "tatoeba/eng-zho/tatoeba-test-v2021-08-07"
    labels = lines(Path(f"{base}.zho.labels"))
    pairs = zip(lines(Path(f"{base}.zho")), lines(Path(f"{base}.eng")), labels, strict=True)
    return [(zh, en) for zh, en, label in pairs if label == "cmn_Hans"]


def distinct(pairs: list[tuple[str, str]], rng: random.Random) -> list[tuple[str, str]]:
    """Shuffled pairs with no line seen twice (so a seed line never reappears in the pool)."""
    pairs = [p for p in dict.fromkeys(pairs) if all(x.strip() and "\t" not in x for x in p)]
    rng.shuffle(pairs)
    seen: set[str] = set()
    kept = []
    for zh, en in pairs:
        if zh not in seen and en not in seen:
            seen |= {zh, en}
            kept.append((zh, en))
    return kept


def main() -> None:
    domains = {
        "medical": tico19(),
        "news": multiway("multiway_ntrex128.tsv"),
        "wiki": multiway("multiway_flores200_devtest.tsv"),
        "conversation": tatoeba(),
    }
    rng = random.Random(12)
    OUT.mkdir(parents=True, exist_ok=True)
    pool = []
    for name, pairs in domains.items():
        kept = distinct(pairs, rng)
        seed = kept[:SEED_PAIRS]
        pool += [(zh, en, name) for zh, en in kept[SEED_PAIRS : SEED_PAIRS + POOL_PAIRS]]
        if name in ("medical", "news"):
            for side, lang in ((0, "zh"), (1, "en")):
                text = "".join(pair[side] + "\n" for pair in seed)
                (OUT / f"seed-{name}.{lang}").write_text(text, encoding="utf-8")
    rng.shuffle(pool)
    text = "".join(f"{zh}\t{en}\t{name}\n" for zh, en, name in pool)
    (OUT / "pool-zh-en.tsv").write_text(text, encoding="utf-8")
    print(f"{len(pool)} pool pairs in {OUT}")


if __name__ == "__main__":
    main()

"""How often `unbalanced_brackets` rejects newstest pairs (human translations, which should
pass): comparing the two sides' bracket/quote profiles (udfs/brackets.py) against counting each
side's imbalance on its own (the rule before: a quotation split at a sentence boundary on
both sides was rejected).

    python bench/bracket_rule.py        # every newstest direction in ../shared/data
"""

from __future__ import annotations

from pathlib import Path

from udfs.brackets import bracket_profile

NEWSTEST = Path(__file__).resolve().parent.parent.parent / "shared/data/bitext/newstest"


def pairs(direction: Path) -> list[tuple[str, str]]:
    src, tgt = direction.name.split("-")
    out = []
    for src_file in sorted(direction.glob(f"*.{src}")):
        tgt_file = src_file.with_suffix(f".{tgt}")
        a = src_file.read_text(encoding="utf-8").splitlines()
        b = tgt_file.read_text(encoding="utf-8").splitlines()
        out += list(zip(a, b, strict=True))
    return out


def main() -> None:
    print("| direction | pairs | per-side imbalance (before) | profiles differ (now) |")
    print("|---|---|---|---|")
    for direction in sorted(p for p in NEWSTEST.iterdir() if p.is_dir()):
        found = pairs(direction)
        before = now = 0
        for src, tgt in found:
            a, b = bracket_profile(src), bracket_profile(tgt)
            before += any(a) or any(b)
            now += a != b
        print(f"| {direction.name} | {len(found):,} | {before / len(found):.2%} | "
              f"{now / len(found):.2%} |")


if __name__ == "__main__":
    main()

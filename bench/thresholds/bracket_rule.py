"""How often `unbalanced_brackets` rejects newstest pairs (human translations, which should
pass), three ways: each side's brackets and quotes on its own (the first rule: a quotation
split at a sentence boundary on both sides was rejected); the two sides' profiles compared
(issue 14: a bracket left open on both sides passed); and today's rule (issue 23: brackets on
each side on its own, as the seed systems filter sentences; double quotes compared across
the sides).

    python -m bench.thresholds.bracket_rule        # every newstest direction in ../shared/data
"""

from __future__ import annotations

from pathlib import Path

from bench.kit import SHARED
from udfs.brackets import bracket_profile

NEWSTEST = SHARED / "bitext" / "newstest"


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
    print("| direction | pairs | per side (first) | profiles differ (issue 14) | now |")
    print("|---|---|---|---|---|")
    for direction in sorted(p for p in NEWSTEST.iterdir() if p.is_dir()):
        found = pairs(direction)
        first = compared = now = 0
        for src, tgt in found:
            a, b = bracket_profile(src), bracket_profile(tgt)
            first += any(a) or any(b)
            compared += a != b
            now += any(a[:-1]) or any(b[:-1]) or a[-1] != b[-1]
        n = len(found)
        print(f"| {direction.name} | {n:,} | {first / n:.2%} | {compared / n:.2%} | "
              f"{now / n:.2%} |")

if __name__ == "__main__":
    main()

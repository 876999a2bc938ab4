"""Differential check and timing of udfs.moses_punct (Arrow, RE2) against sacremoses on the full
shared corpora.

    .venv/bin/python -m bench.throughput.moses_punct_diff [--data ../shared/data]

For each corpus: lines compared, lines sacremoses changes, lines where the Arrow chain differs
from sacremoses (with the first few), and the time per line of each (one thread; the best of
--repeat runs). Exits 1 if any line differs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pyarrow as pa
from sacremoses import MosesPunctNormalizer

from bench.kit import SHARED
from udfs.moses_punct import moses_punct_normalize

CORPORA = [  # (lang, path under the data root)
    ("en", "mono/newstest_all.en.txt"),
    ("de", "mono/newstest_all.de.txt"),
    ("ru", "mono/newstest_all.ru.txt"),
    ("zh", "mono/newstest_all.zh.txt"),
    ("en", "bitext/opennmt-toy-ende/data/src-train.txt"),
    ("de", "bitext/opennmt-toy-ende/data/tgt-train.txt"),
]


def read_lines(path: Path) -> list[str]:
    with path.open(encoding="utf-8", newline="\n") as f:  # keep \r inside lines
        text = f.read()
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")


def best_of(n: int, fn) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def run(lang: str, path: Path, examples: int, repeat: int) -> tuple[int, int]:
    lines = read_lines(path)
    normalizer = MosesPunctNormalizer(lang=lang)
    want = [normalizer.normalize(s) for s in lines]
    texts = pa.array(lines, pa.string())
    got = moses_punct_normalize(texts, lang).to_pylist()
    bad = [(i, s, g, w) for i, (s, g, w) in enumerate(zip(lines, got, want, strict=True)) if g != w]
    changed = sum(s != w for s, w in zip(lines, want, strict=True))

    t_ref = best_of(repeat, lambda: [normalizer.normalize(s) for s in lines])
    t_arrow = best_of(repeat, lambda: moses_punct_normalize(texts, lang))
    per_ref, per_arrow = t_ref / len(lines) * 1e6, t_arrow / len(lines) * 1e6

    print(f"\n{lang}  {path}")
    print(f"  lines compared {len(lines):>8,}   changed by sacremoses {changed:>7,}")
    print(f"  lines differing {len(bad):>7,}")
    for i, s, g, w in bad[:examples]:
        print(f"    line {i + 1}: {s[:200]!r}\n      arrow:      {g[:200]!r}")
        print(f"      sacremoses: {w[:200]!r}")
    print(f"  sacremoses {per_ref:6.2f} us/line   Arrow chain {per_arrow:6.2f} us/line"
          f"   sacremoses/Arrow = {per_ref / per_arrow:.1f}x")
    return len(lines), len(bad)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=SHARED)
    ap.add_argument("--examples", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3, help="timing runs; the best is kept")
    args = ap.parse_args()
    total = differing = 0
    for lang, rel in CORPORA:
        n, d = run(lang, args.data / rel, args.examples, args.repeat)
        total, differing = total + n, differing + d
    print(f"\nall corpora: {total:,} lines compared, {differing:,} differing")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())

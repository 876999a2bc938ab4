"""How often `unbalanced_brackets` rejects newstest pairs (human translations, which should
pass): comparing the two sides' bracket/quote profiles (udfs/rules.py) against counting each
side's imbalance on its own (the rule before: a quotation split at a sentence boundary on
both sides was rejected).

    python bench/bracket_rule.py        # every newstest direction in ../shared/data
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import functions as F

from jobs.session import build_session
from udfs.rules import bracket_mismatch, bracket_profile

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
    spark = build_session("bracket-rule", "/tmp/bracket-rule-lake", master="local[2]")
    print("| direction | pairs | per-side imbalance (before) | profiles differ (now) |")
    print("|---|---|---|---|")
    for direction in sorted(p for p in NEWSTEST.iterdir() if p.is_dir()):
        df = spark.createDataFrame(pairs(direction), "src string, tgt string")
        each_side = sum((F.abs(x) for x in bracket_profile(F.col("src"))), F.lit(0)) + sum(
            (F.abs(x) for x in bracket_profile(F.col("tgt"))), F.lit(0))
        row = df.agg(F.count("*").alias("n"),
                     F.sum((each_side > 0).cast("int")).alias("before"),
                     F.sum((bracket_mismatch(F.col("src"), F.col("tgt")) > 0).cast("int"))
                     .alias("now")).first()
        print(f"| {direction.name} | {row.n:,} | {row.before / row.n:.2%} | "
              f"{row.now / row.n:.2%} |")
    spark.stop()


if __name__ == "__main__":
    main()

"""Differential check and timing of udfs.moses_punct against sacremoses on the full shared corpora.

    .venv/bin/python bench/moses_punct_diff.py [--master 'local[1]'] [--data ../shared/data]

For each corpus: lines compared, lines sacremoses changes, lines where the native Spark chain
differs from sacremoses (with the first few), and the time per line of each. Python is one
thread, so the default master is local[1]: the ratio is then per core. Both timings are the
best of --repeat runs; the Spark one is the chain alone: the input is cached first and a plain
pass over it (noop sink) is subtracted.
Exits 1 if any line differs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from sacremoses import MosesPunctNormalizer

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from udfs.moses_punct import moses_punct_normalize  # noqa: E402

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


def noop(df: DataFrame) -> None:
    df.write.format("noop").mode("overwrite").save()


def run(spark: SparkSession, lang: str, path: Path, examples: int, repeat: int) -> tuple[int, int]:
    lines = read_lines(path)
    normalizer = MosesPunctNormalizer(lang=lang)
    want = [normalizer.normalize(s) for s in lines]

    pdf = pd.DataFrame({"i": range(len(lines)), "s": lines})
    df = spark.createDataFrame(pdf, "i long, s string").cache()
    df.count()
    out = df.select("i", moses_punct_normalize(df.s, lang).alias("n")).orderBy("i")
    got = out.toPandas()["n"].tolist()  # also warms up the JIT for the timing below
    bad = [(i, s, g, w) for i, (s, g, w) in enumerate(zip(lines, got, want, strict=True)) if g != w]
    changed = sum(s != w for s, w in zip(lines, want, strict=True))

    t_ref = best_of(repeat, lambda: [normalizer.normalize(s) for s in lines])
    t_base = best_of(repeat, lambda: noop(df.select(F.col("s"))))
    t_chain = best_of(repeat, lambda: noop(df.select(moses_punct_normalize(df.s, lang))))
    df.unpersist()
    per_ref = t_ref / len(lines) * 1e6
    per_native = max(t_chain - t_base, 1e-9) / len(lines) * 1e6

    print(f"\n{lang}  {path}")
    print(f"  lines compared {len(lines):>8,}   changed by sacremoses {changed:>7,}")
    print(f"  lines differing {len(bad):>7,}")
    for i, s, g, w in bad[:examples]:
        print(f"    line {i + 1}: {s[:200]!r}\n      native:     {g[:200]!r}")
        print(f"      sacremoses: {w[:200]!r}")
    print(
        f"  sacremoses {per_ref:6.2f} us/line   native chain {per_native:6.2f} us/line"
        f" (noop pass {t_base / len(lines) * 1e6:.2f} us/line subtracted)"
        f"   sacremoses/native = {per_ref / per_native:.1f}x"
    )
    return len(lines), len(bad)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--master", default="local[1]")
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--examples", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3, help="timing runs; the best is kept")
    args = ap.parse_args()

    spark = (
        SparkSession.builder.master(args.master)
        .appName("moses-punct-diff")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    print(f"master {args.master}, parallelism {spark.sparkContext.defaultParallelism}")
    total = differing = 0
    for lang, rel in CORPORA:
        n, d = run(spark, lang, args.data / rel, args.examples, args.repeat)
        total, differing = total + n, differing + d
    print(f"\nall corpora: {total:,} lines compared, {differing:,} differing")
    spark.stop()
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())

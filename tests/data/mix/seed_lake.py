"""A lake for tests/test_mix_job.py in one spark-submit, instead of a filter run per pair:
`bitext` (views bitext_clean) with the real Tatoeba zh-en (1,500) and ru-en (500) pairs as
clean rows, `embed_cosine` standing in as the sides' length ratio, and two rows planted in
zh-en that hold a segment of tests/data/train_dev_tatoeba (the test set the test registers);
`synthetic` with the zh-en pairs' English sides "back-translated" into their Chinese sides
(direction en-zh, method sampling, run bt1), as the translate job writes them.

    spark-submit tests/data/mix/seed_lake.py LAKE ['["--register-eval", ...]' ...]"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobs.lake.runs import open_lake_at
from jobs.lake.store import Flip, Lake, write_staged
from jobs.mixing.job import main as mix_main

DATA = Path(__file__).resolve().parent.parent
DEV = (DATA / "train_dev_tatoeba.zh").read_text(encoding="utf-8").splitlines()
# What the test expects to be removed besides the corpus's own copies of dev lines.
PLANTED = [("她说：" + DEV[1] + "我不信。", "She said that, but I don't believe her."),
           (DEV[1].replace("。", " . "), "Three Malaysians died.")]


def lines(name: str) -> list[str]:
    return (DATA / name).read_text(encoding="utf-8").splitlines()


def seed(spark: SparkSession, lake: Lake) -> None:
    pairs = {"zh-en": list(zip(lines("tatoeba-zh-en.zh"), lines("tatoeba-zh-en.en"),
                               strict=True)) + PLANTED,
             "ru-en": list(zip(lines("tatoeba-ru-en.ru"), lines("tatoeba-ru-en.en"),
                               strict=True))}
    rows = [(pair, "tatoeba" if i <= 1500 or pair != "zh-en" else "planted", "f", i, a, b)
            for pair, items in pairs.items() for i, (a, b) in enumerate(items, 1)]
    df = spark.createDataFrame(rows, "pair string, corpus string, file string, line long, "
                                     "src string, tgt string")
    ratio = F.least(F.length("src"), F.length("tgt")) / F.greatest(F.length("src"),
                                                                   F.length("tgt"))
    bitext = df.select(F.xxhash64("pair", "corpus", "file", "line").alias("row_id"), "file",
                       "line", "src", "tgt", ratio.cast("double").alias("embed_cosine"),
                       "pair", "corpus", F.lit("clean").alias("outcome"))
    staged = f"{lake.run_dir('seed')}/bitext"
    write_staged(bitext, staged, ["pair", "corpus", "outcome"])
    lake.ensure_table("bitext", spark.read.parquet(staged).schema, ["pair", "corpus", "outcome"])
    flips = []
    for pair, corpus in sorted({(r[0], r[1]) for r in rows}):
        part = {"pair": pair, "corpus": corpus}
        flips.append(Flip("bitext", part, f"{staged}/{lake.partition_path(part)}",
                          [{"outcome": "clean"}]))
    zh = [r for r in rows if r[0] == "zh-en" and r[1] == "tatoeba"]
    synthetic = spark.createDataFrame(
        [(i, en, cn) for _, _, _, i, cn, en in zh], "line long, src string, tgt string"
    ).select(F.xxhash64(F.lit("bt1"), "line").alias("row_id"), F.lit("back").alias("role"),
             "src", "tgt", F.lit("sampling").alias("method"), F.lit(1).alias("round"),
             F.lit("news").alias("source_corpus"), F.lit("en-zh").alias("direction"),
             F.lit("bt1").alias("run_id"))
    staged_syn = f"{lake.run_dir('seed')}/synthetic"
    write_staged(synthetic, staged_syn, ["direction", "run_id"])
    lake.ensure_table("synthetic", spark.read.parquet(staged_syn).schema,
                      ["direction", "run_id"])
    part = {"direction": "en-zh", "run_id": "bt1"}
    flips.append(Flip("synthetic", part, f"{staged_syn}/{lake.partition_path(part)}"))
    lake.commit("seed", flips)
    columns = [c for c in spark.table(lake.qualified("bitext")).columns if c != "outcome"]
    lake.ensure_view("bitext_clean", "bitext", columns, "outcome = 'clean'")


def main(root: str, *jobs: str) -> None:
    """Seed the lake, then run each `jobs` (a JSON list of jobs/mix.py arguments) in this
    process: a job's session is this one, so it costs no JVM start of its own."""
    spark, lake = open_lake_at("seed-mix", root, "sluice", run_id="seed")
    seed(spark, lake)
    for argv in jobs:
        if mix_main(json.loads(argv)) != 0:
            raise SystemExit(f"jobs/mix.py {argv} failed")
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])

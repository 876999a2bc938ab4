"""Lake-wide dedup in a refresh (jobs/refreshing/dedup.py) runs the work before it once: its
passes against committed survivors read the new rows twice each, and without a checkpoint
Spark ran the normalize and language-ID pass again for every read."""

from __future__ import annotations

import pytest
from conftest import DATA
from pyspark.sql import functions as F

from jobs.filtering.config import load_config
from jobs.filtering.stages import with_dedup_keys
from jobs.refreshing.dedup import STORED, RefreshDedup
from jobs.refreshing.units import SOURCE_COLUMN


def lines(name: str, n: int) -> list[str]:
    return (DATA / name).read_text(encoding="utf-8").splitlines()[:n]


@pytest.mark.parametrize("side_dedup", [False, True])
def test_new_rows_are_computed_once(spark, side_dedup: bool) -> None:
    cfg = load_config(extra={"pair": "zh-en", "dedup": {"source_side": side_dedup,
                                                        "target_side": side_dedup}})
    zh, en = lines("tatoeba-zh-en.zh", 120), lines("tatoeba-zh-en.en", 120)
    # Committed: the first 40 pairs, clean, from a kept file; new: pairs 20-119, so 20 of
    # them are duplicates of committed rows and 80 are not.
    stored = spark.createDataFrame(
        [(i, "tatoeba", "a.tsv", i + 1, zh[i], en[i], "f-old") for i in range(40)],
        "row_id long, corpus string, file string, line long, src string, tgt string, "
        f"{SOURCE_COLUMN} string",
    ).withColumns({"reject_stage": F.lit(None).cast("string"),
                   "reject_rule": F.lit(None).cast("string"),
                   "dup_of": F.lit(None).cast("long"), "outcome": F.lit("clean")})
    calls = spark.sparkContext.accumulator(0)

    # Stands for the normalize and language-ID pass: counts the rows it is run on.
    analyse = F.udf(lambda text: calls.add(1) or text, "string")
    new = spark.createDataFrame(
        [(1000 + i, "tatoeba", "b.tsv", i + 1, zh[i], en[i], "f-new") for i in range(20, 120)],
        "row_id long, corpus string, file string, line long, src string, tgt string, "
        f"{SOURCE_COLUMN} string",
    ).withColumns({"src": analyse("src"), "reject_stage": F.lit(None).cast("string"),
                   "reject_rule": F.lit(None).cast("string")})
    redo = RefreshDedup(cfg, stored, kept={"f-old"}, removed=set())
    marked = redo.decide(with_dedup_keys(new, cfg)).where(~F.col(STORED)).collect()
    assert len(marked) == 100
    assert sum(r.reject_rule is not None and r.dup_of < 40 for r in marked) == 20
    assert calls.value == 100  # once a row: 200 without the checkpoint, 400 with side dedup

"""How many partitions a run spreads its rows over after ingest (jobs/filtering/run.py
`partitions`): every core busy, but no partition for less than `spark.min_partition_bytes`
of input, measured from the files the rows are read from (jobs/kit/ingest.py
`input_bytes`)."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import DATA

from jobs.filtering.config import load_config
from jobs.filtering.run import FilterRun
from jobs.kit.config import InputConf
from jobs.kit.ingest import COMPRESSION_RATIO, input_bytes, read_input

ZH, EN = DATA / "tatoeba-zh-en.zh", DATA / "tatoeba-zh-en.en"


def rows(spark, *paths: Path, fmt: str = "auto"):
    inp = InputConf(corpus="tatoeba", paths=[str(p) for p in paths], format=fmt)
    return read_input(spark, inp, "zh-en", 10_000)


def test_input_bytes_are_the_files_read(spark, tmp_path: Path) -> None:
    assert input_bytes(spark, rows(spark, ZH, EN)) == ZH.stat().st_size + EN.stat().st_size
    tsv = tmp_path / "anki.tsv.gz"
    shutil.copy(DATA / "anki-cmn-zh-en.tsv.gz", tsv)
    assert input_bytes(spark, rows(spark, tsv, fmt="tsv")) == (
        COMPRESSION_RATIO * tsv.stat().st_size)
    with gzip.open(tsv, "rt", encoding="utf-8") as f:  # about the text it holds
        text = len(f.read().encode())
    assert text / 2 < COMPRESSION_RATIO * tsv.stat().st_size < 2 * text


def test_parquet_input_is_sized_as_compressed(spark, tmp_path: Path) -> None:
    rows(spark, ZH, EN).select("src", "tgt").write.parquet(str(tmp_path / "pairs.parquet"))
    files = [p for p in (tmp_path / "pairs.parquet").iterdir() if p.suffix == ".parquet"]
    sized = input_bytes(spark, rows(spark, tmp_path / "pairs.parquet", fmt="parquet"))
    assert sized == COMPRESSION_RATIO * sum(p.stat().st_size for p in files) > 0
    text = ZH.stat().st_size + EN.stat().st_size  # Parquet is compressed too: counted so
    assert text / 2 < sized < 4 * text


@pytest.mark.parametrize("input_size,want", [
    (None, 6),           # not known: every core busy, as before
    (0, 1),              # a refresh that only drops files
    (150_000, 1),        # the 1,500 Tatoeba pairs
    (2_500_000, 3),      # a MiB a partition
    (10**9, 6),          # cores x partitions_per_core at most
])
def test_partitions_follow_the_input_size(spark, input_size: int | None, want: int) -> None:
    cfg = load_config(extra={"pair": "zh-en"})
    assert spark.sparkContext.defaultParallelism == 2 and cfg.spark.partitions_per_core == 3
    run = SimpleNamespace(spark=spark, cfg=cfg)
    assert FilterRun.partitions(run, input_size) == want


def test_no_least_size_is_every_core(spark) -> None:
    cfg = load_config(extra={"pair": "zh-en", "spark": {"min_partition_bytes": 0}})
    assert FilterRun.partitions(SimpleNamespace(spark=spark, cfg=cfg), 10) == 6

"""Inputs other than the integration test's TSV and Moses pair: Parquet with provenance and
nulls, and empty files (a clear error naming the file, before anything is written)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.filtering.config import load_config
from jobs.filtering.stages import normalize_and_analyze, score_and_decide
from jobs.kit.config import InputConf
from jobs.kit.errors import InputError
from jobs.kit.ingest import read_input

REPO = Path(__file__).resolve().parent.parent
MODEL = str(REPO / "models/lid.176.ftz")


def tatoeba_pairs(data_dir: Path, n: int) -> list[tuple[str, str]]:
    zh = (data_dir / "tatoeba-zh-en.zh").read_text(encoding="utf-8").splitlines()
    en = (data_dir / "tatoeba-zh-en.en").read_text(encoding="utf-8").splitlines()
    return list(zip(zh, en, strict=True))[:n]


def test_parquet_input_keeps_provenance_and_rejects_null_sides(
    spark, tmp_path: Path, data_dir: Path
) -> None:
    pairs = tatoeba_pairs(data_dir, 5)
    rows = [(zh, en, f"tatoeba#{i}") for i, (zh, en) in enumerate(pairs)]
    rows += [(None, "A lone English line.", "broken#1"), ("没有译文。", None, "broken#2")]
    path = tmp_path / "pairs.parquet"
    spark.createDataFrame(rows, "src string, tgt string, origin string").coalesce(1).write.parquet(
        str(path)
    )
    raw = read_input(spark, InputConf(corpus="pq", paths=[str(path)]), "zh-en", 100_000)
    got = raw.orderBy("line").collect()

    assert [r.line for r in got] == list(range(1, 8))  # 1-based row number within the file
    assert all(r.file.endswith(".parquet") and str(path) in r.file for r in got)
    assert [json.loads(r.extra[0])["origin"] for r in got] == [o for _, _, o in rows]
    assert len({r.row_id for r in got}) == 7

    cfg = load_config(extra={"pair": "zh-en"})
    decided = score_and_decide(normalize_and_analyze(raw, cfg, MODEL), cfg)
    rules = {r.line: r.reject_rule for r in decided.select("line", "reject_rule").collect()}
    assert rules[6] == rules[7] == "empty"  # a null side is rejected, never kept as clean
    assert sum(rule is None for line, rule in rules.items() if line <= 5) >= 4


def test_parquet_with_bad_utf8_is_rejected_as_a_text_file_would_be(
    spark, tmp_path: Path, data_dir: Path
) -> None:
    (zh, en), (zh2, en2) = tatoeba_pairs(data_dir, 2)
    # pyarrow writes the bytes unchecked (as a writer in another language may): one bad target.
    texts = [zh.encode(), en.encode(), zh2.encode(), b"\xff\xfe " + en2.encode()]
    offsets = [0]
    for text in texts:
        offsets.append(offsets[-1] + len(text))
    column = pa.Array.from_buffers(pa.string(), 4, [None, pa.py_buffer(
        b"".join(o.to_bytes(4, "little") for o in offsets)), pa.py_buffer(b"".join(texts))])
    table = pa.table({"src": column.take([0, 2]), "tgt": column.take([1, 3])})
    path = tmp_path / "bad.parquet"
    pq.write_table(table, path)
    raw = read_input(spark, InputConf(corpus="pq", paths=[str(path)]), "zh-en", 100_000)
    got = {r.line: r for r in raw.collect()}
    assert got[1].ingest_error is None and (got[1].src, got[1].tgt) == (zh, en)
    assert got[2].ingest_error == "invalid_utf8" and got[2].tgt == "\ufffd\ufffd " + en2

    cfg = load_config(extra={"pair": "zh-en"})
    decided = score_and_decide(normalize_and_analyze(raw, cfg, MODEL), cfg)
    rules = {r.line: (r.reject_rule, r.reject_stage) for r in decided.collect()}
    assert rules == {1: (None, None), 2: ("invalid_utf8", "ingest")}


@pytest.mark.parametrize("fmt", ["tsv", "moses"])
def test_an_empty_file_is_an_error_naming_it(spark, tmp_path: Path, fmt: str) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    other = tmp_path / "other.en"
    other.write_text("Hello.\n", encoding="utf-8")
    paths = [str(empty)] if fmt == "tsv" else [str(empty), str(other)]
    with pytest.raises(InputError, match=f"{empty}: no lines"):
        read_input(spark, InputConf(corpus="e", paths=paths, format=fmt), "zh-en", 100_000)


def test_monolingual_parquet_and_text_inputs(spark, tmp_path: Path, data_dir: Path) -> None:
    en = (data_dir / "tatoeba-zh-en.en").read_text(encoding="utf-8").splitlines()[:4]
    path = tmp_path / "mono.parquet"
    rows = [(t, f"doc#{i}") for i, t in enumerate(en)] + [(None, "doc#null")]
    spark.createDataFrame(rows, "text string, doc string").coalesce(1).write.parquet(str(path))
    raw = read_input(spark, InputConf(corpus="pq", paths=[str(path)]), "en", 100_000, mono=True)
    got = raw.orderBy("line").collect()
    assert [r.src for r in got] == [*en, None] and all(r.tgt is None for r in got)
    assert [json.loads(r.extra[0])["doc"] for r in got] == [d for _, d in rows]

    cfg = load_config(extra={"lang": "en"})
    decided = score_and_decide(normalize_and_analyze(raw, cfg, MODEL), cfg)
    rules = {r.line: r.reject_rule for r in decided.collect()}
    assert rules[5] == "empty" and [rules[i] for i in range(1, 5)] == [None] * 4
    assert "src_chars" in decided.columns and "tgt_chars" not in decided.columns  # one side

    text = tmp_path / "mono.txt"
    text.write_text("One line.\n\tTabs stay in the text\tof a monolingual line.\n", "utf-8")
    lines = read_input(spark, InputConf(corpus="t", paths=[str(text)]), "en", 100_000, mono=True)
    assert [r.src for r in lines.orderBy("line").collect()] == [
        "One line.", "\tTabs stay in the text\tof a monolingual line."]
    with pytest.raises(InputError, match="not for monolingual"):
        read_input(spark, InputConf(corpus="m", paths=[str(text), str(text)], format="moses"),
                   "en", 100_000, mono=True)

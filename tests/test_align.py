"""Word-alignment scorer (udfs/align.py, udfs/align_model.py) on real zh-en pairs.

tests/data/align_tatoeba_zh-en.{zh,en}: 2,000 real Tatoeba pairs in random order. The model is
trained on them once (module fixture), then every pair is scored through Spark twice: as is
(real) and with the targets shifted by one line (misaligned: same sentences, wrong partner).
Measured on these files (quantiles 10/50/90%):

    score               real                    shifted
    align_coverage      0.83   0.95   1.00      0.05   0.23   0.43
    align_fwd_logprob  -4.55  -2.72  -1.76    -12.70 -10.68  -8.48
    align_rev_logprob  -4.79  -2.63  -1.71    -13.76 -11.39  -8.62

At the published threshold 0.6, 99.8% of real pairs are kept and 99.1% of shifted ones rejected.
Coverage from systran-align's own symmetrized (grow-diag-final) links, which this module does
not use, would keep 99.4% of the shifted pairs: the assertions below fail on it.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

import udfs.align as align
from udfs.align import SCORE_COLUMNS, add_alignment_scores, train_alignment
from udfs.align_model import (
    MANIFEST,
    MIN_PROB,
    AlignmentModel,
    align_tokens,
    read_manifest,
    read_table,
    score_texts,
)

DATA = Path(__file__).resolve().parent / "data"


def read_pairs() -> list[tuple[str, str]]:
    zh = (DATA / "align_tatoeba_zh-en.zh").read_text(encoding="utf-8").splitlines()
    en = (DATA / "align_tatoeba_zh-en.en").read_text(encoding="utf-8").splitlines()
    assert len(zh) == len(en)
    return list(zip(zh, en, strict=True))


def shifted(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Each source with the next line's target: real text, wrong partner."""
    targets = [t for _, t in pairs[1:] + pairs[:1]]
    return [(s, t) for (s, _), t in zip(pairs, targets, strict=True)]


@pytest.fixture(scope="module")
def pairs() -> list[tuple[str, str]]:
    return read_pairs()


@pytest.fixture(scope="module")
def model_dir(pairs, tmp_path_factory) -> str:
    return train_alignment(pairs, "zh", "en", str(tmp_path_factory.mktemp("align") / "zh-en"))


def frame(spark, rows: list[tuple[str, str]], kind: str):
    pdf = pd.DataFrame(rows, columns=["src", "tgt"])
    pdf.insert(0, "row_id", range(len(pdf)))
    pdf["kind"] = kind
    return spark.createDataFrame(pdf)


@pytest.fixture(scope="module")
def scored(spark, pairs, model_dir) -> pd.DataFrame:
    df = frame(spark, pairs, "real").unionByName(frame(spark, shifted(pairs), "shifted"))
    out = add_alignment_scores(df, model_dir, "zh", "en", F.lit(True))
    return out.toPandas()


def test_tokens_are_lowercased_jieba_words():
    assert align_tokens("汤姆在公园喝醉了", "zh") == ["汤姆", "在", "公园", "喝醉", "了"]
    assert align_tokens("Tom  got DRUNK. |||", "en") == ["tom", "got", "drunk", ".", "<|||>"]
    assert align_tokens('"U.S. policy,"', "en") == ['"', "u.s", ".", "policy", ',"']
    assert align_tokens(None, "en") == []


def test_real_pairs_score_higher_than_shifted(scored):
    real = scored[scored.kind == "real"]
    shift = scored[scored.kind == "shifted"]
    cov_real, cov_shift = real.align_coverage, shift.align_coverage
    assert cov_real.median() - cov_shift.median() >= 0.5
    assert (cov_shift < 0.6).mean() >= 0.95
    assert (cov_real >= 0.6).mean() >= 0.97
    for column, gap in (("align_fwd_logprob", 5.0), ("align_rev_logprob", 5.0)):
        assert real[column].median() - shift[column].median() >= gap, column


def test_nulls_where_not_alive_and_every_column_flows_through(spark, pairs, model_dir):
    df = frame(spark, pairs[:300], "real").withColumn("tags", F.array(F.col("kind")))
    alive = (F.col("row_id") % 3 != 0) & F.col("src").isNotNull()
    out = add_alignment_scores(df, model_dir, "zh", "en", alive)
    assert out.columns == [*df.columns, *SCORE_COLUMNS]
    got = out.toPandas().sort_values("row_id").reset_index(drop=True)
    want = df.toPandas().sort_values("row_id").reset_index(drop=True)
    assert len(got) == len(want) == 300
    pd.testing.assert_frame_equal(got[df.columns].astype(str), want.astype(str))
    dead = got.row_id % 3 == 0
    for column in SCORE_COLUMNS:
        assert got.loc[dead, column].isna().all(), column
        assert got.loc[~dead, column].notna().all(), column


def test_null_alive_counts_as_dead(spark, pairs, model_dir):
    df = frame(spark, pairs[:4], "real")
    alive = F.when(F.col("row_id") < 2, F.lit(True))  # null for rows 2, 3
    got = add_alignment_scores(df, model_dir, "zh", "en", alive).toPandas()
    assert got.sort_values("row_id").align_coverage.notna().tolist() == [True, True, False, False]


def test_model_loads_once_per_worker_not_per_batch(spark, pairs, model_dir):
    def worker_loads(batches):  # nested: pickled by value, the workers cannot import this file
        """On a Python worker: how often that process loaded an alignment model."""
        for _ in batches:
            pass
        yield pd.DataFrame({"pid": [os.getpid()], "loads": [max(align.LOADS.values(), default=0)]})

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
    try:
        df = frame(spark, pairs, "real").repartition(4)  # 40 batches over 2 workers
        scored = add_alignment_scores(df, model_dir, "zh", "en", F.lit(True))
        assert scored.count() == len(pairs)
        report = spark.range(8, numPartitions=4).mapInPandas(worker_loads, "pid long, loads long")
        loads = report.toPandas()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert loads.loads.max() == 1, loads


def test_model_dir_reloads_in_a_fresh_call(spark, pairs, model_dir, scored):
    manifest = read_manifest(model_dir)
    assert (manifest["src_lang"], manifest["tgt_lang"]) == ("zh", "en")
    assert manifest["sample_pairs_given"] == len(pairs)
    assert manifest["library"] == "systran-align"
    assert sorted(os.listdir(model_dir)) == ["backward.probs", "forward.probs", MANIFEST]
    # A fresh load on the driver (no worker cache) scores as the Spark workers did.
    model = AlignmentModel.load(model_dir)
    sample = scored[scored.kind == "real"].sort_values("row_id").head(50)
    again = score_texts(model, list(sample.src), list(sample.tgt), "zh", "en")
    np.testing.assert_allclose(again, sample[list(SCORE_COLUMNS)].to_numpy(float), rtol=1e-9)


def test_model_shipped_with_addfile(spark, pairs, model_dir, monkeypatch):
    """A non-local model dir goes to the workers by addFile and is read via SparkFiles."""
    monkeypatch.setattr(align, "is_local_path", lambda uri: False)
    align._MODELS.clear()
    df = frame(spark, pairs[:50], "real")
    got = add_alignment_scores(df, model_dir, "zh", "en", F.lit(True)).toPandas()
    direct = score_texts(
        AlignmentModel.load(model_dir), list(df.toPandas().src), list(df.toPandas().tgt), "zh", "en"
    )
    np.testing.assert_allclose(
        got.sort_values("row_id")[list(SCORE_COLUMNS)].to_numpy(float), direct, rtol=1e-9
    )


def test_upload_to_a_hadoop_uri_copies_every_file(model_dir, tmp_path, spark):
    """The copy path of train_alignment for hdfs://, s3a://...: exercised with a file:// URI."""
    target = tmp_path / "uploaded"
    align._upload(model_dir, f"file://{target}")
    assert read_manifest(str(target)) == read_manifest(model_dir)
    for name in ("forward.probs", "backward.probs"):
        assert (target / name).read_bytes() == (Path(model_dir) / name).read_bytes()


def test_wrong_direction_or_missing_model_is_an_error(spark, pairs, model_dir, tmp_path):
    df = frame(spark, pairs[:2], "real")
    with pytest.raises(ValueError, match="zh-en, not en-zh"):
        add_alignment_scores(df, model_dir, "en", "zh", F.lit(True))
    with pytest.raises(FileNotFoundError, match="missing manifest.json"):
        add_alignment_scores(df, str(tmp_path), "zh", "en", F.lit(True))
    with pytest.raises(ValueError, match="already present"):
        add_alignment_scores(
            df.withColumn("align_coverage", F.lit(1.0)), model_dir, "zh", "en", F.lit(True)
        )


def test_empty_side_scores_zero_coverage(model_dir):
    model = AlignmentModel.load(model_dir)
    scores = score_texts(model, ["", "汤姆喝醉了", None], ["Tom got drunk.", " ", "x"], "zh", "en")
    assert scores[:, 2].tolist() == [0.0, 0.0, 0.0]
    assert np.isnan(scores[:, :2]).all()


def test_tokens_the_model_never_saw_are_left_out(model_dir):
    model = AlignmentModel.load(model_dir)
    known, with_unknown, unknown = score_texts(
        model,
        ["他很累。"] * 3,
        ["He is very tired.", "He is very qzxv tired.", "qzxv wqpt"],
        "zh",
        "en",
    )
    assert with_unknown[2] == known[2] > 0.8  # "qzxv" counts neither for nor against
    assert unknown[0] == pytest.approx(np.log(MIN_PROB))  # no known target token
    assert unknown[2] == 0.0


def test_parameter_file_of_another_format_is_refused(tmp_path):
    path = tmp_path / "forward.probs"
    path.write_bytes(struct.pack("<ii", 3, 0))
    with pytest.raises(ValueError, match="format 3, expected 2"):
        read_table(str(path))


def test_manifest_hashes_guard_the_parameter_files(model_dir, tmp_path):
    manifest = json.loads((Path(model_dir) / MANIFEST).read_text())
    assert set(manifest["files"]) == {"forward.probs", "backward.probs"}
    assert manifest["tokenization"].startswith("udfs.tokens.tokenize")
    copy = tmp_path / "copy"
    shutil.copytree(model_dir, copy)
    with open(copy / "backward.probs", "r+b") as f:
        f.truncate(1000)  # a partly copied file
    with pytest.raises(ValueError, match="does not match its manifest"):
        AlignmentModel.load(str(copy))

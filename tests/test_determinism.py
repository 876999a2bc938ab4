"""Two filter runs of the same input and config give bit-identical rows, every score included
(rules, language ID, word alignment trained in the run, embedding cosine and margin), also when
Spark partitions the rows differently: the second run has other shuffle partitions, input
splits and Arrow batch sizes (and, where the config has it, another spread after ingest).

Input: the 1,500 real zh-en Tatoeba pairs of tests/data/tatoeba-zh-en.{zh,en}. The aligner
trains on a sample of 500 of the 1,302 pairs the rules and language ID leave alive, so the
choice of the sample is exercised, not only its order. Before the fix (fast_align on two
threads, a partition-dependent sample, embeddings and margins by partition and Arrow batch)
the second run differed on ~1,300 rows of each alignment log-prob, ~1,060 of align_coverage
and ~890 of embed_cosine.
Runs `jobs.filtering.job.main` in the test session's JVM, in a database of its own; the first run is
conftest.py's `scored_tatoeba` (test_cluster.py compares its cluster run with it too).
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pandas as pd
import pytest

from jobs.filtering.job import main

pytestmark = pytest.mark.integration  # whole jobs, real processes: not in the fast tier

DB = "determinism"
# What the second run changes: rows land in other partitions and other Arrow batches.
OTHER_PARTITIONING = {
    "spark.sql.shuffle.partitions": "7",
    "spark.sql.files.maxPartitionBytes": "32k",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "97",
}


@contextmanager
def session_conf(spark, conf: dict[str, str]):
    """Runtime SQL settings for the block (the session is shared with other test modules)."""
    old = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def output(spark, run_id: str) -> pd.DataFrame:
    """Every output row of a run (clean and rejected) by row id, without the run id."""
    rows = spark.sql(
        f"SELECT *, false AS rejected FROM {DB}.bitext_clean WHERE run_id = '{run_id}'"
    ).toPandas()
    rejected = spark.sql(f"SELECT * FROM {DB}.bitext_rejected WHERE run_id = '{run_id}'")
    rows = pd.concat([rows, rejected.toPandas().assign(rejected=True)], ignore_index=True)
    return rows.drop(columns="run_id").set_index("row_id").sort_index()


@pytest.fixture(scope="module")
def runs(spark, scored_tatoeba: dict) -> dict:
    """det-1 (conftest.py's `scored_tatoeba`: align on a 500-pair sample, embeddings with
    margin k=4) and det-2, the same config run here with other partitioning: its 1,500
    pairs in 2 partitions after ingest (cores x 1, however small the input), det-1's in 1."""
    assert scored_tatoeba["database"] == DB and scored_tatoeba["run_id"] == "det-1"
    first = output(spark, "det-1")
    argv = ["--config", str(scored_tatoeba["config"]), "--run-id", "det-2",
            "--set", "spark.partitions_per_core=1", "--set", "spark.min_partition_bytes=0"]
    with session_conf(spark, OTHER_PARTITIONING):
        assert main(argv) == 0
        second = output(spark, "det-2")
    return {"first": first, "second": second, "lake": scored_tatoeba["lake"]}


def differing_rows(a: pd.Series, b: pd.Series) -> int:
    """Rows whose values differ; floats bit by bit (NaN/null equal to NaN/null only)."""
    if pd.api.types.is_float_dtype(a) or pd.api.types.is_float_dtype(b):
        x, y = a.to_numpy(np.float64, na_value=np.nan), b.to_numpy(np.float64, na_value=np.nan)
        same_null = np.isnan(x) & np.isnan(y)
        return int((~same_null & (x.view(np.int64) != y.view(np.int64))).sum())
    return int((a.astype(str) != b.astype(str)).sum())


def test_two_runs_give_the_same_rows_and_scores_bit_for_bit(runs) -> None:
    first, second = runs["first"], runs["second"]
    assert len(first) == 1500 and first.index.is_unique
    assert list(second.index) == list(first.index) and list(second.columns) == list(first.columns)
    scores = ["align_fwd_logprob", "align_rev_logprob", "align_coverage"]
    scores += ["embed_cosine", "embed_margin"]
    for column in scores:  # the scorers ran: most rows carry their scores
        assert first[column].notna().sum() > 700, column
    diff = {c: differing_rows(first[c], second[c]) for c in first.columns}
    assert {c: n for c, n in diff.items() if n} == {}


def test_the_two_aligners_are_the_same_files(runs) -> None:
    models = runs["lake"] / "models/align/zh-en"
    one, two = ((models / run / "forward.probs").read_bytes() for run in ("det-1", "det-2"))
    assert one == two
    one, two = ((models / run / "backward.probs").read_bytes() for run in ("det-1", "det-2"))
    assert one == two

"""jobs/select.py end to end through the real `spark-submit`, on a real multi-domain slice
(tests/data/select: TICO-19 medical, NTREX news, FLORES wiki, Tatoeba conversation; 150 zh-en
pairs each) with a medical seed held apart from the pool (another 120 TICO-19 pairs).

One bitext run scores the pool with four methods combined; each method's own score must put
the medical pairs on top, and so must the combination. A monolingual run adds LM fluency.
Then: the same run with other partitioning gives the same scores; kmeans_domains alone,
scoring with the saved models, gives the same clusters and selects the seed's clusters."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.integration_helpers import spark_submit

SELECT = Path(__file__).resolve().parent / "data" / "select"
METHODS4 = ("moore_lewis", "fasttext_domain", "embedding_knn", "kmeans_domains")
LOWER_IS_BETTER = {"moore_lewis", "lm_fluency"}


def submit_select(*args: str) -> str:
    done = spark_submit(*args, job="select")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout + done.stderr


def precision_at(rows: list[dict], score, lower_better: bool, n: int) -> float:
    """Share of medical rows among the n best by `score` (rows without a score last)."""
    scored = [r for r in rows if score(r) is not None]
    best = sorted(scored, key=lambda r: (score(r) if lower_better else -score(r), r["row_id"]))
    return sum(r["domain"] == "medical" for r in best[:n]) / n


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    """A lake holding the pool as bitext (zh-en) and its English side, with 40 word-shuffled
    copies of real sentences, as monolingual text."""
    lake = tmp_path_factory.mktemp("select") / "lake"
    submit_select_pool = spark_submit(
        "--pair", "zh-en", "--corpus", "pool", "--input", str(SELECT / "pool-zh-en.tsv"),
        "--lake", str(lake))
    assert submit_select_pool.returncode == 0, submit_select_pool.stderr[-3000:]
    english = [line.split("\t")[1] for line in
               (SELECT / "pool-zh-en.tsv").read_text(encoding="utf-8").splitlines()]
    rng = random.Random(5)
    shuffled = []
    for line in english[:40]:
        words = line.split()
        rng.shuffle(words)
        shuffled.append(" ".join(words))
    mono = lake.parent / "pool.en"
    mono.write_text("\n".join(english + shuffled) + "\n", encoding="utf-8")
    done = spark_submit("--lang", "en", "--corpus", "pool", "--input", str(mono),
                        "--lake", str(lake))
    assert done.returncode == 0, done.stderr[-3000:]
    return lake


@pytest.fixture(scope="module")
def four_methods(lake: Path, spark) -> str:
    out = submit_select(
        "--pair", "zh-en", "--corpus", "pool",
        "--seed", str(SELECT / "seed-medical.zh"), str(SELECT / "seed-medical.en"),
        *[x for m in METHODS4 for x in ("--method", m)], "--top", "150",
        "--models-name", "medical-v1", "--lake", str(lake), "--run-id", "four")
    return out


def read_selected(spark, lake: Path, run_id: str) -> list[dict]:
    """The run's `selected` rows (as plain Parquet, the way any reader sees the table), with
    each pool row's domain from the bitext table (the TSV's third column)."""
    selected = spark.read.parquet(str(lake / "tables" / "selected")).where(f"run_id = '{run_id}'")
    bitext = spark.read.parquet(str(lake / "tables" / "bitext")).selectExpr(
        "row_id", "extra[0] AS domain")
    return [r.asDict() for r in selected.join(bitext, "row_id", "left").collect()]


def test_each_method_ranks_the_medical_pairs_first(spark, lake: Path, four_methods: str) -> None:
    rows = read_selected(spark, lake, "four")
    medical = sum(r["domain"] == "medical" for r in rows)
    assert 140 <= medical <= 150  # a few pool rows fail the filter
    base = medical / len(rows)
    for method in METHODS4:
        p = precision_at(rows, lambda r, m=method: r["scores"][m], method in LOWER_IS_BETTER,
                         medical)
        assert p >= 0.8, (method, p, base)
    chosen = [r for r in rows if r["selected"]]
    assert len(chosen) == 150
    assert sum(r["domain"] == "medical" for r in chosen) / 150 >= 0.9
    assert sorted(r["rank"] for r in rows if r["rank"] is not None) == list(
        range(1, sum(r["rank"] is not None for r in rows) + 1))
    assert all(r["method"] == "rank_mean(" + ",".join(METHODS4) + ")" for r in rows)
    assert {r["seed_name"] for r in rows} == {"seed-medical.zh,seed-medical.en"}


def test_every_pool_row_is_in_the_table_once(spark, lake: Path, four_methods: str) -> None:
    rows = read_selected(spark, lake, "four")
    clean = spark.read.parquet(str(lake / "tables" / "bitext")).where(
        "outcome = 'clean' AND corpus = 'pool'").select("row_id", "src", "tgt", "line").collect()
    assert sorted(r["row_id"] for r in rows) == sorted(r.row_id for r in clean)
    by_id = {r.row_id: r for r in clean}
    assert all((r["src"], r["tgt"], r["line"]) == (by_id[r["row_id"]].src,
                                                  by_id[r["row_id"]].tgt,
                                                  by_id[r["row_id"]].line) for r in rows)
    [stats] = spark.read.parquet(str(lake / "tables" / "select_stats")).where(
        "run_id = 'four'").collect()
    assert (stats.input_rows, stats.selected, stats.models) == (len(rows), 150, "medical-v1")
    assert "selected 150 of" in four_methods


def test_models_are_saved_with_a_manifest(lake: Path, four_methods: str) -> None:
    import json

    saved = lake / "models" / "select" / "zh-en" / "medical-v1"
    manifest = json.loads((saved / "manifest.json").read_text())
    assert sorted(manifest["methods"]) == sorted(METHODS4)
    for entry in manifest["methods"].values():
        for names in entry["files"].values():
            assert all((saved / name).exists() for name in names)
    assert not list(saved.parent.glob(".staging-*"))


def test_same_seed_and_pool_same_scores_with_other_partitioning(spark, lake: Path,
                                                                 four_methods: str) -> None:
    submit_select(
        "--conf", "spark.sql.shuffle.partitions=3", "--pair", "zh-en", "--corpus", "pool",
        "--seed", str(SELECT / "seed-medical.zh"), str(SELECT / "seed-medical.en"),
        *[x for m in METHODS4 for x in ("--method", m)], "--top", "150",
        "--lake", str(lake), "--run-id", "four-again")
    first = {r["row_id"]: r for r in read_selected(spark, lake, "four")}
    again = read_selected(spark, lake, "four-again")
    assert all(r["scores"] == first[r["row_id"]]["scores"] and r["rank"] == first[
        r["row_id"]]["rank"] for r in again)


def test_kmeans_with_saved_models_keeps_cluster_ids(spark, lake: Path, four_methods: str) -> None:
    out = submit_select("--pair", "zh-en", "--corpus", "pool", "--method", "kmeans_domains",
                        "--reuse-models", "medical-v1", "--lake", str(lake),
                        "--run-id", "clusters")
    first = {r["row_id"]: r for r in read_selected(spark, lake, "four")}
    rows = read_selected(spark, lake, "clusters")
    assert all(r["domain_cluster"] == first[r["row_id"]]["domain_cluster"] for r in rows)
    chosen = [r for r in rows if r["selected"]]
    # the seed's clusters: the selected rows are mostly medical, and most medical rows are in
    assert sum(r["domain"] == "medical" for r in chosen) / len(chosen) >= 0.7
    assert sum(r["domain"] == "medical" for r in chosen) >= 100
    assert "selected" in out


def test_monolingual_fluency_and_knn(spark, lake: Path) -> None:
    submit_select(
        "--lang", "en", "--corpus", "pool", "--seed", str(SELECT / "seed-medical.en"),
        "--method", "lm_fluency", "--method", "embedding_knn", "--top-percent", "25",
        "--lake", str(lake), "--run-id", "mono")
    selected = spark.read.parquet(str(lake / "tables" / "selected")).where("run_id = 'mono'")
    rows = [r.asDict() for r in selected.collect()]
    pool = (SELECT / "pool-zh-en.tsv").read_text(encoding="utf-8").splitlines()
    domains = {i + 1: line.split("\t")[2] for i, line in enumerate(pool)}
    for r in rows:
        r["domain"] = domains.get(r["line"], "shuffled")
        assert r["src"] is None and r["text"]
    shuffled = [r for r in rows if r["domain"] == "shuffled"]
    assert len(shuffled) >= 35
    assert sum(r["fluency_bucket"] == "tail" for r in shuffled) / len(shuffled) >= 0.8
    buckets = [r["fluency_bucket"] for r in rows if r["reason"] is None]
    assert abs(buckets.count("head") / len(buckets) - 0.3) < 0.02
    medical = sum(r["domain"] == "medical" for r in rows)
    p = precision_at(rows, lambda r: r["scores"]["embedding_knn"], False, medical)
    assert p >= 0.8
    assert sum(r["selected"] for r in rows) == -(-len(buckets) * 25 // 100)

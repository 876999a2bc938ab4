"""The selection job's parts, and its bad input, in the test session's JVM (`main()` is the
spark-submit code path): exact global ranks, cross-fitted scoring, deterministic training,
the seed's checks, config errors, and clear one-line errors (exit 2) for an empty seed, a seed
in the wrong language, a missing input table and a cut larger than the pool."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from pyspark.sql import functions as F

from jobs.selection import job as select_job
from jobs.selection.config import load_select_config
from jobs.selection.ranking import global_rank
from udfs.domain_embed import knn_mean
from udfs.domain_fasttext import features, load_classifier, p_in_domain, train_classifier
from udfs.domain_lm import LmSpec, load_models, row_score
from udfs.ngram import lm_tokens, train_lm

SELECT = Path(__file__).resolve().parent / "data" / "select"
DB = "select_units"


def lines(name: str) -> list[str]:
    return (SELECT / name).read_text(encoding="utf-8").splitlines()


# -- ranks -------------------------------------------------------------------------------
def test_global_rank_is_exact_with_ties_and_many_partitions(spark, tmp_path: Path) -> None:
    rng = random.Random(3)
    rows = [(i, float(rng.randrange(50))) for i in range(2000)]
    df = spark.createDataFrame(rows, "id long, s double").repartition(5)
    ranked = global_rank(df, [F.col("s").desc(), F.col("id")], str(tmp_path / "r"), "rank")
    got = {r.id: r["rank"] for r in ranked.collect()}
    expected = sorted(rows, key=lambda r: (-r[1], r[0]))
    assert [got[i] for i, _ in expected] == list(range(1, 2001))


# -- scorers -----------------------------------------------------------------------------
def test_cross_fitting_scores_a_row_with_the_other_folds_model(tmp_path: Path) -> None:
    """A general LM that saw a sentence finds it likelier than one that did not; a row of
    fold f is scored by general[1 - f], so its own fold's model never scores it."""
    medical = lines("seed-medical.en")
    news = lines("seed-news.en")
    tok = [lm_tokens(x, "en") for x in medical]
    knows = train_lm(tok[:100], 3, str(tmp_path / "knows.klm"))
    other = train_lm([lm_tokens(x, "en") for x in news], 3, str(tmp_path / "other.klm"))
    spec = LmSpec(sides=("src",), langs=("en",), general=((knows,), (other,)))
    models = load_models(spec)
    seen = medical[5]
    by_knowing, _ = row_score(spec, models, (seen,), fold=1)  # fold 1 -> general[0] = knows
    by_other, _ = row_score(spec, models, (seen,), fold=0)
    assert by_knowing < by_other  # perplexity under the LM that saw it is lower
    assert row_score(spec, models, ("   ",), fold=0) == (None, "empty_src")


def test_training_is_deterministic(tmp_path: Path) -> None:
    """The same lines give the same LM bytes and the same classifier (one thread, seeded)."""
    tok = [lm_tokens(x, "zh") for x in lines("seed-medical.zh")]
    a = train_lm(tok, 2, str(tmp_path / "a.klm"))
    b = train_lm(tok, 2, str(tmp_path / "b.klm"))
    assert Path(a).read_bytes() == Path(b).read_bytes()
    pos = [features(p, ("zh", "en")) for p in zip(lines("seed-medical.zh"),
                                                   lines("seed-medical.en"), strict=True)]
    neg = [features(p, ("zh", "en")) for p in zip(lines("seed-news.zh"), lines("seed-news.en"),
                                                   strict=True)]
    settings = {"epoch": 25, "lr": 0.2, "dim": 50, "seed": 1, "wordNgrams": 2, "bucket": 10000}
    probe = pos[:20] + neg[:20]
    got = [p_in_domain(load_classifier(train_classifier(pos, neg, str(tmp_path / f"{n}.bin"),
                                                        settings)), probe) for n in "xy"]
    assert got[0] == got[1]
    assert np.mean(got[0][:20]) > np.mean(got[0][20:])  # trained rows: medical scores higher


def test_knn_mean_is_the_mean_of_the_k_nearest() -> None:
    rng = np.random.default_rng(0)
    seed = rng.normal(size=(30, 8)).astype(np.float32)
    queries = rng.normal(size=(5, 8)).astype(np.float32)
    got = knn_mean(queries, seed, 4)
    for q, value in zip(queries, got, strict=True):
        assert value == pytest.approx(np.sort(seed @ q)[-4:].mean(), rel=1e-5)


# -- config ------------------------------------------------------------------------------
@pytest.mark.parametrize(("extra", "message"), [
    ({"pair": "zh-en", "top": 5}, "need a seed"),
    ({"pair": "zh-en", "seed": {"files": ["a"]}}, "give `top` or `top_percent`"),
    ({"pair": "zh-en", "lang": "en"}, "one of them"),
    ({"pair": "zh-en", "methods": ["lm_fluency"]}, "monolingual pool"),
    ({"lang": "en", "seed": {"files": ["a"]}, "top": 1, "top_percent": 5}, "not both"),
    ({"lang": "xx", "methods": ["lm_fluency"]}, "unknown language code"),
])
def test_config_errors_name_the_problem(extra: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_select_config(extra=extra)


def test_kmeans_alone_cuts_at_the_seeds_clusters() -> None:
    cfg = load_select_config(extra={"pair": "zh-en", "methods": ["kmeans_domains"],
                                    "seed": {"files": ["a"]}})
    job = select_job.SelectRun.__new__(select_job.SelectRun)
    job.cfg = cfg
    manifest = {"methods": {"kmeans_domains": {"seed_clusters": [3, 1]}}}
    assert job.cut(100, manifest) == (None, ("domain_cluster", [3, 1]))
    job.cfg = cfg.model_copy(update={"top_percent": 10.0})
    assert job.cut(95, manifest) == (10, None)


# -- bad input through main() --------------------------------------------------------------
@pytest.fixture(scope="module")
def lake(spark, lake_root: Path) -> Path:
    """A lake whose table `pool` holds the first 100 pairs of the bundled pool (the errors
    come before any scoring, so how the pool was made does not matter)."""
    lake = lake_root / DB
    rows = [(i, *line.split("\t")[:2], "pool") for i, line in
            enumerate(lines("pool-zh-en.tsv")[:100])]
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DB}")
    spark.createDataFrame(rows, "row_id long, src string, tgt string, corpus string") \
        .write.mode("overwrite").saveAsTable(f"{DB}.pool")
    return lake


def select(lake: Path, *argv: str) -> list[str]:
    return ["--pair", "zh-en", "--input-table", f"{DB}.pool", "--corpus", "pool", *argv,
            "--lake", str(lake), "--set", f"lake.database={DB}"]


def seed_args(zh: Path | str = SELECT / "seed-medical.zh",
              en: Path | str = SELECT / "seed-medical.en") -> list[str]:
    return ["--seed", str(zh), str(en)]


def test_an_empty_seed_is_an_error(lake: Path, tmp_path: Path, capsys) -> None:
    empty_zh, empty_en = tmp_path / "e.zh", tmp_path / "e.en"
    empty_zh.write_text("\n\n", encoding="utf-8")
    empty_en.write_text("\n\n", encoding="utf-8")
    assert select_job.main(select(lake, *seed_args(empty_zh, empty_en), "--top", "5")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"sluice: error: seed {empty_zh} {empty_en}: no lines (an empty seed "
                   "selects nothing)"]


def test_a_seed_in_the_wrong_language_is_an_error(lake: Path, capsys) -> None:
    en, zh = SELECT / "seed-medical.en", SELECT / "seed-medical.zh"
    assert select_job.main(select(lake, *seed_args(en, zh), "--top", "5")) == 2  # swapped
    err = capsys.readouterr().err
    assert "lines are identified as zh" in err and "wrong file or language order" in err


def test_a_seed_that_is_not_a_moses_pair_is_an_error(lake: Path, tmp_path: Path,
                                                     capsys) -> None:
    short = tmp_path / "short.en"
    short.write_text("\n".join(lines("seed-medical.en")[:50]) + "\n", encoding="utf-8")
    assert select_job.main(select(lake, *seed_args(en=short), "--top", "5")) == 2
    assert "differ in length" in capsys.readouterr().err


def test_a_seed_that_is_not_utf8_names_file_and_line(lake: Path, tmp_path: Path,
                                                      capsys) -> None:
    bad = tmp_path / "bad.zh"
    bad.write_bytes("\n".join(lines("seed-medical.zh")).encode("gb18030"))
    assert select_job.main(select(lake, *seed_args(zh=bad), "--top", "5")) == 2
    assert f"seed file {bad}: line 1: not UTF-8" in capsys.readouterr().err


def test_a_missing_input_table_is_an_error(lake: Path, capsys) -> None:
    argv = [*select(lake, *seed_args(), "--top", "5"), "--input-table", f"{DB}.no_such"]
    assert select_job.main(argv) == 2
    assert f"input table {DB}.no_such: not in the catalog" in capsys.readouterr().err


def test_top_larger_than_the_pool_is_an_error(lake: Path, capsys) -> None:
    assert select_job.main(select(lake, *seed_args(), "--top", "1000")) == 2
    err = capsys.readouterr().err
    assert "--top 1,000 is larger than the pool" in err


def test_reusing_models_that_do_not_exist_is_an_error(lake: Path, capsys) -> None:
    argv = select(lake, "--reuse-models", "nope", "--top", "5")
    assert select_job.main(argv) == 2
    assert "models 'nope': none saved under" in capsys.readouterr().err


def test_every_selection_unit_has_its_code_config_and_defaults() -> None:
    from jobs.selection.config import SelectConfig
    from jobs.selection.methods import LOWER_IS_BETTER, METHOD_CLASSES
    from jobs.selection.units import METHODS, UNITS

    assert set(METHOD_CLASSES) == set(METHODS)
    assert {"moore_lewis", "lm_fluency"} == LOWER_IS_BETTER
    defaults = load_select_config(None, [], {"pair": "zh-en", "top": 10,
                                             "seed": {"files": ["seed.tsv"]}})
    for unit in UNITS:
        assert unit.name in SelectConfig.model_fields, unit.name  # its config section
        section = getattr(defaults, unit.name)
        assert hasattr(section, "encoder") == unit.uses_encoder, unit.name

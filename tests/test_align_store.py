"""Which aligner a filter run scores with (jobs/filtering/pair_scores.py
`choose_aligner`, the lake's
aligner store in jobs/lake/models.py), in this session's JVM on the real zh-en Tatoeba pairs of
tests/data/align_tatoeba_zh-en.{zh,en}: trained and saved by name with a manifest, reused by
name or as `latest` without training, a missing name refused, too few pairs to train on
falling back to a saved aligner or to no scores (with a warning), per-pair thresholds."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pandas as pd
import pytest

import udfs.align
from jobs.filtering.config import load_config
from jobs.filtering.pair_scores import align_stage, check_aligner, choose_aligner
from jobs.kit.errors import ConfigError
from jobs.lake.models import STAGING_STALE_S, AlignerStore
from jobs.lake.runs import exit_code
from jobs.lake.store import Lake
from jobs.scorer_training.align_reference import main as align_reference
from udfs.paths import local_path

# Each test trains or loads aligners through the align stage on a whole run's pairs: the
# full suite's, not the fast tier's.
pytestmark = pytest.mark.integration
DATA = Path(__file__).resolve().parent / "data"
ZH, EN = DATA / "align_tatoeba_zh-en.zh", DATA / "align_tatoeba_zh-en.en"


def read_pairs() -> list[tuple[str, str]]:
    zh = ZH.read_text(encoding="utf-8").splitlines()
    en = EN.read_text(encoding="utf-8").splitlines()
    return list(zip(zh, en, strict=True))


def config(*sets: str):
    return load_config(None, ["align.enabled=true", *sets], {"pair": "zh-en"})


@pytest.fixture(scope="module")
def store(spark, tmp_path_factory) -> AlignerStore:
    lake = Lake(spark, str(tmp_path_factory.mktemp("align_store") / "lake"), "align_store")
    return AlignerStore(lake, "zh-en")


def frame(spark, pairs: list[tuple[str, str]]):
    """Rows as the align stage gets them: alive (no reject_rule), plus two already rejected."""
    pdf = pd.DataFrame(pairs, columns=["src", "tgt"])
    pdf.insert(0, "row_id", range(len(pdf)))
    pdf["reject_stage"] = pd.Series([None] * len(pdf), dtype=object)
    pdf.loc[:1, "reject_stage"] = "rules"
    pdf["reject_rule"] = pdf["reject_stage"].map({"rules": "identical"})
    return spark.createDataFrame(pdf)


@pytest.fixture()
def logged(monkeypatch) -> list[str]:
    lines: list[str] = []
    monkeypatch.setattr("jobs.filtering.pair_scores.log", lines.append)
    return lines


@pytest.fixture()
def trainings(monkeypatch) -> list[int]:
    """The pair counts the aligner is trained on in the test (it still trains)."""
    calls: list[int] = []
    real = udfs.align.train_alignment

    def counted(pairs, *args, **kwargs):
        calls.append(len(pairs))
        return real(pairs, *args, **kwargs)

    monkeypatch.setattr(udfs.align, "train_alignment", counted)
    return calls


def scores(df) -> pd.DataFrame:
    cols = ["row_id", "align_coverage", "align_fwd_logprob", "reject_rule"]
    return df.select(*cols).toPandas().sort_values("row_id").reset_index(drop=True)


@pytest.fixture(scope="module")
def first_run(spark, store) -> dict:
    """A run with enough pairs (min_train_pairs lowered to fit the 1,998 alive ones) trains an
    aligner and saves it under its run id."""
    cfg = config("align.min_train_pairs=1000")
    df = frame(spark, read_pairs())
    model_dir = choose_aligner(df, cfg, store, "run-1")
    return {
        "cfg": cfg,
        "df": df,
        "model_dir": model_dir,
        "scores": scores(align_stage(df, cfg, model_dir)),
    }


def test_a_trained_aligner_is_saved_by_name_with_a_manifest(first_run, store) -> None:
    assert first_run["model_dir"] == store.path("run-1")
    manifest = store.manifest("run-1")
    assert manifest["pair"] == "zh-en" and manifest["run_id"] == "run-1"
    assert manifest["sample_pairs_used"] == 1998  # the alive rows, all with text on both sides
    assert manifest["source"] == "filter run run-1: " and manifest["created"]
    assert store.names() == ["run-1"]
    assert not [p for p in store.lake.list_dir(store.root) if ".staging" in p]
    cov = first_run["scores"].align_coverage
    assert cov[2:].notna().all() and cov[:2].isna().all()


def test_a_second_run_reuses_it_by_name_and_as_latest_without_training(
    first_run, store, trainings, logged
) -> None:
    for reference in ("run-1", "latest"):
        cfg = config(f"align.reference={reference}")
        model_dir = choose_aligner(first_run["df"], cfg, store, "run-2")
        assert model_dir == store.path("run-1")
        pd.testing.assert_frame_equal(
            scores(align_stage(first_run["df"], cfg, model_dir)), first_run["scores"]
        )
    assert trainings == [] and store.names() == ["run-1"]
    assert "saved aligner 'run-1' (1,998 pairs of filter run run-1" in logged[0]


def test_latest_is_the_newest_and_the_cli_saves_a_reference(first_run, store, tmp_path) -> None:
    conf = tmp_path / "small.yaml"  # the 2,000 Tatoeba pairs are under the default minimum
    conf.write_text("align: {min_train_pairs: 1000}\n")
    root = store.lake.root
    argv = ["--pair", "zh-en", "--input", str(ZH), str(EN), "--lake", root]
    assert align_reference([*argv, "--name", "tatoeba-ref"]) == 2  # too few pairs: refused
    dead = Path(local_path(store.root)) / ".staging-tatoeba-ref-killed"  # a killed save's
    dead.mkdir(parents=True)
    old = time.time() - STAGING_STALE_S - 60
    os.utime(dead, (old, old))
    assert align_reference([*argv, "--name", "tatoeba-ref", "--config", str(conf)]) == 0
    assert store.names() == ["run-1", "tatoeba-ref"]
    assert not list(dead.parent.glob(".staging-*"))  # its staging renamed, the dead one gone
    manifest = store.manifest("tatoeba-ref")
    assert manifest["source"] == f"{ZH} + {EN}" and manifest["sample_pairs_used"] == 2000
    assert manifest["created"] > store.manifest("run-1")["created"]
    assert store.resolve("latest") == "tatoeba-ref"
    assert align_reference([*argv, "--name", "tatoeba-ref", "--config", str(conf)]) == 2  # taken
    pinned = config("align.reference=latest")  # a filter run's check, before it starts
    check_aligner(store.lake, pinned)
    assert pinned.align.reference == "tatoeba-ref"  # what the run scores with and records


def test_a_missing_name_is_a_one_line_config_error(first_run, store) -> None:
    with pytest.raises(ConfigError, match=r"align.reference 'nope': no zh-en aligner") as err:
        check_aligner(store.lake, config("align.reference=nope"))
    assert "\n" not in str(err.value) and "saved: run-1" in str(err.value)

    def job() -> int:
        check_aligner(store.lake, config("align.reference=nope"))
        return 0

    assert exit_code(job) == 2
    empty = AlignerStore(store.lake, "ru-en")  # nothing saved for the pair
    with pytest.raises(ConfigError, match=r"'latest': no ru-en aligner .* \(saved: none\)"):
        empty.resolve("latest")


def test_too_few_pairs_use_the_newest_saved_aligner(
    spark, first_run, store, trainings, logged
) -> None:
    df = frame(spark, read_pairs()[:300])
    model_dir = choose_aligner(df, config(), store, "run-3")  # default minimum, 298 alive
    assert model_dir == store.path(store.latest())
    assert trainings == [] and "run-3" not in store.names()
    [line] = logged
    assert line.startswith("WARNING align: 298 clean pairs, fewer than align.min_train_pairs")
    assert f"newest saved aligner {store.latest()!r}" in line


def test_too_few_pairs_and_no_saved_aligner_skip_the_stage(spark, tmp_path, trainings, logged):
    empty = AlignerStore(Lake(spark, str(tmp_path / "lake"), "align_store_empty"), "zh-en")
    df = frame(spark, read_pairs()[:300])
    cfg = config()
    model_dir = choose_aligner(df, cfg, empty, "run-4")
    assert model_dir is None and trainings == [] and empty.names() == []
    [line] = logged
    assert line.startswith("WARNING align: skipped: 298 clean pairs, fewer than")
    assert "align scores are null and align rejects nothing" in line
    got = scores(align_stage(df, cfg, model_dir))
    assert got.align_coverage.isna().all() and got.align_fwd_logprob.isna().all()
    assert (got.reject_rule.notna()).sum() == 2  # only the rows rejected before
    lower = config("align.min_train_pairs=200")  # the same rows, enough for this minimum
    assert choose_aligner(df, lower, empty, "run-5") == empty.path("run-5")
    assert trainings == [298] and empty.names() == ["run-5"]


def test_the_pair_threshold_is_used_over_the_global_one(first_run, store) -> None:
    df, model_dir = first_run["df"], first_run["model_dir"]
    alive_cov = first_run["scores"].align_coverage[2:]
    cut = float(alive_cov.quantile(0.2))
    cfg = config("align.min_coverage=0.99", f"align.min_coverage_by_pair={{zh-en: {cut}}}")
    got = scores(align_stage(df, cfg, model_dir))
    rejected = got.reject_rule == "align_coverage"
    assert rejected.sum() == (alive_cov < cut).sum() > 0
    # Only another pair's value (conf/defaults.yaml's zh-en entry taken out): the global 0.99.
    other = config("align.min_coverage=0.99")
    other.align.min_coverage_by_pair = {"ru-en": cut}
    got = scores(align_stage(df, other, model_dir))
    assert (got.reject_rule == "align_coverage").sum() == (alive_cov < 0.99).sum()


def test_the_manifest_file_is_json_with_the_store_fields(first_run, store) -> None:
    text = store.lake.read_text(f"{store.path('run-1')}/manifest.json")
    assert {"pair", "name", "source", "run_id", "created", "sample_pairs_used"} <= set(
        json.loads(text)
    )

"""The additive pair_score (issue 39): each feature's monotone step function, read out of
scikit-learn's one-split trees, giving the booster's own scores in numpy, in Python and in
Spark (real labelled ParaCrawl pairs, with missing features), and never going against a
feature's meaning."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from jobs.filtering.pair_score_additive import (
    additive_logits,
    boosted,
    fit_additive,
    step_values,
)
from jobs.filtering.pair_score_model import against_meaning, scores, train_on_labels
from udfs.pair_features import BY_NAME, score_python

DATA = Path(__file__).resolve().parent / "data"
NAMES = ["embed_cosine", "char_len_ratio"]  # better: +1 and -1


def made(n: int, seed: int, ratio_sign: float) -> tuple[np.ndarray, np.ndarray]:
    """Valid pairs with a higher cosine; their length-ratio gap moves by `ratio_sign`; a
    tenth of the gaps missing."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.5).astype(int)
    cosine = rng.normal(0.5 + 0.2 * y, 0.15)
    ratio = np.abs(rng.normal(0.3 + ratio_sign * 0.2 * y, 0.1))
    ratio[rng.random(n) < 0.1] = np.nan
    return np.column_stack([cosine, ratio]), y


def test_the_steps_give_the_boosters_own_scores() -> None:
    x, y = made(2000, 1, -1.0)
    model = fit_additive(NAMES, x, y)
    assert np.allclose(additive_logits(model, x), boosted(NAMES, x, y).decision_function(x),
                       atol=1e-9)
    assert all(len(step["edges"]) >= 5 for step in model["shapes"])
    python = [score_python(model, dict(zip(NAMES, row, strict=True))) for row in x[:300]]
    assert np.allclose(python, scores(model, x[:300]), atol=1e-12)
    # A value on an edge takes the step at or below it, as the trees send it left.
    step = model["shapes"][0]
    alone = {"features": NAMES[:1], "learner": "additive", "intercept": 0.0, "shapes": [step]}
    edge = step["edges"][2]
    assert additive_logits(alone, [[edge], [np.nextafter(edge, 2.0)], [np.nan]]).tolist() == [
        step["values"][2], step["values"][3], step["missing"]]


def test_a_feature_missing_only_when_scored_takes_its_mean_step() -> None:
    """The cosine is never missing in training: missing when scored, it adds its training
    pairs' mean step, not the trees' larger side (as `capitals_gap` on a Chinese side: it
    was never null in ParaCrawl's cased languages). The length gap, missing in a tenth of
    the training pairs, keeps the step the trees learned for it."""
    x, y = made(2000, 6, -1.0)
    model = fit_additive(NAMES, x, y)
    cosine, ratio = model["shapes"]
    assert cosine["missing"] == pytest.approx(step_values(cosine, x[:, 0]).mean())
    assert min(cosine["values"]) < cosine["missing"] < max(cosine["values"])
    trees = boosted(NAMES, x, y).decision_function([[0.5, np.nan], [0.5, 0.3]])
    assert trees[0] - trees[1] == pytest.approx(
        ratio["missing"] - step_values(ratio, [0.3])[0], abs=1e-9)


def test_a_step_never_goes_against_its_features_meaning() -> None:
    """Made data where valid pairs have the wider length gap (a sign no real crawl holds): the
    gap's steps stay flat, the cosine's only rise."""
    x, y = made(3000, 2, +1.0)
    cosine, ratio = fit_additive(NAMES, x, y)["shapes"]
    assert np.all(np.diff(cosine["values"]) >= 0) and cosine["values"][-1] > cosine["values"][0]
    assert np.ptp(ratio["values"]) == pytest.approx(0.0, abs=1e-9)
    x, y = made(3000, 3, -1.0)  # the way it should go: a wider gap, a lower step
    model = fit_additive(NAMES, x, y)
    ratio = model["shapes"][1]
    assert np.all(np.diff(ratio["values"]) <= 0) and ratio["values"][0] > ratio["values"][-1]
    assert against_meaning(model) == []
    turned = {**ratio, "values": ratio["values"][::-1]}  # a wider gap raising the score
    assert against_meaning({**model, "shapes": [model["shapes"][0], turned]}) == [
        "char_len_ratio"]


def test_labels_choose_the_learner_that_ranks_unseen_groups_better() -> None:
    """Valid pairs have a cosine above 0.7 (more than how far above it) and a small length
    gap: a step a line cannot draw. Every group left out in turn, the additive learner ranks
    better than the linear one and than either input alone, and is the model; the manifest
    keeps both learners' held-out AUCs."""
    rng = np.random.default_rng(4)
    n = 4000
    cosine, gap = rng.random(n), rng.random(n)
    logit = 4.0 * (cosine > 0.7) - 5.0 * gap + 0.5
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    model = train_on_labels(NAMES, np.column_stack([cosine, gap]), y, np.arange(n) % 4)
    learners = model["check"]["learners"]
    assert model["learner"] == "additive" and learners["additive"] > learners["linear"] + 0.01
    assert model["check"]["auc"] == learners["additive"] and model["check"]["not_worse"]
    # What train_pair_score.py prints of it: both learners, and how far each feature's steps
    # move the logit (made with 4 for the cosine's jump, 5 across the gap's range).
    from jobs.scorer_training.pair_score import report

    said = report({**model, "held_apart": {"clean_pairs": int(y.sum()), "auc": 0.0,
                                           "kept_clean": 0.95}}).splitlines()
    assert said[-2] == (f"learners on held-out groups (AUC): linear {learners['linear']:.3f}, "
                        f"additive {learners['additive']:.3f}")
    moves = dict(part.rsplit(" ", 1) for part in said[-1].split(": ", 1)[1].split(", "))
    assert 3.0 < float(moves["embed_cosine"]) < 5.0 and 3.5 < float(moves["char_len_ratio"]) < 6.0


def labelled_pairs() -> list[tuple[str, str, int]]:
    """ParaCrawl release 7 en-fr and en-pl pairs (tests/data/crawl/labelled), and a few with a
    Chinese side, whose capitals_gap is missing."""
    rows = [line.split("\t") for name in ("en-fr", "en-pl") for line in
            (DATA / f"crawl/labelled/{name}.tsv").read_text(encoding="utf-8").splitlines()]
    pairs = [(src, tgt, int(label == "V")) for src, tgt, label in rows]
    return pairs + [("他1998年出生于北京。", "He was born in Beijing in 1998.", 1),
                    ("价格是12元。", "The price is 12 yuan.", 1),
                    ("价格是12元。", "The Board met in Brussels on 3 May.", 0)]


def test_spark_applies_the_steps_as_trained(spark) -> None:
    """An additive model of the text features of real labelled crawl pairs: the pair_score
    Spark computes with `score_expression` is the model's own score, missing features too."""
    from jobs.filtering.config import load_config
    from jobs.filtering.stages import rule_row
    from udfs.pair_features import feature_columns, score_expression

    names = [f.name for f in BY_NAME.values() if set(f.needs) <= {"src", "tgt"}]
    assert "capitals_gap" in names and len(names) >= 3
    pairs = labelled_pairs()
    df = spark.createDataFrame(pairs, "src string, tgt string, valid int")
    row = rule_row(load_config(None, [], {"pair": "en-fr"}))
    features = df.select("valid", *[c.alias(n) for n, c in feature_columns(names, row).items()])
    table = features.toPandas()
    x = table[[f"f_{n}" for n in names]].to_numpy(dtype=float)
    assert np.isnan(x).any()  # the Chinese sides' capitals
    with pytest.MonkeyPatch.context() as patch:  # a small set: fewer rounds, smaller steps
        patch.setattr("jobs.filtering.pair_score_additive.ROUNDS", 40)
        patch.setattr("jobs.filtering.pair_score_additive.MIN_PAIRS_PER_STEP", 20)
        model = fit_additive(names, x, table.valid.to_numpy())
    assert sum(len(step["edges"]) for step in model["shapes"]) >= 3
    # A feature of one step (no edges) adds its constant; Spark does not compute it.
    one_step = {"edges": [], "values": [0.25], "missing": 0.25}
    flat = {**model, "shapes": [*model["shapes"][:-1], one_step]}
    for each in (model, flat):
        got = df.select(score_expression(each, row).alias("s")).toPandas().s.to_numpy()
        assert np.allclose(got, scores(each, x), atol=1e-12)

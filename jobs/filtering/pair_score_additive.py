"""A monotone additive `pair_score`: each feature's own step function, summed into a logit.

Why: a logistic regression gives a feature one slope over its whole range, so a cosine of
0.80 -> 0.85 counts as much as 0.93 -> 0.98. On human-labelled crawl pairs what matters is
where a feature is: a low cosine says "misaligned" loudly, a high one barely separates a valid
pair from an MT'd one. Fitted on ParaCrawl's labels of 24 languages and judged on the one left
out (bench/crawl/pair_score.py), the additive model ranks valid pairs above the rest better
than the linear one for both bundled encoders (docs/measurements/pair-score.md, "Each feature's own
shape").

How: scikit-learn's HistGradientBoostingClassifier with trees of one split each (a tree reads
one feature, so the sum is additive: no interactions learned on made or few labels) and
`monotonic_cst` from each feature's meaning (udfs/pair_features.py `better`: a wider length
gap never raises a score). Its trees are then read out into one step function per feature,
a few dozen thresholds and values, which udfs/pair_features.py `score_expression` applies in
Spark as one CASE per feature: no Python worker, no model file, the same numbers as training.
"""

from __future__ import annotations

from typing import Any

# Boosting rounds (trees of one split), their step and the fewest pairs a step may rest on:
# chosen on release 6.2 of the ParaCrawl labels alone, leaving one language out
# (docs/measurements/pair-score.md); more rounds gained less than 0.005 AUC there.
ROUNDS = 150
LEARNING_RATE = 0.1
MIN_PAIRS_PER_STEP = 100


def fit_additive(features: list[str], x_train: Any, y_train: Any) -> dict[str, Any]:
    """The model of `x_train` (columns in `features` order, NaN missing) and `y_train` (1
    valid, 0 not) as a manifest: `shapes`, one per feature, and the `intercept` they add to.
    A feature never missing in training takes, when missing, its training pairs' mean step
    (the linear model's "missing is the mean"): the trees would send it to their larger side,
    which for `capitals_gap`, null on every caseless side, is its best step."""
    import numpy as np

    x = np.asarray(x_train, dtype=float)
    intercept, stumps = read_stumps(boosted(features, x, y_train))
    shapes = [shape(stumps.get(i, [])) for i in range(len(features))]
    for column, step in zip(x.T, shapes, strict=True):
        if not np.isnan(column).any():
            step["missing"] = float(step_values(step, column).mean())
    return {"features": features, "learner": "additive", "intercept": intercept,
            "shapes": shapes, "monotone": True, "c": None}


def boosted(features: list[str], x_train: Any, y_train: Any) -> Any:
    """The fitted booster: one-split trees, each feature only the way its meaning goes,
    classes weighted equally (as the linear model weighs them)."""
    import numpy as np
    from sklearn.ensemble import HistGradientBoostingClassifier

    from udfs.pair_features import BY_NAME

    return HistGradientBoostingClassifier(
        max_depth=1, max_iter=ROUNDS, learning_rate=LEARNING_RATE,
        min_samples_leaf=MIN_PAIRS_PER_STEP, early_stopping=False, class_weight="balanced",
        monotonic_cst=[BY_NAME[n].better for n in features], random_state=0,
    ).fit(np.asarray(x_train, dtype=float), np.asarray(y_train))


def read_stumps(booster: Any) -> tuple[float, dict[int, list[tuple]]]:
    """The booster's baseline logit and, per feature index, its one-split trees as
    (threshold, value at or below it, value above it, whether a missing value goes below).
    scikit-learn keeps its trees in `_predictors` (no public accessor); tests check that the
    shapes read from them give the booster's own predictions."""
    intercept = float(booster._baseline_prediction.ravel()[0])
    stumps: dict[int, list[tuple]] = {}
    for (tree,) in booster._predictors:  # one tree a round for two classes
        root = tree.nodes[0]
        if root["is_leaf"]:  # nothing left to split on: a constant
            intercept += float(root["value"])
            continue
        left, right = tree.nodes[root["left"]], tree.nodes[root["right"]]
        stumps.setdefault(int(root["feature_idx"]), []).append(
            (float(root["num_threshold"]), float(left["value"]), float(right["value"]),
             bool(root["missing_go_to_left"])))
    return intercept, stumps


def shape(stumps: list[tuple]) -> dict[str, Any]:
    """One feature's stumps summed into a step function: `values[i]` for a value at or below
    `edges[i]` (and above `edges[i-1]`), `values[-1]` above the last edge, `missing` for none."""
    edges = sorted({threshold for threshold, *_ in stumps})
    at = [*edges, float("inf")]  # a point of each step: its upper edge (the last: any above)
    values = [sum(low if point <= t else high for t, low, high, _ in stumps) for point in at]
    missing = sum(low if goes_low else high for _, low, high, goes_low in stumps)
    return {"edges": edges, "values": values, "missing": missing}


def step_values(step: dict[str, Any], column: Any) -> Any:
    """One feature's step value of each of its values (NaN: missing)."""
    import numpy as np

    column = np.asarray(column, dtype=float)
    values = np.asarray(step["values"], dtype=float)
    # The first edge at or above each value is its step's; NaN sorts last.
    found = values[np.searchsorted(np.asarray(step["edges"], dtype=float), column)]
    return np.where(np.isnan(column), float(step["missing"]), found)


def additive_logits(model: dict[str, Any], x: Any) -> Any:
    """The model's logit of every row of `x` (columns in the model's feature order)."""
    import numpy as np

    x = np.asarray(x, dtype=float)
    logit = np.full(len(x), float(model["intercept"]))
    for column, step in zip(x.T, model["shapes"], strict=True):
        logit += step_values(step, column)
    return logit

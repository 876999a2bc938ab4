"""The learned `pair_score`: synthetic negatives, training, and the lake's model store.

Trained like bicleaner-ai: positives are clean pairs; negatives are made from them, one kind
per way web-crawled bitext goes wrong (`NEGATIVE_KINDS`). Every pair goes through the filter's
own scoring (normalize, rule scores, the pair scorers on every row), the features of
udfs/pair_features.py are read off, and a logistic regression is fitted whose weights may only
go the way each feature's meaning goes (`fit_monotone`). Human-labelled pairs train it too
(`train_on_labels`), with a second learner to choose from: additive, each feature its own
monotone step function (jobs/filtering/pair_score_additive.py), which ranks crawl pairs of
unseen languages better. A model is checked against its best single input: where the
combination ranks valid pairs worse, that input alone is the model.

Why these two: a dozen features that are already scores, and a model that must give the same
number in Spark as in training. A linear model is a few floats, an additive one a few dozen
steps per feature; either is applied as one Column expression (no Python worker, no model
file to ship), its probabilities usable as they are and its parts readable (docs/scoring.md
"pair_score"). Trees that combine features (full gradient boosting) rank made negatives
somewhat better (bench/crawl/made_negatives.py prints both: zh-en held-apart AUC 0.991 vs 0.983
with the embedding cosine), but on crawl labels of unseen languages their interactions added nothing
over the additive model (trees of depth 3 against 1: AUC valid vs rest 0.650 against 0.649
with e5-small) and would need a Python worker to apply.

A model is a directory `<lake>/models/pair_score/<pair>/<name>/` holding `manifest.json`
(features, weights and means/stds or an additive model's steps, the threshold that keeps 95%
of held-apart clean pairs, training facts), saved by the lake's model store
(jobs/lake/models.py `PairScoreStore`), so it appears whole.
"""

from __future__ import annotations

import json
import os
import random
from typing import Any

from jobs.filtering.pair_score_additive import additive_logits, fit_additive
from jobs.kit.config import CONF_DIR
from jobs.kit.errors import ConfigError
from jobs.lake.models import PairScoreStore
from udfs.scripts import unspaced

ENGLISH_FLUENCY = "english_fluency"  # the feature read off an English LM (udfs/side_lm.py)

# How clean pairs are turned into bad ones (target side unless said otherwise). The first six
# are a pair's own damage; the last four are near misses, as bicleaner-ai makes them: a crawl's
# misaligned pairs are mostly a document's other sentences, or one side holding a sentence
# more, not random pairs (bench/crawl/dev_set.py measures what they buy on real crawl pairs).
NEGATIVE_KINDS = (
    "misaligned",  # the target of another pair
    "truncated",  # the target cut to its first 30-60%
    "wrong_language",  # the source of another pair on the target side
    "copied",  # the source copied into the target
    "half_translated",  # the target's first half, then the source's second half
    "dropped_span",  # a third to a half of the target removed from its middle
    "neighbour",  # the target of the next pair in its document (its input file's next line)
    "fuzzy",  # the other target most alike in character n-grams (shared names, numbers)
    "extended",  # the target, then its document neighbour's target: one sentence too many
    "src_extended",  # the source, then its document neighbour's source; the target as it is
)
KEEP_VALID = 0.95  # the default threshold keeps this share of held-apart clean pairs
KEEP_VALID_FLOOR = 0.99  # a threshold fitted to a run never goes below the one keeping this
FIT_QUANTILES = (0.5, 0.75)  # held-apart clean scores' quantiles kept; a run fits at the first
# Models that ship with sluice, for any pair (bench/crawl/pair_score.py --ship writes them);
# `pair_score.model: latest` falls back on the one for the run's encoder where the lake has
# none of the pair.
SHIPPED_DIR = CONF_DIR / "pair_score"
SHIPPED_FOR_ENCODER = {"use-multilingual": "paracrawl-use", "e5-small": "paracrawl-e5-small"}
SHIPPED_DEFAULT = SHIPPED_FOR_ENCODER["use-multilingual"]  # the bundled encoder's


def _units(text: str, lang: str) -> tuple[list[str], str]:
    return (list(text), "") if unspaced(lang) else (text.split(), " ")  # cut by characters


def _cut(text: str, lang: str, start: float, end: float) -> str:
    units, sep = _units(text, lang)
    return sep.join(units[int(len(units) * start): int(len(units) * end)])


def negatives(pairs: list[tuple[str, str]], src_lang: str, tgt_lang: str, seed: int = 13,
              neighbours: list[tuple[str, str] | None] | None = None
              ) -> list[tuple[str, str, str]]:
    """(src, tgt, kind) for each pair and each kind, made deterministically from `pairs`.
    `neighbours[i]` is pair i's document neighbour (the next line of its input), None where it
    has none; where none is known, its fuzzy match stands in."""
    rng = random.Random(seed)
    n = len(pairs)
    fuzzy = nearest_targets([t for _, t in pairs])
    out = []
    for i, (src, tgt) in enumerate(pairs):
        other = pairs[(i + 1 + rng.randrange(max(n - 1, 1))) % n] if n > 1 else pairs[i]
        close = pairs[fuzzy[i]]
        near = (neighbours[i] if neighbours else None) or close
        units, sep = _units(tgt, tgt_lang)
        keep = rng.uniform(0.3, 0.6)
        drop_from = rng.uniform(0.2, 0.4)
        drop_to = drop_from + rng.uniform(0.33, 0.5)
        src_units, src_sep = _units(src, src_lang)
        half = (sep.join(units[: len(units) // 2]) + " "
                + src_sep.join(src_units[len(src_units) // 2:])).strip()
        made = {
            "misaligned": other[1],
            "truncated": _cut(tgt, tgt_lang, 0.0, keep),
            "wrong_language": other[0],
            "copied": src,
            "half_translated": half,
            "dropped_span": sep.join(units[: int(len(units) * drop_from)]
                                     + units[int(len(units) * drop_to):]),
            "neighbour": near[1],
            "fuzzy": close[1],
            "extended": _join(tgt, near[1], tgt_lang),
            "src_extended": _join(src, near[0], src_lang),
        }
        out += [(made[kind] if kind == "src_extended" else src,
                 tgt if kind == "src_extended" else made[kind], kind)
                for kind in NEGATIVE_KINDS]
    return out


def _join(first: str, second: str, lang: str) -> str:
    return first + ("" if unspaced(lang) else " ") + second


def nearest_targets(texts: list[str], block: int = 2048) -> list[int]:
    """For each text, the index of the most alike other text (cosine of character 3-4-gram
    TF-IDF vectors, scikit-learn), never one with the same text; itself when there is none."""
    import numpy as np
    from sklearn.feature_extraction.text import TfidfVectorizer

    if len(set(texts)) < 2:
        return list(range(len(texts)))
    vectors = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 4),
                              sublinear_tf=True).fit_transform(texts)
    ids = np.unique(np.asarray(texts, dtype=object), return_inverse=True)[1]
    found = []
    for start in range(0, len(texts), block):  # a block of rows at a time bounds the memory
        sims = (vectors[start:start + block] @ vectors.T).toarray()
        sims[ids[start:start + block, None] == ids[None, :]] = -1.0  # itself and its copies
        best = sims.argmax(axis=1)
        found += [int(j) if sims[k, j] > -1.0 else start + k for k, j in enumerate(best)]
    return found


def auc(scores_pos: list[float], scores_neg: list[float]) -> float:
    """Probability that a random positive outscores a random negative (ties half)."""
    from scipy.stats import rankdata

    ranks = rankdata(list(scores_pos) + list(scores_neg))
    n_pos, n_neg = len(scores_pos), len(scores_neg)
    return float((ranks[:n_pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


# Regularisation strengths tried by `choose_c`: weaker ones let a model lean on features
# whose meaning differs between languages (a length ratio, a script share).
C_GRID = (0.001, 0.01, 0.1, 1.0)


def fit_monotone(features: list[str], x_train: Any, y_train: Any, c: float = 0.1
                 ) -> dict[str, Any]:
    """Logistic regression that may weigh each feature only the way its meaning goes
    (udfs/pair_features.py `better`): a longer length-ratio gap never raises a score, a higher
    cosine never lowers it. Made or few labels then cannot teach it a sign that holds only on
    them. L2 penalty 1/c on the standardized weights, classes weighted equally, a missing
    value taking the mean; solved with scipy's bounded L-BFGS."""
    import numpy as np
    from scipy.optimize import minimize

    from udfs.pair_features import BY_NAME

    x = np.asarray(x_train, dtype=float)
    y = np.asarray(y_train, dtype=float)
    means = np.nanmean(x, axis=0)
    means = np.where(np.isnan(means), 0.0, means)
    x = np.where(np.isnan(x), means, x)
    stds = x.std(axis=0)
    stds = np.where(stds > 1e-9, stds, 1.0)
    signs = np.array([BY_NAME[n].better for n in features], dtype=float)
    z = (x - means) / stds * signs  # oriented: every weight on z is >= 0
    weight = np.where(y == 1, 0.5 / max(y.sum(), 1), 0.5 / max((1 - y).sum(), 1))

    def loss(theta: Any) -> tuple[float, Any]:
        logit = z @ theta[:-1] + theta[-1]
        p = 1.0 / (1.0 + np.exp(-logit))
        nll = weight * (np.logaddexp(0.0, logit) - y * logit)
        grad_logit = weight * (p - y)
        # The weights sum to 1, so 1/(c n) is sklearn's penalty at C=c on n unweighted rows.
        penalty = 0.5 / (c * len(y)) * float(theta[:-1] @ theta[:-1])
        grad = np.append(z.T @ grad_logit + theta[:-1] / (c * len(y)), grad_logit.sum())
        return float(nll.sum()) + penalty, grad

    bounds = [(0.0, None)] * len(features) + [(None, None)]
    theta = minimize(loss, np.zeros(len(features) + 1), jac=True, method="L-BFGS-B",
                     bounds=bounds).x
    return {
        "features": features,
        "weights": [float(w * s) for w, s in zip(theta[:-1], signs, strict=True)],
        "learner": "linear",
        "intercept": float(theta[-1]),
        "means": [float(m) for m in means],
        "stds": [float(s) for s in stds],
        "monotone": True,
        "c": c,
    }


def scores(model: dict[str, Any], x: Any) -> Any:
    """`score_python` of every row of `x` (columns in the model's feature order), vectorized."""
    import numpy as np

    x = np.asarray(x, dtype=float)
    if model.get("learner") == "additive":
        return 1.0 / (1.0 + np.exp(-additive_logits(model, x)))
    means, stds = np.asarray(model["means"]), np.asarray(model["stds"])
    x = np.where(np.isnan(x), means, x)
    logit = model["intercept"] + ((x - means) / stds) @ np.asarray(model["weights"])
    return 1.0 / (1.0 + np.exp(-logit))


def oriented(features: list[str], x: Any) -> Any:
    """Each feature turned so that higher means likelier valid; a missing value its mean."""
    import numpy as np

    from udfs.pair_features import BY_NAME

    x = np.asarray(x, dtype=float)
    means = np.nan_to_num(np.nanmean(x, axis=0)) if len(x) else np.zeros(x.shape[1])
    return np.where(np.isnan(x), means, x) * np.array([BY_NAME[n].better for n in features])


def against_meaning(model: dict[str, Any]) -> list[str]:
    """The features a model weighs against their meaning (`better`): a linear weight of the
    wrong sign, or an additive step that goes the wrong way. Empty for a monotone model."""
    import numpy as np

    from udfs.pair_features import BY_NAME

    if model.get("learner") == "additive":
        return [n for n, step in zip(model["features"], model["shapes"], strict=True)
                if np.any(np.diff(step["values"]) * BY_NAME[n].better < 0)]
    return [n for n, w in zip(model["features"], model["weights"], strict=True)
            if w * BY_NAME[n].better < 0]


def choose_c(features: list[str], x: Any, y: Any, groups: Any) -> tuple[float, dict]:
    """The `C_GRID` strength whose models rank valid pairs best on groups they were not fitted
    on (leave one group out: a language, or a fifth of the pairs), by mean AUC."""
    import numpy as np

    x, y, groups = np.asarray(x, dtype=float), np.asarray(y), np.asarray(groups)
    tried = {}
    for c in C_GRID:
        found = []
        for g in np.unique(groups):
            out = groups == g
            if len(set(y[out])) < 2 or len(set(y[~out])) < 2:
                continue
            model = fit_monotone(features, x[~out], y[~out], c)
            s = scores(model, x[out])
            found.append(auc(list(s[y[out] == 1]), list(s[y[out] == 0])))
        tried[c] = float(np.mean(found)) if found else float("nan")
    best = max(C_GRID, key=lambda c: -1.0 if np.isnan(tried[c]) else tried[c])
    return best, tried


def check(model: dict[str, Any], x: Any, y: Any) -> dict[str, Any]:
    """The model's AUC on labelled pairs it was not fitted on against each input's alone
    (oriented by its meaning): whether it ranks valid pairs at least as well as the best."""
    import numpy as np

    y = np.asarray(y)
    features = model["features"]
    mine = scores(model, x)
    inputs = oriented(features, x)
    by_input = {n: auc(list(inputs[y == 1, i]), list(inputs[y == 0, i]))
                for i, n in enumerate(features)}
    best = max(by_input, key=by_input.get)
    score = auc(list(mine[y == 1]), list(mine[y == 0]))
    return {"pairs": int(len(y)), "valid": int((y == 1).sum()), "auc": score,
            "inputs": by_input, "best_input": best, "not_worse": score >= by_input[best]}


def single_input(name: str, features: list[str], x: Any) -> dict[str, Any]:
    """A model that is one input alone, turned by its meaning: what `train_on_labels` falls
    back to when the combination ranks worse than its best input."""
    import numpy as np

    from udfs.pair_features import BY_NAME

    column = np.asarray(x, dtype=float)[:, features.index(name)]
    mean = float(np.nanmean(column)) if np.isfinite(column).any() else 0.0
    std = float(np.nanstd(column)) or 1.0
    return {"features": [name], "learner": "linear", "weights": [float(BY_NAME[name].better)],
            "intercept": 0.0, "means": [mean], "stds": [std], "monotone": True, "c": None}


def train_on_labels(features: list[str], x: Any, y: Any, groups: Any) -> dict[str, Any]:
    """A monotone model of human-labelled pairs (y 1 valid, 0 not), `groups` naming each
    pair's language (or any split the user holds apart). Each learner, linear
    (`fit_monotone`) and additive (`fit_additive`), scores every group with its model fitted
    without it (leave one group out; the linear one's
    strength chosen so too, `choose_c`); the learner that ranks those held-out pairs best is
    fitted on all of them, and checked on the same held-out scores against its best input
    alone. Where it ranks worse than that input, the input alone is the model, and the
    manifest says so (`check`)."""
    import numpy as np

    x, y, groups = np.asarray(x, dtype=float), np.asarray(y), np.asarray(groups)
    c, tried = choose_c(features, x, y, groups)
    learners: dict[str, Any] = {
        "linear": lambda xs, ys: fit_monotone(features, xs, ys, c),
        "additive": lambda xs, ys: fit_additive(features, xs, ys),
    }
    held = {name: held_out_scores(fit, x, y, groups) for name, fit in learners.items()}
    ok = ~np.isnan(held["linear"])
    by_learner = {name: auc(list(h[ok & (y == 1)]), list(h[ok & (y == 0)]))
                  for name, h in held.items()}
    learner = max(learners, key=lambda name: by_learner[name])  # a tie: the linear one
    model = learners[learner](x, y)
    checked = check(model, x[ok], y[ok])  # its inputs' AUCs; the model's is the held one
    checked["auc"] = by_learner[learner]
    checked["learners"] = by_learner
    checked["not_worse"] = checked["auc"] >= checked["inputs"][checked["best_input"]]
    checked["by"] = "leave one group out"
    chosen = held[learner]
    if not checked["not_worse"]:
        model = single_input(checked["best_input"], features, x)
        chosen = scores(model, x[:, [features.index(checked["best_input"])]])
        ok = np.ones(len(y), dtype=bool)
    return {**model, **thresholds(chosen[ok & (y == 1)]),
            "c_tried": {str(k): v for k, v in tried.items()}, "check": checked}


def held_out_scores(fit: Any, x: Any, y: Any, groups: Any) -> Any:
    """Each pair scored by `fit`'s model of the other groups; NaN where those hold one class."""
    import numpy as np

    held = np.full(len(y), np.nan)
    for g in np.unique(groups):
        out = groups == g
        if len(set(y[~out])) == 2:
            held[out] = scores(fit(x[~out], y[~out]), x[out])
    return held


def thresholds(valid_scores: Any) -> dict[str, Any]:
    """A model's threshold (keeps `KEEP_VALID` of these valid pairs' scores), its floor and
    the quantiles a run fits its threshold with (jobs/filtering/pair_score_stage.py)."""
    import numpy as np

    pos = np.asarray(valid_scores, dtype=float)
    return {"threshold": float(np.quantile(pos, 1 - KEEP_VALID)),
            "threshold_floor": float(np.quantile(pos, 1 - KEEP_VALID_FLOOR)),
            "clean_quantiles": {str(q): float(np.quantile(pos, q)) for q in FIT_QUANTILES}}


def shipped(name: str) -> dict[str, Any] | None:
    """A model that comes with sluice (conf/pair_score/<name>.json), for any pair."""
    path = SHIPPED_DIR / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if name and path.is_file() else None


def load(lake: Any, pair: str, name: str, encoder: str | None) -> dict[str, Any]:
    """The manifest of model `name` of `pair`: one in the lake's model store, else one that
    ships with sluice. `latest`: the pair's newest in the lake, else the one shipped for the
    run's `encoder` (SHIPPED_FOR_ENCODER, trained on human-labelled crawl pairs)."""
    store = PairScoreStore(lake, pair)
    if name == store.LATEST:
        if newest := store.latest():
            return store.manifest(newest)
        if (default := shipped(SHIPPED_FOR_ENCODER.get(encoder or "", ""))) is None:
            raise ConfigError(f"pair_score.model latest: no pair_score model of {pair} in "
                              f"{store.root}, and none ships for the {encoder} encoder; "
                              f"{store.how_to_train}")
        return default
    if store.exists(name):
        return store.manifest(name)
    if shipped(name) is not None:
        return shipped(name)
    raise ConfigError(f"pair_score.model {name}: no such model of {pair} in {store.root} "
                      f"(found: {', '.join(store.names()) or 'none'})")


def check_scorers(model: dict[str, Any], cfg: Any) -> None:
    """A config error unless the run scores what the model reads, with the same encoder (a
    cosine of another encoder is another number)."""
    where = (f"shipped with sluice, the lake having no model of {cfg.pair}"
             if model.get("pair") == "any" else f"of {cfg.pair}")
    if model.get("embedding") and not cfg.embedding.enabled:
        raise ConfigError(f"pair_score model {model['name']} ({where}) reads the embedding "
                          "cosine: set embedding.enabled=true, or train a model for this run's "
                          "scorers (python jobs/train_pair_score.py)")
    if model.get("embedding") and model.get("encoder") != cfg.embedding.encoder:
        raise ConfigError(f"pair_score model {model['name']} ({where}) was trained with the "
                          f"{model.get('encoder')} encoder, this run embeds with "
                          f"{cfg.embedding.encoder}: train one with it "
                          "(python jobs/train_pair_score.py), or embed as the model did "
                          f"(--set embedding.encoder={model.get('encoder')})")
    for section, reads in (("cross_encoder", ("cross_encoder",)),
                           ("mt_detector", ("mt_human", "host_mt")),
                           ("hosts", ("host_mt", "host_langs", "host_pairs"))):
        needed = [f for f in model["features"] if f in reads]
        if needed and not getattr(cfg, section).enabled:
            raise ConfigError(f"pair_score model {model['name']} ({where}) reads "
                              f"{', '.join(needed)}: set {section}.enabled=true (and the "
                              "model's other scorers), or train a model without it")
    if ENGLISH_FLUENCY in model["features"]:
        trained_with, configured = model.get("english_lm"), cfg.pair_score.english_lm
        if not configured or os.path.basename(configured) != os.path.basename(trained_with or ""):
            raise ConfigError(f"pair_score model {model['name']} ({where}) weighs English "
                              f"fluency under the LM {trained_with}, this run's "
                              f"pair_score.english_lm is {configured}: set "
                              f"pair_score.english_lm={trained_with} (make setup builds the "
                              "shipped one), or train a model with yours")
    if model.get("align") and not cfg.align.enabled:
        raise ConfigError(f"pair_score model {model['name']} ({where}) reads word-alignment "
                          "scores: set align.enabled=true (and its aligner)")

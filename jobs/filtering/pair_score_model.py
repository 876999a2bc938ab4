"""The learned `pair_score`: synthetic negatives, training, and the lake's model store.

Trained like bicleaner-ai: positives are clean pairs; negatives are made from them, one kind
per way web-crawled bitext goes wrong (`NEGATIVE_KINDS`). Every pair goes through the filter's
own scoring (normalize, rule scores, the pair scorers on every row), the features of
udfs/pair_features.py are read off, and a logistic regression (scikit-learn) is fitted.

Why logistic regression: a dozen features that are already scores, and a model that must
give the same number in Spark as in training. Its weights are a few floats applied as one
Column expression (no Python worker, no model file to ship); its probabilities are usable as
they are; and its weights can be read (docs/filtering.md "pair_score"). Gradient boosting ranks made
negatives somewhat better (bench/pair_score.py prints both: zh-en held-apart AUC 0.991 vs
0.983 with the embedding cosine) but would need a Python worker per row batch to apply.

A model is a directory `<lake>/models/pair_score/<pair>/<name>/` holding `manifest.json`
(features, weights, means/stds, the threshold that keeps 95% of held-apart clean pairs,
training facts), written under a staging name and renamed, so it appears whole.
"""

from __future__ import annotations

import json
import random
import uuid
from datetime import UTC, datetime
from typing import Any

from jobs.kit.errors import ConfigError
from udfs.scripts import unspaced

# How clean pairs are turned into bad ones (target side unless said otherwise). The first six
# are a pair's own damage; the last four are near misses, as bicleaner-ai makes them: a crawl's
# misaligned pairs are mostly a document's other sentences, or one side holding a sentence
# more, not random pairs (bench/crawl_dev.py measures what they buy on real crawl pairs).
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
MODEL_STORE = "models/pair_score"


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


def fit(features: list[str], x_train: Any, y_train: Any) -> dict[str, Any]:
    """Logistic regression on standardized features, a missing value taking the mean."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    x = np.asarray(x_train, dtype=float)
    means = np.nanmean(x, axis=0)
    means = np.where(np.isnan(means), 0.0, means)
    x = np.where(np.isnan(x), means, x)
    stds = x.std(axis=0)
    stds = np.where(stds > 1e-9, stds, 1.0)
    model = LogisticRegression(C=1.0, class_weight="balanced", max_iter=2000)
    model.fit((x - means) / stds, np.asarray(y_train))
    return {
        "features": features,
        "weights": [float(w) for w in model.coef_[0]],
        "intercept": float(model.intercept_[0]),
        "means": [float(m) for m in means],
        "stds": [float(s) for s in stds],
    }


def model_dir(lake_root: str, pair: str, name: str) -> str:
    return f"{lake_root}/{MODEL_STORE}/{pair}/{name}"


def save(lake: Any, pair: str, name: str, manifest: dict[str, Any]) -> str:
    """Write the model under a staging name, then rename it into place (appears whole)."""
    final = model_dir(lake.root, pair, name)
    if lake.exists(final):
        raise ConfigError(f"pair_score model {name} of {pair} exists ({final}): pick another "
                          "--name")
    staging = f"{lake.root}/{MODEL_STORE}/{pair}/.{name}.staging-{uuid.uuid4().hex[:8]}"
    lake.mkdirs(staging)
    manifest = {**manifest, "name": name, "pair": pair,
                "created": datetime.now(UTC).isoformat(timespec="seconds")}
    lake.write_text(f"{staging}/manifest.json", json.dumps(manifest, indent=1))
    lake.rename(staging, final)
    return final


def load(lake: Any, pair: str, name: str) -> dict[str, Any]:
    """The manifest of model `name` (or the newest, for `latest`) of `pair`."""
    store = f"{lake.root}/{MODEL_STORE}/{pair}"
    names = ([n for n in (p.rstrip("/").rsplit("/", 1)[-1] for p in lake.list_dir(store))
              if not n.startswith(".")] if lake.exists(store) else [])
    if name == "latest":
        found = [json.loads(lake.read_text(f"{store}/{n}/manifest.json") or "{}") for n in names]
        found = [m for m in found if m.get("created")]
        if not found:
            raise ConfigError(f"pair_score.model latest: no pair_score model of {pair} in "
                              f"{store}; train one: python jobs/train_pair_score.py")
        return max(found, key=lambda m: (m["created"], m["name"]))
    if name not in names:
        raise ConfigError(f"pair_score.model {name}: no such model of {pair} in {store} "
                          f"(found: {', '.join(sorted(names)) or 'none'})")
    return json.loads(lake.read_text(f"{store}/{name}/manifest.json") or "{}")

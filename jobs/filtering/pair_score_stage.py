"""The filter's last stage: the learned `pair_score` of every row still alive, and the
rejection of those under the threshold (stage and rule `pair_score`).

The threshold fits the run (`pair_score.fit_to_run`, the default). A model's own threshold keeps
95% of its held-apart clean pairs, which are of the training domain (news); a web crawl's valid
pairs score lower across the board (other register, tokenization, an aligner out of its domain),
and that threshold rejected one valid crawl pair in six (bench/crawl/dev_set.py). So each corpus of
the run gets the model threshold moved by how far its own upper scores sit below the model's
clean ones, with no labels: the shift of the median in log-odds (at least half of what the
rules keep of a corpus is valid wherever a filter is worth running, so its median is a valid
pair's score), never upwards, and never below the score that keeps 99% of the held-apart clean
pairs (a corpus of mostly bad pairs cannot drag it further). A corpus
like the training data keeps the model's threshold. The threshold each row was judged by is
stored (`pair_score_threshold`), so the report and a re-decide read it back.
"""

from __future__ import annotations

import math
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.filtering.config import FilterConfig
from jobs.filtering.pair_score_model import FIT_QUANTILES, check_scorers, load
from jobs.filtering.scorer_rules import BY_RULE
from jobs.filtering.stages import alive, reject_where, rule_row
from jobs.kit.errors import ConfigError
from jobs.kit.progress import log
from jobs.lake.models import for_executors
from udfs.pair_features import available, score_expression
from udfs.side_lm import add_english_lm, english_side

THRESHOLD_COLUMN = "pair_score_threshold"
FIT_QUANTILE = FIT_QUANTILES[0]


def threshold(cfg: FilterConfig, model: dict[str, Any]) -> float:
    """The threshold before any fitting: `pair_score.min_score`, else the model's own."""
    return cfg.pair_score.min_score if cfg.pair_score.min_score is not None \
        else float(model["threshold"])


def _logit(p: float) -> float:
    p = min(max(p, 1e-12), 1 - 1e-12)
    return math.log(p / (1 - p))


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def fitted_threshold(model: dict[str, Any], run_quantile: float) -> float:
    """The model's threshold moved down by the run's shortfall at the fit quantile (log-odds),
    not below the model's floor (module docstring)."""
    clean = float(model["clean_quantiles"][str(FIT_QUANTILE)])
    shift = min(0.0, _logit(run_quantile) - _logit(clean))
    own = float(model["threshold"])
    # No shortfall: the model's own threshold, exactly (the log-odds round trip can land an
    # ulp above it, and a run then cuts a pair the model keeps).
    moved = own if shift == 0.0 else min(own, _sigmoid(_logit(own) + shift))
    return max(float(model["threshold_floor"]), moved)


def fits(cfg: FilterConfig, model: dict[str, Any]) -> bool:
    """Whether this run fits its threshold: asked for, not overridden, and a model that
    carries what fitting needs (models trained before it do not)."""
    ps = cfg.pair_score
    return ps.fit_to_run and ps.min_score is None and "clean_quantiles" in model


def corpus_thresholds(scored: DataFrame, cfg: FilterConfig,
                      model: dict[str, Any]) -> dict[str, float]:
    """Each corpus's threshold: fitted where it has at least `pair_score.fit_min_rows` alive
    rows, the model's own elsewhere."""
    base = threshold(cfg, model)
    if not fits(cfg, model):
        return {}
    rows = (scored.where(alive()).groupBy("corpus")
            .agg(F.count("*").alias("n"),
                 F.percentile_approx("pair_score", FIT_QUANTILE, 10000).alias("q"))
            .collect())
    out = {}
    for r in sorted(rows, key=lambda r: r.corpus):
        if r.n >= cfg.pair_score.fit_min_rows:
            out[r.corpus] = fitted_threshold(model, r.q)
            log(f"pair_score threshold of {r.corpus}: {out[r.corpus]:.3f}, fitted to its "
                f"{r.n:,} scored rows (median {r.q:.3f}; model {base:.3f})")
        else:
            out[r.corpus] = base
            log(f"pair_score threshold of {r.corpus}: the model's {base:.3f} ({r.n:,} scored "
                f"rows, under pair_score.fit_min_rows {cfg.pair_score.fit_min_rows:,})")
    return out


def pair_score_model(cfg: FilterConfig, lake: Any) -> dict[str, Any]:
    """The run's pair_score model (its manifest), checked against what the run scores."""
    model = load(lake, cfg.pair, cfg.pair_score.model, cfg.embedding.encoder)
    check_scorers(model, cfg)
    return model


def pin_pair_score_model(cfg: FilterConfig, lake: Any) -> None:
    """Before a filter run does any work: a missing model, or one that reads scores the run
    does not compute, fails now rather than after the embedding pass; and `latest` is pinned
    to the model it names now, so the run scores with that one even if another is trained
    meanwhile, and its record (report, re-decide) names it. A refresh checks the model
    (`pair_score_model`) but does not pin it (jobs/refreshing/job.py says why)."""
    if cfg.pair_score.enabled:
        cfg.pair_score.model = pair_score_model(cfg, lake)["name"]


def with_english_lm(df: DataFrame, cfg: FilterConfig, spark: Any) -> DataFrame:
    """`df` plus `english_lm` on the alive rows, under `pair_score.english_lm` (null on
    every row of a pair with no English side: the LM is then not even shipped)."""
    side = english_side(cfg.sides)
    if side is None:
        log("English fluency: no English side, english_lm null")
        return add_english_lm(df, cfg.sides, "", alive())
    path = for_executors(spark, str(cfg.pair_score.english_lm), "pair_score.english_lm")
    log(f"English fluency: {side} under {cfg.pair_score.english_lm}")
    return add_english_lm(df, cfg.sides, path, alive())


def pair_score_stage(df: DataFrame, cfg: FilterConfig,
                     model: dict[str, Any]) -> tuple[DataFrame, dict]:
    """`df` with `pair_score` and `pair_score_threshold` (null on rows already rejected) and
    its rejections; the model's manifest. A model whose features this run does not store is a
    config error. `df` is read twice when the threshold is fitted: stage it first."""
    missing = sorted(set(model["features"]) - set(available(df.columns)))
    if missing:
        raise ConfigError(
            f"pair_score model {model['name']} needs {', '.join(missing)}, which this run does "
            "not score: turn on the scorers it was trained with "
            f"(align: {model.get('align', False)}, embedding: {model.get('embedding', False)})")
    score = score_expression(model, rule_row(cfg))
    df = df.withColumn("pair_score", F.when(alive(), score))
    cut: Any = F.lit(threshold(cfg, model))
    by_corpus = corpus_thresholds(df, cfg, model)
    if by_corpus:
        cut = F.coalesce(F.create_map(*[F.lit(x) for kv in by_corpus.items() for x in kv])
                         [F.col("corpus")], cut)
    df = df.withColumn(THRESHOLD_COLUMN, F.when(alive(), cut.cast("double")))
    unit = BY_RULE["pair_score"]
    low = unit.failing(cfg, F.col(THRESHOLD_COLUMN))
    return reject_where(df, low, unit.stage, unit.rule), model

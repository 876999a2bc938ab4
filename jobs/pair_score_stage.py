"""The filter's last stage: the learned `pair_score` of every row still alive, and the
rejection of those under the threshold (stage and rule `pair_score`)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.config import ConfigError, FilterConfig
from jobs.pair_score_model import load
from jobs.stages import PAIR_SCORE_RULE, alive, reject_where, rule_row
from udfs.pair_features import available, score_expression


def threshold(cfg: FilterConfig, model: dict[str, Any]) -> float:
    return cfg.pair_score.min_score if cfg.pair_score.min_score is not None \
        else float(model["threshold"])


def pair_score_stage(df: DataFrame, cfg: FilterConfig, lake: Any) -> tuple[DataFrame, dict]:
    """`df` with `pair_score` (null on rows already rejected) and its rejections; the model's
    manifest. A model whose features this run does not store is a config error."""
    model = load(lake, cfg.pair, cfg.pair_score.model)
    missing = sorted(set(model["features"]) - set(available(df.columns)))
    if missing:
        raise ConfigError(
            f"pair_score model {model['name']} needs {', '.join(missing)}, which this run does "
            "not score: turn on the scorers it was trained with "
            f"(align: {model.get('align', False)}, embedding: {model.get('embedding', False)})")
    score = score_expression(model, rule_row(cfg))
    df = df.withColumn("pair_score", F.when(alive(), score))
    low = F.col("pair_score") < threshold(cfg, model)
    return reject_where(df, low, *PAIR_SCORE_RULE), model

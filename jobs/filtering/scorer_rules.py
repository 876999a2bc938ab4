"""The pair scorers' decisions as units, like the rules of udfs/rules.py: each names its scorer,
its reject stage and rule, the stored score it cuts and the setting its threshold comes from.
The filter (jobs/filtering/pair_scores.py, jobs/filtering/pair_score_stage.py), the re-decide
(jobs/filtering/redecide.py), the funnel (jobs/filtering/stages.py `STAGES`) and the report
(jobs/reporting/thresholds.py) all read them, so a new scorer's decision is written once, here.

Every scorer decision is a minimum: a row whose score is under the threshold is rejected (a
null score passes: rows the scorer never reached)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from pyspark.sql import Column
from pyspark.sql import functions as F

from jobs.filtering.config import FilterConfig
from jobs.kit.errors import ConfigError
from jobs.lake.models import on_this_machine
from udfs.cross_encoder_model import CrossEncoderCard

# (config key, value) of a threshold; value None: the scorer's model decides (pair_score).
Setting = tuple[str, float | None]


@dataclass(frozen=True)
class ScorerRule:
    scorer: str  # the config section that turns the scorer on
    stage: str  # reject_stage
    rule: str  # reject_rule
    score: str  # the stored score column it cuts
    applies: Callable[[FilterConfig], bool]
    setting: Callable[[FilterConfig], Setting]
    # The config keys (fnmatch patterns) that change only how the unit decides, not its score:
    # what a re-decide may change (jobs/filtering/redecide.py).
    decided_by: tuple[str, ...] = ()

    def failing(self, cfg: FilterConfig, threshold: Column | None = None) -> Column:
        """True where a row's score is under the threshold: the setting's, or `threshold`
        (a column: the pair_score a run fitted per corpus)."""
        if threshold is None:
            key, value = self.setting(cfg)
            if value is None:
                raise ValueError(f"{self.rule}: {key} is decided by its model: pass threshold")
            threshold = F.lit(float(value))
        return F.col(self.score) < threshold


def _align(cfg: FilterConfig) -> Setting:
    by_pair = cfg.align.min_coverage_by_pair
    key = "align.min_coverage_by_pair" if cfg.pair in by_pair else "align.min_coverage"
    return key, cfg.align.min_coverage_for(cfg.pair)


def _cosine(cfg: FilterConfig) -> Setting:
    name, enc = cfg.embedding.encoder, cfg.embedding.chosen
    by_pair = "_by_pair" if cfg.pair in enc.min_cosine_by_pair else ""
    return f"embedding.encoders.{name}.min_cosine{by_pair}", enc.min_cosine_for(cfg.pair)


def _margin(cfg: FilterConfig) -> Setting:
    name = cfg.embedding.encoder
    return f"embedding.encoders.{name}.min_margin", cfg.embedding.chosen.min_margin


def _margin_applies(cfg: FilterConfig) -> bool:
    emb = cfg.embedding
    return emb.enabled and emb.margin_k > 0 and emb.chosen.min_margin is not None and _gates(cfg)


def _gates(cfg: FilterConfig) -> bool:
    """Whether align's and embedding's own thresholds reject rows: not when pair_score is on
    and decides alone (conf/defaults.yaml `pair_score.decides_alone`)."""
    return not (cfg.pair_score.enabled and cfg.pair_score.decides_alone)


def _lm(side: int) -> Callable[[FilterConfig], Setting]:
    def setting(cfg: FilterConfig) -> Setting:
        lang = cfg.langs[side]
        by_lang = f"lm.min_logprob_by_lang.{lang}" if lang in cfg.lm.min_logprob_by_lang else ""
        return by_lang or "lm.min_logprob", cfg.lm.min_for(lang)

    return setting


def _lm_applies(side: int) -> Callable[[FilterConfig], bool]:
    return lambda cfg: (cfg.lm.enabled and not (side == 1 and cfg.mono)
                        and _lm(side)(cfg)[1] is not None)


def _classifier(section: str) -> Callable[[FilterConfig], Setting]:
    """The threshold of a cross-encoder-kind scorer (`cross_encoder`, `mt_detector`)."""

    def setting(cfg: FilterConfig) -> Setting:
        conf = getattr(cfg, section)
        if conf.min_score is not None:
            return f"{section}.min_score", conf.min_score
        return f"{section}.model {conf.model} (its threshold)", model_threshold(conf.model,
                                                                                section)

    return setting


def model_card(model: str, section: str) -> CrossEncoderCard:
    """A cross-encoder-kind model's card, read on the driver: a missing model is a config
    error (the filter job asks before it reads a file)."""
    try:
        return CrossEncoderCard.read(on_this_machine(model))
    except FileNotFoundError as err:
        raise ConfigError(f"{section}.model: {err}") from None


@cache
def model_threshold(model: str, section: str = "cross_encoder") -> float:
    """A cross-encoder model's own threshold (its card's)."""
    card = model_card(model, section)
    if card.threshold is None:
        raise ConfigError(f"{section}.model {model}: its card has no threshold; set "
                          f"{section}.min_score")
    return card.threshold


def _pair_score(cfg: FilterConfig) -> Setting:
    return "pair_score.min_score", cfg.pair_score.min_score


# In the order rows meet them: the cheapest scorer first, the learned score last.
LM_DECIDED_BY = ("lm.enabled", "lm.min_logprob", "lm.min_logprob_by_lang*")
SCORER_RULES: tuple[ScorerRule, ...] = (
    ScorerRule("lm", "lm", "lm_src", "lm_src", _lm_applies(0), _lm(0), LM_DECIDED_BY),
    ScorerRule("lm", "lm", "lm_tgt", "lm_tgt", _lm_applies(1), _lm(1), LM_DECIDED_BY),
    ScorerRule("align", "align", "align_coverage", "align_coverage",
               lambda cfg: cfg.align.enabled and _gates(cfg), _align,
               ("align.enabled", "align.min_coverage", "align.min_coverage_by_pair*")),
    ScorerRule("embedding", "embed", "embed_cosine", "embed_cosine",
               lambda cfg: cfg.embedding.enabled and _gates(cfg), _cosine,
               ("embedding.enabled", "embedding.encoders.*.min_cosine",
                "embedding.encoders.*.min_cosine_by_pair*")),
    ScorerRule("embedding", "embed", "embed_margin", "embed_margin", _margin_applies, _margin,
               ("embedding.encoders.*.min_margin",)),
    # Like align and embedding, a pair_score input that decides alone with it, unless its own
    # min_score is set.
    ScorerRule("cross_encoder", "cross_encoder", "cross_encoder", "cross_encoder",
               lambda cfg: cfg.cross_encoder.enabled and (
                   cfg.cross_encoder.min_score is not None or _gates(cfg)),
               _classifier("cross_encoder"), ("cross_encoder.min_score",
                                              "pair_score.decides_alone")),
    # A rule only where min_score is set: the detector is a pair_score input first.
    ScorerRule("mt_detector", "mt_detector", "mt_human", "mt_human",
               lambda cfg: cfg.mt_detector.enabled and cfg.mt_detector.min_score is not None,
               lambda cfg: ("mt_detector.min_score", cfg.mt_detector.min_score),
               ("mt_detector.min_score",)),
    ScorerRule("pair_score", "pair_score", "pair_score", "pair_score",
               lambda cfg: cfg.pair_score.enabled, _pair_score,
               ("pair_score.enabled", "pair_score.min_score", "pair_score.decides_alone",
                "pair_score.fit_to_run")),
)
BY_RULE = {u.rule: u for u in SCORER_RULES}


def scorer_rules(cfg: FilterConfig, stage: str | None = None) -> list[ScorerRule]:
    """The scorer decisions `cfg` makes (of one reject stage), in funnel order."""
    return [u for u in SCORER_RULES if u.applies(cfg) and stage in (None, u.stage)]

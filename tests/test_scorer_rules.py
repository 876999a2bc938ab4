"""The pair scorers' decisions are units (jobs/filtering/scorer_rules.py): the funnel's stages, the
re-decide's comparisons and the report's thresholds all come from them, and agree."""

from __future__ import annotations

import pytest

from jobs.filtering.config import load_config
from jobs.filtering.scorer_rules import SCORER_RULES, scorer_rules
from jobs.filtering.steps import STAGES, rule_sequence
from jobs.reporting.thresholds import scorer_thresholds


def redecided(cfg) -> list[tuple[str, str]]:
    """(stage, rule) a re-decide's scorer stages decide by (jobs/filtering/steps.py)."""
    return [(u.stage, u.rule) for s in STAGES if s.scorer for u in scorer_rules(cfg, s.name)]


ALL_ON = ["lm.enabled=true", "lm.models={zh: zh.binlm, de: de.binlm, en: en.binlm}",
          "lm.min_logprob=-4", "lm.min_logprob_by_lang={en: -3.5}",
          "align.enabled=true", "embedding.enabled=true", "embedding.margin_k=4",
          "cross_encoder.enabled=true", "cross_encoder.min_score=0.4", "mt_detector.enabled=true",
          "mt_detector.min_score=0.3", "pair_score.enabled=true"]


@pytest.mark.parametrize("pair", ["zh-en", "de-en"])
def test_funnel_redecide_and_report_read_the_same_units(spark, pair: str) -> None:
    sets = [*ALL_ON, "pair_score.min_score=0.5", "pair_score.decides_alone=false"]
    cfg = load_config(None, sets, {"pair": pair})
    steps = [(u.stage, u.rule) for u in SCORER_RULES]
    assert rule_sequence(cfg)[-len(steps):] == steps
    assert redecided(cfg) == steps
    found = scorer_thresholds(cfg, None)
    enc = cfg.embedding.chosen
    assert {col: t.value for col, t in found.items()} == {
        "lm_src": -4.0, "lm_tgt": -3.5,  # en has its own
        "align_coverage": cfg.align.min_coverage_for(pair),
        "embed_cosine": enc.min_cosine_for(pair),
        "embed_margin": enc.min_margin,
        "cross_encoder": 0.4,
        "mt_human": 0.3,
        "pair_score": 0.5,
    }
    # The setting a what-if changes names the key that holds the value for this pair.
    by_pair = pair in enc.min_cosine_by_pair
    assert found["embed_cosine"].setting.endswith("min_cosine_by_pair" if by_pair else
                                                  "min_cosine")


def test_a_scorer_off_or_without_a_threshold_decides_nothing(spark) -> None:
    cfg = load_config(None, ["embedding.enabled=true", "pair_score.enabled=true",
                             "pair_score.decides_alone=false"], {"pair": "zh-en"})
    # margin_k 0: no margin rule; the pair_score's threshold is the model's, given by the run
    assert [r for _, r in redecided(cfg)] == ["embed_cosine", "pair_score"]
    assert set(scorer_thresholds(cfg, None)) == {"embed_cosine"}
    assert scorer_thresholds(cfg, 0.7)["pair_score"].value == 0.7
    with pytest.raises(ValueError, match="decided by its model"):
        SCORER_RULES[-1].failing(cfg)


def test_with_pair_score_deciding_alone_align_and_embedding_only_score(spark) -> None:
    """The default: their scores are the model's features, their cut-offs reject nothing."""
    alone = load_config(None, ALL_ON, {"pair": "de-en"})
    assert alone.pair_score.decides_alone
    assert [r for _, r in rule_sequence(alone)[-4:]][-1] == "pair_score"
    assert not {"align_coverage", "embed_cosine", "embed_margin"} & {
        r for _, r in rule_sequence(alone)}
    assert [r for _, r in redecided(alone)] == ["lm_src", "lm_tgt", "cross_encoder", "mt_human",
                                                "pair_score"]
    gated = load_config(None, [*ALL_ON, "pair_score.decides_alone=false"], {"pair": "de-en"})
    assert [r for _, r in redecided(gated)] == [u.rule for u in SCORER_RULES]


def test_a_run_stored_before_the_pair_score_settings_reads_as_it_ran(spark) -> None:
    """A `runs` row written before decides_alone/fit_to_run existed: its align and embedding
    cut-offs applied and its threshold was the model's, and the report and a re-decide must
    read it so (not with today's defaults)."""
    from jobs.filtering.config import FilterConfig, stored_filter_config

    today = load_config(None, ALL_ON, {"pair": "de-en"}).resolved()
    older = {**today, "pair_score": {k: v for k, v in today["pair_score"].items()
                                     if k not in ("decides_alone", "fit_to_run",
                                                  "fit_min_rows")}}
    cfg = FilterConfig.model_validate(stored_filter_config(older))
    assert not cfg.pair_score.decides_alone and not cfg.pair_score.fit_to_run
    assert [r for _, r in rule_sequence(cfg)][-len(SCORER_RULES):] == [u.rule for u in SCORER_RULES]
    assert stored_filter_config(today) == today  # a run that stored them keeps its own


def test_the_cross_encoder_is_a_pair_score_input_when_the_pair_score_decides_alone() -> None:
    def rules(*sets: str) -> list[str]:
        cfg = load_config(None, ["cross_encoder.enabled=true", *sets], {"pair": "is-en"})
        return [u.rule for u in scorer_rules(cfg)]

    assert rules() == ["cross_encoder"]  # alone: its model's threshold decides
    assert "cross_encoder" not in rules("pair_score.enabled=true")
    assert "cross_encoder" in rules("pair_score.enabled=true", "pair_score.decides_alone=false")
    assert "cross_encoder" in rules("pair_score.enabled=true", "cross_encoder.min_score=0.2")

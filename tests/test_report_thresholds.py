"""Which setting cuts which stored score (jobs/reporting/thresholds.py), without Spark: each
threshold setting declares the score it cuts (udfs/rules.py `Setting.cuts`)."""

from __future__ import annotations

from pathlib import Path

from jobs.filtering.config import load_config
from jobs.reporting.thresholds import (
    grouped,
    passes,
    redecide_command,
    rule_thresholds,
    score_columns,
    scorer_thresholds,
    what_if_grid,
)
from udfs.rules import RULES

REPO = Path(__file__).resolve().parent.parent


def test_each_score_is_cut_by_the_setting_named_for_it() -> None:
    cfg = load_config(REPO / "conf/zh-en.yaml")
    found = rule_thresholds(cfg.rules_run, cfg.rule_settings, cfg.langs, cfg.mono)
    t = found["src_tokens"]
    assert (t.setting, t.rule, t.kind, t.value) == ("rules.max_tokens", "too_many_tokens",
                                                    "max", cfg.rules.max_tokens)
    assert found["token_ratio"].kind == "range"
    # per language: the zh side's characters per word range, the en side's the default one
    zh = cfg.rules.char_word_ratio_by_lang["zh"]
    assert found["src_char_word_ratio"].value == (zh.min, zh.max)
    default = cfg.rules.char_word_ratio
    assert found["tgt_char_word_ratio"].value == (default.min, default.max)
    # langid_src stores both sides' script shares; the target's is langid_tgt's to cut
    assert found["tgt_script_share"].rule == "langid_tgt"
    # no single threshold: a condition (min_copied_words), a length-dependent one (lang_prob),
    # a score with no setting (chars: `empty` fails zero, the first rule that stores it)
    for column in ("copied_words", "src_lang_prob", "src_chars", "bracket_mismatch"):
        assert column not in found, column
    tokens = next(g for g in grouped(found) if g.setting == "rules.max_tokens")
    assert tokens.columns == ("src_tokens", "tgt_tokens")
    grid = what_if_grid(tokens)
    assert cfg.rules.max_tokens in grid and all(v == int(v) for v in grid)  # type: ignore[arg-type]
    assert passes("max", 120, 120) and not passes("max", 120, 121) and passes("min", 0.5, None)
    assert not passes("range", (0.3, 3.0), 3.5)


def test_a_monolingual_run_shows_its_digit_share_threshold() -> None:
    # The setting is max_src_digit_share; a monolingual table stores the score as digit_share
    # (matching them by name once left the report without this threshold).
    cfg = load_config(None, ["rules.disabled=[]"], {
        "lang": "en", "align": {"enabled": False}, "embedding": {"enabled": False},
        "pair_score": {"enabled": False}})
    found = rule_thresholds(cfg.rules_run, cfg.rule_settings, cfg.langs, cfg.mono)
    t = found["digit_share"]
    assert (t.setting, t.rule, t.kind, t.value) == (
        "rules.max_src_digit_share", "src_digit_share", "max", cfg.rules.max_src_digit_share)
    assert {"tokens", "punct_share", "char_word_ratio"} <= found.keys()


def test_every_threshold_setting_cuts_a_score_of_its_rule() -> None:
    for rule in RULES:
        scores = {score for mono in (False, True) for _, score, _ in score_columns(rule, mono)}
        for s in rule.settings:
            assert (s.cuts is None) == (s.bound is None), s.name
            if s.cuts is not None:
                assert s.cuts in scores, (rule.name, s.name)


def test_each_what_if_command_sets_the_value_it_shows() -> None:
    # The report's "apply" command (--redecide RUN --set KEY=VALUE): loading the run's config
    # with that --set gives the threshold exactly the what-if's value, per-language keys too.
    sets = ["rules.disabled=[]"]
    cfg = load_config(REPO / "conf/zh-en.yaml", sets)
    found = rule_thresholds(cfg.rules_run, cfg.rule_settings, cfg.langs, cfg.mono)
    assert found["src_char_word_ratio"].key == "rules.char_word_ratio_by_lang.zh"
    for t in grouped(found):
        value = what_if_grid(t)[0]
        again = load_config(REPO / "conf/zh-en.yaml", [*sets, t.set_value(value)])
        now = rule_thresholds(again.rules_run, again.rule_settings, again.langs, again.mono)
        assert {now[c].value for c in t.columns} == {value}, t.setting
    command = redecide_command("/v/bin/sluice", "r1", "file:///l", found["token_ratio"],
                               (0.25, 4.0))
    assert command == ("/v/bin/sluice filter --redecide r1 --lake file:///l "
                       "--set 'rules.token_ratio={min: 0.25, max: 4}'")


def test_the_pair_scorers_what_if_commands_set_their_own_keys() -> None:
    cfg = load_config(REPO / "conf/zh-en.yaml", [
        "align.enabled=true", "embedding.enabled=true", "pair_score.enabled=true",
        "pair_score.decides_alone=false"])
    found = scorer_thresholds(cfg, pair_score_threshold=0.4)
    assert found["align_coverage"].key in ("align.min_coverage", "align.min_coverage_by_pair.zh-en")
    assert found["pair_score"].set_value(0.5) == "pair_score.min_score=0.5"
    for column in ("align_coverage", "embed_cosine"):
        t = found[column]
        again = load_config(REPO / "conf/zh-en.yaml", [
            "align.enabled=true", "embedding.enabled=true", t.set_value(0.123)])
        assert scorer_thresholds(again, None)[column].value == 0.123, column

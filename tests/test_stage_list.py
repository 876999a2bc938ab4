"""One declared stage list (jobs/filtering/steps.py `STAGES`) that the filter runs, the
re-decide follows and the stats and funnel count by, and the one runner
(jobs/filtering/run.py `FilterRun.through_stages`) that walks it and derives where rows are
staged: a stage added, removed or moved there moves in all of them."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.filtering.config import load_config
from jobs.filtering.redecide import RedecideRun
from jobs.filtering.run import FilterRun
from jobs.filtering.steps import STAGES, Stage, rule_sequence, stages_from

NAMES = [stage.name for stage in STAGES]


def test_the_funnel_order() -> None:
    assert NAMES == ["ingest", "normalize", "rules", "dedup", "near_dup", "lm", "align", "embed",
                     "cross_encoder", "mt_detector", "hosts", "english_lm", "pair_score", "cut"]
    assert [s.name for s in STAGES if s.scorer] == ["lm", "align", "embed", "cross_encoder",
                                                    "mt_detector", "pair_score"]
    assert stages_from("embed") == ("embed", "cross_encoder", "mt_detector", "hosts",
                                    "english_lm", "pair_score", "cut")


def test_the_funnel_lists_each_stages_rules_in_stage_order() -> None:
    cfg = load_config(None, ["pair=zh-en", "align.enabled=true", "dedup.source_side=true"])
    stages = [stage for stage, _ in rule_sequence(cfg)]
    assert stages[0] == "ingest" and stages[-1] == "align"
    assert ("dedup", "duplicate_source") in rule_sequence(cfg)
    order = [s.name for s in STAGES]
    # Each stage's rules come as one run, in the stages' order (a rule's stage may be its
    # own, e.g. langid, but a rule never comes before a rule of an earlier stage).
    firsts = [s for s in order if any(stage == s for stage, _ in rule_sequence(cfg))]
    assert firsts == sorted(firsts, key=order.index)


class Recorder(Stage):
    """A stage that records the order it is called in and never touches Spark."""

    def __init__(self, like: Stage, on: bool, seen: list[str]) -> None:
        self.name, self.shows, self.scorer = like.name, like.name, like.scorer
        self.materialised_input = like.materialised_input
        self.stores_output, self.is_on, self.seen = like.stores_output, on, seen

    def on(self, cfg: Any) -> bool:
        return self.is_on

    def score(self, run: Any, rows: list[str]) -> list[str]:
        self.seen.append(f"score {self.name}")
        return rows + [self.name]

    def decide(self, run: Any, rows: list[str]) -> list[str]:
        self.seen.append(f"decide {self.name}")
        return rows + [self.name]


def walk(run: type, on: dict[str, bool]) -> tuple[list[str], list[str]]:
    """The calls a run kind makes over recording stages, with staging shown as 'stage X'."""
    seen: list[str] = []

    class Walked(run):  # type: ignore[misc, valid-type]
        stages = tuple(Recorder(s, on.get(s.name, True), seen) for s in STAGES)

        def staged(self, rows: list[str], name: str, parts: Any = None) -> list[str]:
            seen.append(f"stage {name}")
            return rows

        def stage(self, name: str) -> Any:
            seen.append(f"show {name}")
            return _Null()

    job = Walked.__new__(Walked)  # no Spark: only the walk is under test
    job.cfg = None
    return job.through_stages([]), seen


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_a_filter_run_scores_every_stage_in_order_and_stages_before_each_scorer() -> None:
    rows, seen = walk(FilterRun, {"near_dup": False, "lm": False, "align": True, "embed": False,
                                  "cross_encoder": False, "mt_detector": False, "hosts": False,
                                  "pair_score": True, "cut": False})
    assert rows == [name for name in NAMES if name not in (
        "near_dup", "lm", "embed", "cross_encoder", "mt_detector", "hosts", "cut")]
    assert seen == [
        "score ingest", "score normalize", "score rules", "score dedup",
        "show normalize+rules+dedup", "stage before_align", "score align",
        # embed is off: not called, and nothing is staged for it; English fluency is one
        # pass, staged with the align scores before pair_score reads them twice
        "score english_lm", "show align+english_lm", "stage before_pair_score",
        "score pair_score",
    ]


def test_with_no_scorer_on_nothing_is_staged_between_stages() -> None:
    _, seen = walk(FilterRun, {"near_dup": False, "lm": False, "align": False, "embed": False,
                               "cross_encoder": False, "mt_detector": False, "hosts": False,
                               "english_lm": False, "pair_score": False, "cut": False})
    assert not [s for s in seen if s.startswith("stage")]


def test_near_dup_reads_its_input_staged_after_exact_dedup() -> None:
    rows, seen = walk(FilterRun, {"lm": False, "align": False, "embed": False,
                                  "cross_encoder": False, "mt_detector": False, "hosts": False,
                                  "english_lm": False, "pair_score": False, "cut": False})
    assert rows == ["ingest", "normalize", "rules", "dedup", "near_dup"]
    assert seen[3:6] == ["score dedup", "show normalize+rules+dedup", "stage before_near_dup"]
    assert seen[6] == "score near_dup"


def test_a_redecide_decides_every_stage_and_stages_once_before_the_scorers() -> None:
    rows, seen = walk(RedecideRun, {"near_dup": False, "lm": False, "align": True,
                                    "embed": True, "cross_encoder": True, "mt_detector": True,
                                    "hosts": True, "pair_score": True})
    assert rows == [name for name in NAMES if name not in ("near_dup", "lm")]
    assert [s for s in seen if not s.startswith("show")] == [
        "decide ingest", "decide normalize", "decide rules", "decide dedup",
        "stage before_align", "decide align", "decide embed", "decide cross_encoder",
        "decide mt_detector", "decide hosts", "decide english_lm", "decide pair_score",
        "decide cut",
    ]


@pytest.mark.parametrize("stage", [s for s in STAGES if s.scorer], ids=lambda s: s.name)
def test_each_scorer_is_turned_on_by_its_own_section(stage: Any) -> None:
    off = load_config(None, ["pair=zh-en"])
    models = ["lm.models={zh: zh.binlm, en: en.binlm}"] if stage.section == "lm" else []
    on = load_config(None, ["pair=zh-en", f"{stage.section}.enabled=true", *models])
    assert not stage.on(off) and stage.on(on)


def test_english_fluency_is_scored_only_for_a_pair_score_that_can_read_it() -> None:
    (english,) = [s for s in STAGES if s.name == "english_lm"]
    assert not english.scorer and not english.rules(load_config(None, ["pair=zh-en"]))
    assert not english.on(load_config(None, ["pair=zh-en"]))
    assert english.on(load_config(None, ["pair=zh-en", "pair_score.enabled=true"]))
    assert not english.on(load_config(None, ["pair=zh-en", "pair_score.enabled=true",
                                             "pair_score.english_lm=null"]))

"""A recipe's run plan (`conf/recipes/<system>/recipe-*.yaml`): its inputs, the steps run once,
and the steps each round repeats. Steps name a `sluice` job and its arguments, or a model to
train and export; arguments are templates (`{inputs.bitext}`, `{round}`, `{model.train}`)
filled in when the step runs, and checked when the plan loads."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from jobs.kit.config import Strict, check_name
from jobs.kit.config_files import deep_merge, parse_override, read_yaml, validated
from jobs.kit.errors import ConfigError

VARIABLE = re.compile(r"\{([a-z_]+(?:\.[A-Za-z0-9_-]+)?)\}")


class TrainStep(Strict):
    """Train a model on a mixture of the lake (`python -m training.train --mixture`), then
    export its last checkpoint for CTranslate2 (`python -m training.export`)."""

    config: str  # a training config (conf/train/*.yaml)
    mixture: str  # NAME[:STAGE] of the `mixture` table
    set: list[str] = Field(default_factory=list)  # --set overrides of the training config


class Step(Strict):
    name: str
    job: str | None = None  # a sluice job: filter, select, translate, mix, ...
    args: list[str] = Field(default_factory=list)  # the job's arguments (templates)
    train: TrainStep | None = None
    from_round: int = Field(0, ge=0)  # a round's step: the first round it runs in

    @model_validator(mode="after")
    def one_kind(self) -> Step:
        check_name("step name", self.name)
        if (self.job is None) == (self.train is None):
            raise ValueError(f"step {self.name!r}: give either `job` or `train`")
        return self


class Rounds(Strict):
    """Round 0 trains on the filtered data; each later round runs its steps from `from_round`
    (translate with the last round's models, filter the synthetic pairs, mix, train) and ends
    when its model's dev score gains less than `min_gain` over the round before, or at `max`."""

    max: int = Field(1, ge=0)
    min_gain: float = 0.0  # dev BLEU points a round must add to go on
    score: str | None = None  # the train step whose dev BLEU decides (default: the first)
    steps: list[Step]


class RecipePlan(Strict):
    name: str
    lake: str = "./lake"
    work: str = "recipes"  # models and the run's record: <work>/<name>/
    inputs: dict[str, str | list[str] | None] = Field(default_factory=dict)
    vars: dict[str, str] = Field(default_factory=dict)  # more names for the templates
    # Your models for round 0, by train step (`--set models.train=models/zh-en-ct2`): round 0
    # uses it instead of training one, and the rounds after it train their own.
    models: dict[str, str] = Field(default_factory=dict)
    steps: list[Step] = Field(default_factory=list)
    rounds: Rounds

    @model_validator(mode="after")
    def names_and_templates(self) -> RecipePlan:
        check_name("recipe name", self.name)
        names = [s.name for s in (*self.steps, *self.rounds.steps)]
        if len(set(names)) != len(names):
            raise ValueError(f"step names must be unique: {names}")
        trained = [s.name for s in self.rounds.steps if s.train]
        if not trained:
            raise ValueError("rounds.steps has no `train` step: nothing decides a round")
        if self.rounds.score not in (None, *trained):
            raise ValueError(f"rounds.score {self.rounds.score!r} is no train step: {trained}")
        if unknown := sorted(set(self.models) - set(trained)):
            raise ValueError(f"models: {unknown} name no train step of the rounds: {trained}")
        known = self.variables("", 0) | {f"model.{n}": "" for n in trained}
        for step in (*self.steps, *self.rounds.steps):
            texts = [*step.args, *(step.train.set if step.train else ()),
                     *((step.train.config, step.train.mixture) if step.train else ())]
            for text in texts:
                for var in VARIABLE.findall(text):
                    if var not in known:
                        raise ValueError(f"step {step.name!r}: unknown {{{var}}} in {text!r}; "
                                         f"known: {', '.join(sorted(known))}")
        return self

    def check_inputs(self) -> None:
        """Refuse to start while an input or var a step reads is unset (nothing has run)."""
        given = self.variables("", 0)
        unset = sorted({var for step in (*self.steps, *self.rounds.steps)
                        for text in (*step.args, *(step.train.set if step.train else ()))
                        for var in VARIABLE.findall(text)
                        if var.startswith(("inputs.", "vars.")) and given[var] is None})
        if unset:
            raise ConfigError(f"recipe {self.name}: {', '.join(unset)} not set (give "
                              f"--set {unset[0]}=...)")

    @property
    def scoring_step(self) -> str:
        return self.rounds.score or next(s.name for s in self.rounds.steps if s.train)

    def variables(self, here: str, round_: int) -> dict[str, Any]:
        """The template names and their values (`model.<step>` are added per round)."""
        return {"name": self.name, "lake": self.lake, "here": here, "round": round_,
                "prev": round_ - 1, "work": f"{self.work}/{self.name}",
                **{f"inputs.{k}": v for k, v in self.inputs.items()},
                **{f"vars.{k}": v for k, v in self.vars.items()}}


def fill(args: list[str], values: dict[str, Any]) -> list[str]:
    """The arguments with their templates filled in; an argument that is one list-valued
    template (`{inputs.bitext}` holding two files) becomes that many arguments."""
    out: list[str] = []
    for arg in args:
        whole = VARIABLE.fullmatch(arg)
        if whole and isinstance(values[whole.group(1)], list):
            out += [str(v) for v in values[whole.group(1)]]
            continue

        def value(m: re.Match) -> str:
            found = values[m.group(1)]
            if found is None:
                raise ConfigError(f"{{{m.group(1)}}} is not set (give --set {m.group(1)}=...)")
            return str(found)

        out.append(VARIABLE.sub(value, arg))
    return out


def load_plan(path: Path, overrides: list[str]) -> RecipePlan:
    """The plan file with `--set key.path=value` overrides (`--set inputs.bitext=data.tsv`)."""
    raw = read_yaml(path)
    for text in overrides:
        raw = deep_merge(raw, parse_override(text))
    return validated(RecipePlan, raw, path)

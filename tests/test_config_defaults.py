"""One defaults policy for every job: the YAML under conf/ is the documented source (each job's
defaults extend conf/lake.yaml); a value also written in the code must agree with it; the
model has no code default for what only the YAML should say."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, TypeAdapter

from jobs.filtering.config import DEFAULTS as FILTER_DEFAULTS
from jobs.filtering.config import FilterConfig
from jobs.kit.config import LAKE_DEFAULTS, JobConfig, load_chain
from jobs.mixing.config import DEFAULTS as MIX_DEFAULTS
from jobs.mixing.config import MixConfig
from jobs.refreshing.config import DEFAULTS as REFRESH_DEFAULTS
from jobs.refreshing.config import RefreshConfig
from jobs.selection.config import DEFAULTS as SELECT_DEFAULTS
from jobs.selection.config import SelectConfig
from jobs.translation.config import DEFAULTS as TRANSLATE_DEFAULTS
from jobs.translation.config import TranslateConfig
from training.config import DEFAULTS as TRAIN_DEFAULTS
from training.config import TrainingConfig

JOBS = {"filter": (FilterConfig, FILTER_DEFAULTS), "select": (SelectConfig, SELECT_DEFAULTS),
        "translate": (TranslateConfig, TRANSLATE_DEFAULTS),
        "refresh": (RefreshConfig, REFRESH_DEFAULTS), "mix": (MixConfig, MIX_DEFAULTS),
        "report, gc": (JobConfig, LAKE_DEFAULTS)}


def disagreeing_defaults(model: type[BaseModel], data: dict, path: str = "") -> list[str]:
    """Fields of `model` (recursively) that have a default in the code which differs from the
    value `data`, the YAML, gives them. (A dict's entries, e.g. `embedding.encoders`, are data
    the YAML ships, not defaults.)"""
    wrong = []
    for name, field in model.model_fields.items():
        if name not in data:
            continue
        kind, value = field.annotation, data[name]
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            wrong += disagreeing_defaults(kind, value, f"{path}{name}.")
        elif not field.is_required():
            as_json = TypeAdapter(kind)
            default = field.get_default(call_default_factory=True)
            if as_json.dump_python(as_json.validate_python(value), mode="json") != \
                    as_json.dump_python(default, mode="json"):
                wrong.append(f"{path}{name}: code {default!r}, YAML {value!r}")
    return wrong


def unknown_keys(model: type[BaseModel], data: dict, path: str = "") -> list[str]:
    """Keys of the YAML that no field of `model` reads (a typo would pass silently there)."""
    found = []
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            found.append(f"{path}{key}")
        elif isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel) \
                and isinstance(value, dict):
            found += unknown_keys(field.annotation, value, f"{path}{key}.")
    return found


@pytest.mark.parametrize("job", JOBS)
def test_each_jobs_yaml_and_model_agree(job: str) -> None:
    model, defaults = JOBS[job]
    documented = load_chain(defaults)
    assert disagreeing_defaults(model, documented) == []
    assert unknown_keys(model, documented) == []


@pytest.mark.parametrize("job", JOBS)
def test_each_jobs_defaults_extend_the_shared_lake_and_spark(job: str) -> None:
    own = load_chain(JOBS[job][1])
    shared = load_chain(LAKE_DEFAULTS)
    assert own["lake"] == shared["lake"]
    assert {k: v for k, v in own["spark"].items() if k != "conf"} == \
        {k: v for k, v in shared["spark"].items() if k != "conf"}
    assert shared["spark"]["conf"].keys() <= own["spark"]["conf"].keys()


def test_no_jobs_defaults_repeat_the_lake_section() -> None:
    conf = Path(LAKE_DEFAULTS).parent
    repeating = [p.name for p in conf.glob("*defaults.yaml")
                 if "\nlake:" in "\n" + p.read_text(encoding="utf-8")]
    assert repeating == []


def test_trainings_yaml_and_model_agree() -> None:
    """Training's defaults are documented in conf/train/defaults.yaml (no lake, no Spark):
    every key there is a field, and every field's code default is the YAML's value."""
    documented = load_chain(TRAIN_DEFAULTS)
    assert disagreeing_defaults(TrainingConfig, documented) == []
    assert unknown_keys(TrainingConfig, documented) == []
    optional = {n for n, f in TrainingConfig.model_fields.items() if not f.is_required()}
    assert set(documented) == optional  # all of them, and run_dir and data left to the run

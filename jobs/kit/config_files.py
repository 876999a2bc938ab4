"""Config files, the one kit every job and training load theirs with: YAML read with one-line
errors naming the file, `extends:` chains (relative to the file that names them), `--set
key.path=value` overrides parsed as YAML, deep merges, and validation into a pydantic model
whose errors are one line naming each key. No Spark and no ICU here: training imports it on
GPU hosts that have neither."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from jobs.kit.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


def deep_merge(base: dict, override: dict) -> dict:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def read_yaml(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: invalid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def load_chain(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    """A config file merged over the file it `extends` (relative to itself), recursively."""
    path = path.resolve()
    if path in seen:
        raise ConfigError(f"{path}: `extends` loops back to itself")
    data = read_yaml(path)
    parent = data.pop("extends", None)
    if parent is None:
        return data
    return deep_merge(load_chain(path.parent / parent, (*seen, path)), data)


def parse_override(text: str) -> dict:
    """`a.b.c=value` -> {"a": {"b": {"c": value}}}, the value parsed as YAML (1.5, true, [a, b])."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected key.path=value")
    dotted, raw = text.split("=", 1)
    if not all(dotted.split(".")):
        raise ConfigError(f"--set {text!r}: expected key.path=value")
    try:
        value: Any = yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError as err:  # e.g. `[1,`: one line naming the --set, not a traceback
        why = getattr(err, "problem", None) or " ".join(str(err).split())
        raise ConfigError(f"--set {text!r}: the value is not valid YAML ({why})") from None
    for key in reversed(dotted.split(".")):
        value = {key: value}
    return value


def validated(model: type[M], data: dict, origin: str | Path | None = None) -> M:
    """`data` as `model`, or a ConfigError of one line naming every wrong key (and the file)."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in err.errors()
        )
        where = f" (from {origin})" if origin else ""
        raise ConfigError(f"invalid config{where}: {problems}") from None

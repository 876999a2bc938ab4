"""Which configured threshold each stored score column is cut at, for the run report
(jobs/report.py). Pure logic: no Spark.

Each rule setting that is a threshold declares the score it cuts and how (udfs/rules.py
`Setting.cuts`, `Setting.bound`), so the link does not hang on names: `max_src_digit_share`
cuts the source's `digit_share`, stored as `src_digit_share` in a bitext table and
`digit_share` in a monolingual one. A setting `<name>_by_lang` overrides it for a side of that
language, `<name>_by_script` for a side whose language's main script it names. A score no
setting cuts (or cut by a length-dependent threshold, like langid's `lang_prob`) gets none. The
pair scorers' thresholds (align, embed, pair_score) are read from their units
(jobs/filtering/scorer_rules.py), which name their settings.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from jobs.filtering.config import FilterConfig
from jobs.filtering.scorer_rules import scorer_rules
from udfs.rules import Range, RowScore, Rule
from udfs.scripts import main_script

Kind = Literal["max", "min", "range"]
@dataclass(frozen=True)
class Threshold:
    """A cut-off on one or more score columns: rows whose every column passes are kept (a null
    score passes, as in the rules). `value` is (low, high) for a range."""

    setting: str  # the config key, e.g. rules.max_tokens
    rule: str  # the reject_rule a failing row gets
    kind: Kind
    value: float | tuple[float, float]
    columns: tuple[str, ...]
    integer: bool = False  # an int setting: what-if values stay whole
    key: str = ""  # the config key to --set (a per-language or per-pair one); "" = `setting`

    def label(self) -> str:
        if self.kind == "range":
            low, high = self.value  # type: ignore[misc]
            return f"{self.setting} = [{low:g}, {high:g}]"
        return f"{self.setting} = {self.value:g}"

    def bounds(self) -> list[float]:
        """The values drawn as rule marks."""
        return list(self.value) if self.kind == "range" else [self.value]  # type: ignore[arg-type]

    def with_value(self, value: float | tuple[float, float]) -> Threshold:
        return Threshold(self.setting, self.rule, self.kind, value, self.columns, self.integer,
                         self.key)

    def set_value(self, value: float | tuple[float, float]) -> str:
        """`--set`'s argument that gives the threshold `value`."""
        if self.kind == "range":
            low, high = value  # type: ignore[misc]
            text = f"{{min: {low:g}, max: {high:g}}}"
        else:
            text = str(int(value)) if self.integer else f"{value:g}"  # type: ignore[arg-type]
        return f"{self.key or self.setting}={text}"


def redecide_command(sluice: str, run_id: str, lake_root: str, t: Threshold,
                     value: float | tuple[float, float]) -> str:
    """The command that re-decides run `run_id` with threshold `t` at `value`: a new run from
    the stored scores, nothing recomputed (docs/filtering.md "Re-deciding a run")."""
    return shlex.join([sluice, "filter", "--redecide", run_id, "--lake", lake_root,
                       "--set", t.set_value(value)])


def passes(kind: Kind, value: float | tuple[float, float], score: float | None) -> bool:
    """Whether a score is kept by the threshold (null passes). The Spark form is in
    jobs/reporting/data.py; this one documents and tests the direction."""
    if score is None:
        return True
    if kind == "max":
        return score <= value  # type: ignore[operator]
    if kind == "min":
        return score >= value  # type: ignore[operator]
    low, high = value  # type: ignore[misc]
    return low <= score <= high


def score_columns(rule: Rule, mono: bool) -> list[tuple[str, str, str | None]]:
    """(stored column, score name, side or None for a row score) of each of a rule's scores,
    in a bitext table (`src_x`, `tgt_x`, row scores) or a monolingual one (only the source's,
    under the names udfs/rules.py gives them there)."""
    found: list[tuple[str, str, str | None]] = []
    for score in rule.scores:
        if isinstance(score, RowScore):
            if not mono:
                found.append((score.name, score.name, None))
            continue
        for side in score.sides:
            if mono and side != "src":
                continue
            for name in score.exprs:
                column = score.mono_names.get(name, name) if mono else f"{side}_{name}"
                found.append((column, name, side))
    return found


def rule_score_names(rule: Rule, mono: bool) -> list[str]:
    """The stored column names of a rule's scores."""
    return [column for column, _, _ in score_columns(rule, mono)]


def _value(raw: Any) -> float | tuple[float, float]:
    if isinstance(raw, Range):
        return (float(raw.min), float(raw.max))
    if isinstance(raw, Mapping):
        return (float(raw["min"]), float(raw["max"]))
    return float(raw)


def rule_thresholds(rules: Sequence[Rule], settings: Mapping[str, Any], langs: tuple[str, str],
                    mono: bool) -> dict[str, Threshold]:
    """Score column -> its threshold, for the rules that ran (`rules`, in run order: a score
    shared by two rules is cut by the first that runs, which is where it rejects rows)."""
    side_lang = {"src": langs[0], "tgt": langs[1]}
    found: dict[str, Threshold] = {}
    claimed: set[str] = set()
    for rule in rules:
        for column, score, side in score_columns(rule, mono):
            if column in claimed or (rule.name.endswith(("_src", "_tgt")) and side is not None
                                     and not rule.name.endswith(side)):
                continue  # langid_src stores both sides' scores but judges only the source's
            claimed.add(column)
            for s in rule.settings:
                if s.cuts != score or s.bound is None or settings.get(s.name) is None:
                    continue
                raw = settings[s.name]
                by_lang = settings.get(f"{s.name}_by_lang") or {}
                by_script = settings.get(f"{s.name}_by_script") or {}
                by_pair = settings.get(f"{s.name}_by_pair") or {}
                pair = next((p for p in (f"{langs[0]}-{langs[1]}", f"{langs[1]}-{langs[0]}")
                             if p in by_pair), None)  # either order (udfs/rules.py pair_setting)
                lang = side_lang[side] if side else langs[0]
                script = main_script(lang)
                key = ""
                if pair is not None:
                    raw = by_pair[pair]
                    key = f"{s.section}.{s.name}_by_pair.{pair}"
                elif lang in by_lang:
                    raw = by_lang[lang]
                    key = f"{s.section}.{s.name}_by_lang.{lang}"
                elif script in by_script:
                    raw = by_script[script]
                    key = f"{s.section}.{s.name}_by_script.{script}"
                found[column] = Threshold(f"{s.section}.{s.name}", rule.name, s.bound,
                                          _value(raw), (column,), s.type is int, key)
                break
    return found


def scorer_thresholds(cfg: FilterConfig,
                      pair_score_threshold: float | None) -> dict[str, Threshold]:
    """The pair scorers' thresholds, from their units (jobs/filtering/scorer_rules.py);
    pair_score's is `pair_score.min_score` or else `pair_score_threshold` (the model's, or the
    run's fit), which `--set pair_score.min_score` replaces."""
    found: dict[str, Threshold] = {}
    for unit in scorer_rules(cfg):
        key, value = unit.setting(cfg)
        to_set = f"{key}.{cfg.pair}" if key.endswith("_by_pair") else key
        if value is None and unit.rule == "pair_score":
            key, value = "pair_score (the run's threshold)", pair_score_threshold
            to_set = "pair_score.min_score"
        if value is not None:
            found[unit.score] = Threshold(key, unit.rule, "min", float(value), (unit.score,),
                                          key=to_set)
    return found


def grouped(by_column: Mapping[str, Threshold]) -> list[Threshold]:
    """One threshold per (setting, rule, value): the columns it cuts together (`src_tokens` and
    `tgt_tokens` under rules.max_tokens), as a what-if varies them together."""
    groups: dict[tuple[str, Any], Threshold] = {}
    for t in by_column.values():
        key = (t.setting, t.rule, t.value, t.key)
        if key in groups:
            old = groups[key]
            groups[key] = Threshold(old.setting, old.rule, old.kind, old.value,
                                    (*old.columns, *t.columns), old.integer, old.key)
        else:
            groups[key] = t
    return list(groups.values())


# What-if grid: the current value times these factors (a range is widened or narrowed about
# both bounds: low / f, high * f).
WHAT_IF_FACTORS = (0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0)


def what_if_grid(t: Threshold) -> list[float | tuple[float, float]]:
    """Values around the current one (the factors' order); a share (a value in 0..1) stays
    in 0..1 and an integer setting stays whole."""
    integer = t.integer

    def scaled(v: float, f: float) -> float:
        out = float(round(v * f)) if integer else float(f"{v * f:.3g}")
        return min(out, 1.0) if 0 <= v <= 1 and not integer else out

    grid: list[float | tuple[float, float]] = []
    for f in WHAT_IF_FACTORS:
        if t.kind == "range":
            low, high = t.value  # type: ignore[misc]
            v: float | tuple[float, float] = (scaled(low, 1 / f), scaled(high, f))
        else:
            v = scaled(t.value, f)  # type: ignore[arg-type]
        if v not in grid:
            grid.append(v)
    if t.value not in grid:
        grid.append(t.value)
    return grid

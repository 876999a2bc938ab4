"""Typed configuration of jobs/mix.py: conf/mix-defaults.yaml, then a mixture file
(`extends` chains), then flags and `--set a.b=c` overrides. Unknown keys are errors; every
default lives in the YAML, so a source's unset keys are null here and mean "not given"."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from jobs.kit.config import CONF_DIR, JobConfig, Strict, check_name, known_pair, load_validated
from jobs.translation.config import NoiseConf

DEFAULTS = CONF_DIR / "mix-defaults.yaml"


class SourceConf(Strict):
    """One source of rows: a lake table with a filter (or a registered dev set), a direction,
    and how many rows it gives (temperature share x weight, or a fixed count or share)."""

    name: str
    table: str | None = None  # db.table or a table of the lake's database (bitext_clean, ...)
    eval_set: str | None = None  # or: a dev set registered with --register-eval (fine-tuning)
    where: str | None = None  # SQL filter on the table: corpus, run_id, method, score ranges
    direction: str  # src-tgt of the rows as the model sees them, e.g. zh-en
    swap: bool = False  # read the table's tgt as source (en-zh bitext, or back-translation)
    synthetic: bool | None = None  # back/forward-translated rows; null: table `synthetic` is
    weight: float = Field(1.0, gt=0)  # multiplies the source's (or its group's) sampling share
    count: int | None = Field(None, ge=0)  # exactly this many rows, outside temperature sampling
    # exactly this many times its rows, outside temperature sampling (HW-TSC WMT21 news: "10x
    # bilingual data sampled from the training corpora")
    epochs: float | None = Field(None, gt=0)
    share: float | None = Field(None, gt=0, lt=1)  # this share of the whole mixture (fine-tune)
    cap: int | None = Field(None, ge=0)  # at most this many rows (copies included)
    max_epochs: float | None = Field(None, gt=0)  # at most this many times its rows
    noise: NoiseConf | None = None  # target-side noise (udfs/noise.py), e.g. for fine-tuning

    _pair = field_validator("direction")(classmethod(lambda cls, v: known_pair(v)))

    @field_validator("name")
    @classmethod
    def plain(cls, value: str) -> str:
        return check_name("source name", value)

    @model_validator(mode="after")
    def one_input(self) -> SourceConf:
        if (self.table is None) == (self.eval_set is None):
            raise ValueError(f"source {self.name}: give `table` or `eval_set` (one of them)")
        if sum(x is not None for x in (self.count, self.share, self.epochs)) > 1:
            raise ValueError(f"source {self.name}: give one of `count`, `share` and `epochs`")
        return self

    @property
    def langs(self) -> tuple[str, str]:
        src, tgt = self.direction.split("-")
        return src, tgt

    @property
    def table_direction(self) -> str:
        """The direction as the table stores it (`pair` / `direction` column)."""
        src, tgt = self.langs
        return f"{tgt}-{src}" if self.swap else self.direction

    @property
    def fixed(self) -> bool:
        return self.count is not None or self.share is not None or self.epochs is not None


class TagsConf(Strict):
    # Prepended to the source: `{tgt}` is the target language (multilingual models, <2xx>).
    target: str | None
    synthetic: str | None  # prepended to back/forward-translated rows (tagged BT)


class StagesConf(Strict):
    """A denoising curriculum. Stage k keeps the mixture's rows whose `column` is at or above
    its `quantiles[k-1]` (rising, so every stage is inside the one before), or at or above
    the absolute `floors[k-1]` (per direction in `floors_by_direction`; null: every row); and
    of those only its `directions[k-1]` and `sources[k-1]` where given (null: all). HW-TSC
    WMT21 triangular: all rule-filtered data in three directions, then LaBSE-clean data, then
    LaBSE-clean ru-zh only."""

    column: str | None
    quantiles: list[float]
    per: Literal["direction", "mixture"]  # where quantiles are taken
    unscored: Literal["keep", "drop"]  # rows without the column (e.g. synthetic ones)
    floors: list[float | None] = Field(default_factory=list)
    floors_by_direction: dict[str, list[float | None]] = Field(default_factory=dict)
    directions: list[list[str] | None] = Field(default_factory=list)
    sources: list[list[str] | None] = Field(default_factory=list)

    @property
    def count(self) -> int:
        """How many stages: the length of the lists that define them (all agree), else 1."""
        lists = [self.quantiles, self.floors, *self.floors_by_direction.values(),
                 self.directions, self.sources]
        return max([1, *map(len, lists)])

    @property
    def scored(self) -> bool:
        """Whether a stage keeps rows by `column`."""
        return bool(self.quantiles or self.floors or self.floors_by_direction)

    @model_validator(mode="after")
    def rising(self) -> StagesConf:
        q = self.quantiles
        if any(not 0 <= x < 1 for x in q) or any(b < a for a, b in zip(q, q[1:], strict=False)):
            raise ValueError(f"stages.quantiles {q}: need rising values in [0, 1)")
        if q and (self.floors or self.floors_by_direction):
            raise ValueError("stages: quantiles or floors, not both")
        if self.scored and not self.column:
            raise ValueError("stages.quantiles/floors need stages.column (e.g. embed_cosine)")
        named = {"quantiles": q, "floors": self.floors, "directions": self.directions,
                 "sources": self.sources,
                 **{f"floors_by_direction.{d}": v for d, v in self.floors_by_direction.items()}}
        wrong = [f"{k} has {len(v)}" for k, v in named.items() if v and len(v) != self.count]
        if wrong:
            raise ValueError(f"stages: every list needs one entry a stage ({self.count} "
                             f"stages): {', '.join(wrong)}")
        return self


class DecontaminateConf(Strict):
    enabled: bool
    sets: list[str] | None  # eval set names; null: every registered set of role `test`
    ngram: int = Field(ge=2)  # n-gram size (tokens: words; characters for zh/ja/th/...)
    min_containment: float = Field(gt=0, le=1)  # share of a segment's n-grams found in a row
    ngram_action: Literal["exclude", "flag"]


class EvalSetConf(Strict):
    """A test or dev set the run registers in `eval_sets` before it mixes (as
    --register-eval does): a Moses-style file pair in `pair` order."""

    name: str
    pair: str
    files: list[str] = Field(min_length=2, max_length=2)
    role: Literal["test", "dev"] = "test"

    _pair = field_validator("pair")(classmethod(lambda cls, v: known_pair(v)))
    _name = field_validator("name")(classmethod(lambda cls, v: check_name("eval set name", v)))


class MixConfig(JobConfig):
    name: str | None  # the mixture's name (its partition of the `mixture` table)
    seed: int
    temperature: float = Field(gt=0)
    temperature_over: Literal["direction", "source"]
    direction_weights: dict[str, float]  # multipliers of directions' temperature shares
    # Rows drawn by temperature; null: the pooled rows' number; `largest`: as many as keep the
    # largest group at its own size, the others over-sampled to n_max (n/n_max)^(1/T) (HW-TSC
    # WMT21 multilingual's Table 3: En/Id 56M stays 56M, Jv/Ta 8.9M becomes 39M at T=5).
    total: Annotated[int, Field(ge=1)] | Literal["largest"] | None
    synthetic_share: float | None = Field(ge=0, lt=1)
    synthetic_share_by_direction: dict[str, float]
    sources: list[SourceConf]
    tags: TagsConf
    stages: StagesConf
    decontaminate: DecontaminateConf
    eval_sets: list[EvalSetConf]  # registered by this run, before it mixes

    _name = field_validator("name")(classmethod(
        lambda cls, v: None if v is None else check_name("mixture name", v)))

    @model_validator(mode="after")
    def consistent(self) -> MixConfig:
        names = [s.name for s in self.sources]
        if len(set(names)) != len(names):
            raise ValueError(f"sources: names repeat: {names}")
        for direction, weight in self.direction_weights.items():
            known_pair(direction)
            if weight <= 0:
                raise ValueError(f"direction_weights.{direction}: need a weight > 0")
        for direction, share in self.synthetic_share_by_direction.items():
            known_pair(direction)
            if not 0 <= share < 1:
                raise ValueError(f"synthetic_share_by_direction.{direction}: need 0 <= x < 1")
        if sum(s.share or 0 for s in self.sources) >= 1:
            raise ValueError("sources: their `share`s add up to 1 or more")
        for direction in {s.direction for s in self.sources}:
            if self.share_of_synthetic(direction) is None:
                continue
            if not [s for s in self.pooled() if s.direction == direction]:
                raise ValueError(f"direction {direction}: synthetic_share needs a natural "
                                 "source to size the synthetic rows by")
        return self

    def is_synthetic(self, s: SourceConf) -> bool:
        if s.synthetic is not None:
            return s.synthetic
        return s.table is not None and s.table.rsplit(".", 1)[-1] == "synthetic"

    def share_of_synthetic(self, direction: str) -> float | None:
        """The synthetic share asked for in `direction`, if it has synthetic sources."""
        if not any(self.is_synthetic(s) and s.direction == direction and not s.fixed
                   for s in self.sources):
            return None
        return self.synthetic_share_by_direction.get(direction, self.synthetic_share)

    def balanced(self, s: SourceConf) -> bool:
        """A synthetic source sized by its direction's synthetic share."""
        return (not s.fixed and self.is_synthetic(s)
                and self.share_of_synthetic(s.direction) is not None)

    def pooled(self) -> list[SourceConf]:
        """The sources temperature sampling sizes."""
        return [s for s in self.sources if not s.fixed and not self.balanced(s)]

    def table_name(self, s: SourceConf) -> str:
        name = s.table if s.table is not None else "eval_sets"
        return name if "." in name else f"{self.lake.database}.{name}"

    def stage_numbers(self) -> list[int]:
        return list(range(1, self.stages.count + 1))

    @model_validator(mode="after")
    def stage_names_known(self) -> MixConfig:
        """A stage's directions and sources are the mixture's own."""
        known = {"directions": {s.direction for s in self.sources},
                 "sources": {s.name for s in self.sources}}
        for what, names in known.items():
            for k, chosen in enumerate(getattr(self.stages, what), 1):
                unknown = sorted(set(chosen or []) - names)
                if unknown:
                    raise ValueError(f"stages.{what}[{k - 1}]: {', '.join(unknown)} is not "
                                     f"one of the mixture's {what} ({', '.join(sorted(names))})")
        return self


def load_mix_config(path: str | Path | None = None, overrides: list[str] | None = None,
                    extra: dict | None = None) -> MixConfig:
    """mix-defaults.yaml <- config file chain <- `extra` (flags) <- `--set` overrides."""
    return load_validated(MixConfig, DEFAULTS, path, overrides, extra)

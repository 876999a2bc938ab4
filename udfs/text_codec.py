"""Text <-> CTranslate2 tokens for a translation model, configured rather than hard-coded,
so any CTranslate2 model directory works:

- `sluice`: a model exported by training.export (its sluice.json and spm.model): the same
  pipeline as training, incl. the `<2xx>` target tag of multilingual models, source reversal
  and right-to-left targets.
- `sentencepiece`: any other model (a converted OPUS-MT, NLLB, ...): SentencePiece models for
  the source and target side, plus literal tokens around the source and a forced target
  prefix (NLLB: `source_prefix: [eng_Latn]`, `target_prefix: [zho_Hans]`; multilingual
  OPUS-MT: `source_prefix: [">>zho<<"]`), which is removed from the output.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Protocol

import sentencepiece as spm

SIDECAR = "sluice.json"  # written by training.export


@dataclass(frozen=True)
class CodecSpec:
    kind: str = "auto"  # auto: sluice when the model directory has sluice.json
    source_model: str | None = None  # sentencepiece: the source side's model file
    target_model: str | None = None  # sentencepiece: the target side's (default: source's)
    source_prefix: tuple[str, ...] = ()
    source_suffix: tuple[str, ...] = ()
    target_prefix: tuple[str, ...] = ()
    max_positions: int | None = None  # sentencepiece: the model's source positions, if known
    target_tag: str | None = None  # the output language (the <2xx> tag of multilingual models)
    source_lang: str | None = None  # the input language, checked against a sluice model's


class TextCodec(Protocol):
    max_tokens: int | None  # the model's position limit, when the codec knows it

    def encode(self, text: str) -> list[str]: ...

    def target_prefix(self) -> list[str] | None: ...

    def decode(self, tokens: list[str]) -> str:
        """Output tokens (the target prefix already removed) back to text."""
        ...


class SluiceCodec:
    def __init__(self, model_dir: str, target_tag: str | None,
                 source_lang: str | None = None) -> None:
        from training.vocab import TextOptions, Vocab

        with open(os.path.join(model_dir, SIDECAR), encoding="utf-8") as fh:
            meta = json.load(fh)
        options = TextOptions(**meta["text_options"])
        if not options.target_tags:  # one direction only: it must be the one asked for
            model_pair = f"{meta['src_lang']}-{meta['tgt_lang']}"
            wanted = f"{source_lang or meta['src_lang']}-{target_tag or meta['tgt_lang']}"
            if wanted != model_pair:
                raise ValueError(f"{model_dir} translates {model_pair}, not {wanted}")
        # CTranslate2 appends </s> to the source: one position fewer for the text.
        self.max_tokens = meta["model_conf"]["max_positions"] - 1
        self.vocab = Vocab.from_file(os.path.join(model_dir, "spm.model"), options)
        self.tag = target_tag if options.target_tags else None
        if options.target_tags and target_tag is None:
            raise ValueError(f"{model_dir} is multilingual (target tags): set target_tag")
        if self.tag is not None:
            self.vocab.tag_id(self.tag)  # raises when the model has no such tag

    def encode(self, text: str) -> list[str]:
        return self.vocab.source_pieces(text, self.tag)

    def target_prefix(self) -> list[str] | None:
        return None

    def decode(self, tokens: list[str]) -> str:
        return self.vocab.decode_target_pieces(tokens)


@dataclass
class SentencePieceCodec:
    spec: CodecSpec
    source: spm.SentencePieceProcessor = field(init=False)
    target: spm.SentencePieceProcessor = field(init=False)
    max_tokens: int | None = field(init=False)

    def __post_init__(self) -> None:
        self.max_tokens = self.spec.max_positions
        if not self.spec.source_model:
            raise ValueError("tokenizer kind sentencepiece needs source_model")
        self.source = spm.SentencePieceProcessor(model_file=self.spec.source_model)
        target = self.spec.target_model or self.spec.source_model
        self.target = spm.SentencePieceProcessor(model_file=target)

    def encode(self, text: str) -> list[str]:
        pieces = self.source.encode(text, out_type=str)
        return [*self.spec.source_prefix, *pieces, *self.spec.source_suffix]

    def target_prefix(self) -> list[str] | None:
        return list(self.spec.target_prefix) or None

    def decode(self, tokens: list[str]) -> str:
        return self.target.decode_pieces(tokens)


def resolve_kind(model_dir: str, spec: CodecSpec) -> str:
    if spec.kind != "auto":
        return spec.kind
    if os.path.exists(os.path.join(model_dir, SIDECAR)):
        return "sluice"
    if spec.source_model:
        return "sentencepiece"
    raise ValueError(
        f"{model_dir} has no {SIDECAR} (not exported by training.export): configure its "
        "tokenizer (kind: sentencepiece, source_model, ...)"
    )


def load_codec(model_dir: str, spec: CodecSpec) -> TextCodec:
    kind = resolve_kind(model_dir, spec)
    if kind == "sluice":
        return SluiceCodec(model_dir, spec.target_tag, spec.source_lang)
    if kind == "sentencepiece":
        return SentencePieceCodec(spec)
    raise ValueError(f"unknown tokenizer kind {kind!r}; expected auto, sluice or sentencepiece")

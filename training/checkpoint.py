"""Checkpoint files: self-contained (model config, SentencePiece model bytes, text options,
weights) so that averaging, export and decoding need nothing else; training checkpoints also
carry optimizer, step, data position and RNG state for an exact resume.

Written atomically (temporary file, then rename): a crash never leaves a half checkpoint."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any

import torch

from training.config import ModelConf
from training.model import Transformer
from training.vocab import TextOptions, Vocab

CKPT_RE = re.compile(r"^ckpt_(\d+)\.pt$")
FORMAT = "sluice-transformer-v1"


def checkpoint_name(step: int) -> str:
    return f"ckpt_{step:08d}.pt"


def list_checkpoints(directory: str | Path) -> list[Path]:
    """Training checkpoints in `directory`, oldest (lowest step) first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = []
    for p in directory.iterdir():
        m = CKPT_RE.match(p.name)
        if m:
            found.append((int(m.group(1)), p))
    return [p for _, p in sorted(found)]


def save_atomic(obj: dict[str, Any], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    torch.save(obj, tmp)
    os.replace(tmp, path)
    return path


def prune(directory: str | Path, keep_last: int) -> list[Path]:
    """Delete all but the newest `keep_last` training checkpoints; returns the deleted."""
    ckpts = list_checkpoints(directory)
    gone = ckpts[:-keep_last] if keep_last > 0 else []
    for p in gone:
        p.unlink(missing_ok=True)
    return gone


def load(path: str | Path) -> dict[str, Any]:
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    if ckpt.get("format") != FORMAT:
        raise ValueError(f"{path}: not a sluice training checkpoint")
    return ckpt


def model_payload(model: Transformer, vocab: Vocab, src_lang: str, tgt_lang: str,
                  extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """What every checkpoint holds: enough to rebuild the model and its text pipeline."""
    payload = {
        "format": FORMAT,
        "model_conf": model.conf.model_dump(mode="json"),
        "vocab_size": model.vocab_size,
        "spm": vocab.proto,
        "text_options": dataclasses.asdict(vocab.options),
        "src_lang": src_lang,
        "tgt_lang": tgt_lang,
        "model": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
    }
    payload.update(extra or {})
    return payload


def build_model(ckpt: dict[str, Any]) -> tuple[Transformer, Vocab]:
    """The model (eval mode, CPU, float32) and vocabulary a checkpoint describes."""
    conf = ModelConf.model_validate(ckpt["model_conf"])
    vocab = Vocab(ckpt["spm"], TextOptions(**ckpt["text_options"]))
    model = Transformer(conf, ckpt["vocab_size"])
    model.load_state_dict(ckpt["model"])
    model.eval()
    return model, vocab

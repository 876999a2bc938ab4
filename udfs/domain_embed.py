"""Sentence-embedding scores of pool rows against an in-domain seed, on the executors.

- k-NN similarity (ZengHuiMT WMT21): the mean cosine of a side's vector to its k nearest seed
  vectors (same side); with both sides, the mean of the two. Higher is more in-domain.
- Vectors for clustering (kmeans_domains): the row's sides' vectors averaged and normalized.

The seed's vectors are computed on the driver and saved as a `.npy` file in the run's models;
each worker loads it once. Encoding is made repeatable as in udfs/embed.py: rows are dealt
into groups by a hash of their id, each group is encoded in an order of its own, on one BLAS
thread, so a row's vector (and score) does not depend on Spark's partitioning.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np
import pandas as pd

from udfs.embed import EncoderSpec, encode, one_blas_thread
from udfs.paths import on_this_worker

GROUP_ROWS = 2048  # pool rows an encoding group holds on average
SEED_BLOCK = 4096  # pool rows per similarity block against the seed
GROUP_COL, ORDER_COL = "_knn_group", "_knn_order"


@dataclass(frozen=True)
class EmbedSpec:
    encoder: EncoderSpec
    sides: tuple[str, ...]  # the pool's text columns to encode
    seed_vectors: tuple[str, ...] | None  # .npy per side (k-NN); None: no k-NN score
    k: int = 5
    vectors: bool = False  # also output each row's vector (for clustering)


@cache
def load_vectors(path: str) -> np.ndarray:
    return np.load(path)


def knn_mean(queries: np.ndarray, seed: np.ndarray, k: int) -> np.ndarray:
    """Mean cosine of each (normalized) query row to its k nearest seed rows."""
    k = min(k, len(seed))
    out = np.empty(len(queries))
    for start in range(0, len(queries), SEED_BLOCK):
        sims = queries[start : start + SEED_BLOCK] @ seed.T
        top = np.partition(sims, len(seed) - k, axis=1)[:, len(seed) - k :]
        out[start : start + SEED_BLOCK] = top.mean(axis=1)
    return out


def row_vectors(per_side: list[np.ndarray]) -> np.ndarray:
    """One vector per row: its sides' vectors averaged, normalized."""
    mean = np.mean(per_side, axis=0)
    return mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)


def embed_group(spec: EmbedSpec) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The applyInPandas function: one group's (row_id, sides…, group, order) in; (row_id,
    score, reason[, vector]) out."""

    def run(pdf: pd.DataFrame) -> pd.DataFrame:
        pdf = pdf.sort_values([ORDER_COL, "row_id"], kind="stable", ignore_index=True)
        texts = [pdf[s].fillna("").astype(str) for s in spec.sides]
        empty = np.any([t.str.strip().eq("").to_numpy() for t in texts], axis=0)
        live = np.flatnonzero(~empty)
        score = np.full(len(pdf), np.nan)
        vectors: list[list[float] | None] = [None] * len(pdf)
        if len(live):
            with one_blas_thread():
                per_side = [encode(spec.encoder, t.iloc[live].tolist()) for t in texts]
                if spec.seed_vectors is not None:
                    sims = [knn_mean(v, load_vectors(on_this_worker(path)), spec.k)
                            for v, path in zip(per_side, spec.seed_vectors, strict=True)]
                    score[live] = np.mean(sims, axis=0)
                if spec.vectors:
                    for i, vec in zip(live, row_vectors(per_side), strict=True):
                        vectors[i] = vec.tolist()
        out = pd.DataFrame({
            "row_id": pdf["row_id"],
            "score": score,
            "reason": np.where(empty, "empty_text", None),
        })
        if spec.vectors:
            out["vector"] = vectors
        return out

    return run

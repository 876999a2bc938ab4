"""Shingle hashes and MinHash band keys, vectorized with numpy (jobs/filtering/near_dup.py).

A text's shingles are its character n-grams (spaces dropped) or word n-grams (lower-cased
words: runs between spaces and punctuation), each hashed by a rolling polynomial over code
points or over the words' CRC-32s (uint64 arithmetic that wraps: the same on every machine),
taken mod p: a set of 31-bit ints.
As Spark SQL (substring, xxhash64 and pmod in higher-order functions, interpreted value by
value) they cost 2.5 CPU-ms a WMT news pair; here ~0.1.

A row's signature is the minimum of each permutation `(a*h + c) mod p` over its shingle hashes
h (31-bit), and its b band keys each fold r of those minima into one 32-bit value. In Spark SQL
the permutations are higher-order functions, which Spark interprets value by value (no code
generation): 9 x 7 of them over ~200 shingles cost 7.8 CPU-ms a row. Here a batch's shingles
are permuted as one matrix, a chunk of rows at a time (bounded memory), and each row's minima
taken with `np.minimum.reduceat`.
"""

from __future__ import annotations

import re
import zlib

import numpy as np
import pandas as pd

PRIME = 2_147_483_647  # 2^31 - 1: a*h + c stays under 2^62 in int64
FOLD = np.uint64(0x9E3779B97F4A7C15)  # an odd 64-bit constant (the golden ratio's bits)
CHUNK = 20_000  # shingles permuted at once: 20k x 64 permutations x 8 bytes = 10 MB


# A word: a run of anything but spaces and punctuation. Not `\w+`, which drops the vowel
# signs of Devanagari, Bengali and Tamil (combining marks are not alphanumeric in Python):
# "हिन्दी" came out as ह, न, द, and distinct words as the same fragments.
WORD = re.compile("[^\\s\u0021-\u002f\u003a-\u0040\u005b-\u0060\u007b-\u007e\u00a1-\u00bf"
                  "\u0964\u0965\u2000-\u206f\u3000-\u303f\uff01-\uff0f\uff1a-\uff20]+")
SPACE = re.compile(r"\s+")


def shingle_hashes(texts: pd.Series, n: int, by_chars: bool) -> pd.Series:
    """Each text's distinct shingle hashes (int64 values under 2^31): character n-grams where
    `by_chars`, else word n-grams; a text shorter than one shingle is one shingle."""
    return pd.Series([_shingles(t or "", n, by_chars) for t in texts])


def _shingles(text: str, n: int, by_chars: bool) -> np.ndarray:
    text = text.lower()
    if by_chars:
        units = np.frombuffer(SPACE.sub("", text).encode("utf-32-le"), dtype=np.uint32)
    else:
        units = np.array([zlib.crc32(w.encode()) for w in WORD.findall(text)], dtype=np.uint32)
    units = units.astype(np.uint64)
    if len(units) == 0:
        return np.zeros(1, dtype=np.int64)
    k = min(n, len(units))
    windows = len(units) - k + 1
    hashed = np.zeros(windows, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for i in range(k):
            hashed = hashed * FOLD + units[i:i + windows]
    return np.unique(hashed % np.uint64(PRIME)).astype(np.int64)


def band_keys(hashes: pd.Series, a: np.ndarray, c: np.ndarray, rows_per_band: int
              ) -> pd.Series:
    """Each row's band keys (int32) from its shingle hashes (an array of 31-bit ints, never
    empty) under the permutations (a, c): len(a) // rows_per_band bands."""
    out: list[np.ndarray] = []
    arrays = [np.asarray(h, dtype=np.int64) for h in hashes]
    start = 0
    while start < len(arrays):
        stop, size = start, 0
        while stop < len(arrays) and (size == 0 or size + len(arrays[stop]) <= CHUNK):
            size += len(arrays[stop])
            stop += 1
        part = arrays[start:stop]
        flat = np.concatenate(part)
        offsets = np.cumsum([0, *[len(x) for x in part[:-1]]])
        permuted = (flat[None, :] * a[:, None] + c[:, None]) % PRIME  # perms x shingles
        minima = np.minimum.reduceat(permuted, offsets, axis=1).T  # rows x perms
        out.extend(fold(minima, rows_per_band))
        start = stop
    return pd.Series(out)


def fold(minima: np.ndarray, rows_per_band: int) -> list[np.ndarray]:
    """Each row's minima, `rows_per_band` at a time, folded into one int32 key per band (the
    band's index folded in first, so equal minima in two bands are two keys). 32 bits, not
    64: the keys are stored with every row (a refresh reads them), and two keys that collide
    only make a candidate pair, which is verified by its Jaccard like any other (about
    n^2 / 2^33 chance pairs a band: ~120 for a million rows, against the millions of true
    candidates)."""
    n_rows, n_perm = minima.shape
    bands = n_perm // rows_per_band
    grouped = minima[:, : bands * rows_per_band].reshape(n_rows, bands, rows_per_band)
    keys = np.broadcast_to(np.arange(1, bands + 1, dtype=np.uint64), (n_rows, bands)).copy()
    with np.errstate(over="ignore"):  # uint64 arithmetic wraps: that is the hash
        for i in range(rows_per_band):
            keys = (keys * FOLD) ^ grouped[:, :, i].astype(np.uint64)
    return list((keys ^ (keys >> np.uint64(32))).astype(np.uint32).view(np.int32))

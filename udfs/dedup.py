"""The dedup key: the text as compared for duplicates, per config (case, spaces, punctuation,
digits insensitive)."""

from __future__ import annotations

from typing import Protocol

from pyspark.sql import Column
from pyspark.sql import functions as F


class KeyOptions(Protocol):
    """What the key ignores (jobs/kit/config.py DedupConf has these)."""

    ignore_case: bool
    ignore_whitespace: bool
    ignore_punctuation: bool
    ignore_digits: bool


def dedup_key(col: Column, conf: KeyOptions) -> Column:
    if conf.ignore_case:
        col = F.lower(col)
    if conf.ignore_punctuation:
        col = F.regexp_replace(col, r"[\p{P}\p{S}]", "")
    if conf.ignore_digits:
        col = F.regexp_replace(col, r"\p{Nd}+", "0")
    if conf.ignore_whitespace:
        col = F.regexp_replace(col, r"\s+", "")
    return col

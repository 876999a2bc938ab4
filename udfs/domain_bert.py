"""BERT domain classifier (DiDi WMT20: "all available newstest data and News Commentary are
regarded as positive data, and randomly sampled data from the large-scale corpus are regarded
as negative data. Then BERT is exploited to score the sentence pairs"): the cross-encoder
machinery (udfs/cross_encoder_model.py, training/cross_encoder.py) fine-tuned on seed rows
against pool rows, a row read whole (a pair as one sequence, or a monolingual line); its
score is P(in-domain).

Cross-fitted like the fastText classifier (udfs/domain_fasttext.py): one model per fold of
the pool, its negatives drawn from that fold; a row is scored by the other fold's model.

Scored on the cross-encoder's path (udfs/cross_encoder.py): the rows are tokenized in a CPU
stage into Arrow list columns, dealt into groups by a hash of row_id, and each group is
padded and encoded in a task of the scoring profile (a whole GPU where executors have them),
in an order fixed by row_id, so scores do not depend on Spark's partitioning.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.resource import ResourceProfile
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, IntegerType

from udfs.bert import load_tokenizer, token_ids
from udfs.cross_encoder import partition_table
from udfs.cross_encoder_model import load_cross_encoder
from udfs.encoders import resolve_device
from udfs.task import task_cpus

GROUP_ROWS = 4096
_GROUP, _IDS = "_bd_group", "_bd_ids"
_GROUP_SEED = 43
SCORED = pa.schema([("row_id", pa.int64()), ("score", pa.float64()), ("reason", pa.string())])


@dataclass(frozen=True)
class DomainBertSpec:
    models: tuple[str, ...]  # one model directory per fold, as the executors see them
    base: str  # the base checkpoint directory, as the executors see it
    sides: tuple[str, ...]  # the pool's text columns: (src, tgt) or (src,)
    max_length: int
    device: str = "auto"


def tokenize(spec: DomainBertSpec):
    @F.pandas_udf(ArrayType(IntegerType()))
    def ids(*sides: pd.Series) -> pd.Series:
        texts = [s.fillna("").tolist() for s in sides]
        flat, offsets = token_ids(load_tokenizer(spec.base), texts[0], "",
                                  texts[1] if len(texts) > 1 else None, spec.max_length)
        return pd.Series(np.split(flat, offsets[1:-1]) if len(texts[0]) else [], dtype=object)

    return ids


def score_groups(spec: DomainBertSpec
                 ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = partition_table(batches)
        if table is None:
            return
        device = resolve_device("transformers", spec.device)
        models = [load_cross_encoder(m, spec.base, device, task_cpus()) for m in spec.models]
        table = table.sort_by([(_GROUP, "ascending"), ("row_id", "ascending")])
        empty = np.logical_or.reduce([
            pc.fill_null(pc.equal(pc.utf8_trim_whitespace(table.column(s)), ""), True)
            .to_numpy(zero_copy_only=False) for s in spec.sides])
        folds = table.column("fold").to_numpy()
        ids = table.column(_IDS).combine_chunks()
        flat, offsets = np.asarray(ids.values), np.asarray(ids.offsets)
        score = np.full(table.num_rows, np.nan)
        for fold in (0, 1):
            rows = np.flatnonzero((folds == fold) & ~empty)
            if len(rows):
                model = models[(1 - fold) % len(models)]
                sub_offsets = np.concatenate([[0], np.cumsum(offsets[rows + 1] - offsets[rows])])
                sub_flat = np.concatenate([flat[offsets[r]:offsets[r + 1]] for r in rows])
                score[rows] = model.score_ids(sub_flat, sub_offsets)
        yield pa.record_batch([table.column("row_id").combine_chunks(),
                               pa.array(score, pa.float64(), from_pandas=True),
                               pa.array(np.where(empty, "empty_text", None))], schema=SCORED)

    return run


def domain_bert_scores(pool: DataFrame, spec: DomainBertSpec, pool_rows: int,
                       profile: ResourceProfile | None) -> DataFrame:
    """(row_id, score, reason) of every pool row (row_id, fold, sides...)."""
    groups = max(1, -(-pool_rows // GROUP_ROWS))
    keyed = pool.select("row_id", "fold", *spec.sides).withColumns({
        _GROUP: F.pmod(F.xxhash64(F.lit(_GROUP_SEED), "row_id"), F.lit(groups)),
        _IDS: tokenize(spec)(*[F.col(s) for s in spec.sides]),
    })
    return keyed.repartition(groups, _GROUP).mapInArrow(
        score_groups(spec), "row_id long, score double, reason string", profile=profile)

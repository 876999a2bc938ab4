"""The cross-encoder scorer over a DataFrame: `cross_encoder`, the probability a fine-tuned
BERT-class pair classifier (udfs/cross_encoder_model.py) gives that a pair is a valid
translation; or, with another model and column, what else such a classifier was trained to
tell (`mt_human`: that the translation is human, not machine output).

Two Spark stages, as the work splits between a CPU and a GPU:

1. Tokenize (CPU, one core a task, the job's own resources): a pandas UDF turns each distinct
   alive pair into its token ids, one sequence per pair, carried as an Arrow list column.
2. Score (the embed stage's resource profile where executors have GPUs: a whole GPU and its
   share of cores a task): `mapInArrow` hands the task Arrow batches, whose list column is
   already a flat id array and offsets; the task only pads rows from them by a token budget
   and runs the model, with one wait for the GPU per group.

A shuffle between them (pairs dealt into groups by a hash of their text) is what keeps the
tokenizer out of the GPU task. Repeatable like the embed scorer: the groups and the order in
each are fixed by the text alone, so the same rows give the same batches and scores however
Spark partitions them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.resource import ResourceProfile
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, IntegerType

from udfs.bert import load_tokenizer, token_ids
from udfs.cross_encoder_model import CrossEncoderCard, load_cross_encoder
from udfs.encoders import resolve_device
from udfs.scoring import score_where
from udfs.task import task_cpus, task_gpu

GROUP_ROWS = 4096  # distinct pairs a scoring group holds on average
_GROUP, _ORDER, _IDS = "_ce_group", "_ce_order", "_ce_ids"
_GROUP_SEED, _ORDER_SEED = 29, 31


@dataclass(frozen=True)
class CrossEncoderSpec:
    model: str  # the model directory, as the executors see it
    base: str  # its base encoder's checkpoint directory, as the executors see it
    device: str = "auto"  # auto: the task's Spark-assigned GPU, else the CPU; cpu; cuda
    column: str = "cross_encoder"  # the score column it adds


@cache
def _max_length(model: str) -> int:
    return CrossEncoderCard.read(model).max_length


def tokenizer_udf(spec: CrossEncoderSpec) -> Callable[[Column, Column], Column]:
    """(src, tgt) -> the pair's token ids as one sequence (CPU; the tokenizer alone loads)."""

    @F.pandas_udf(ArrayType(IntegerType()))
    def tokenize(src: pd.Series, tgt: pd.Series) -> pd.Series:
        flat, offsets = token_ids(load_tokenizer(spec.base), src.tolist(), "", tgt.tolist(),
                                  _max_length(spec.model))
        return pd.Series(np.split(flat, offsets[1:-1]) if len(src) else [], dtype=object)

    return tokenize


def partition_table(batches: Iterator[pa.RecordBatch]) -> pa.Table | None:
    """A mapInArrow partition as one table; None when it holds no row (a partition no group
    hashed into is handed no batch at all)."""
    parts = list(batches)
    table = pa.Table.from_batches(parts) if parts else None
    return table if table is not None and table.num_rows else None


def score_batches(spec: CrossEncoderSpec, needs_gpu: bool
                  ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function: a partition holds whole groups; each is scored in its own
    order from its flat token ids."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if needs_gpu and task_gpu() is None:
            raise RuntimeError(f"{spec.column} stage: this task's resource profile asks for a "
                               "GPU, but Spark assigned it none (check "
                               "spark.executor.resource.gpu.*)")
        table = partition_table(batches)
        if table is None:
            return
        device = resolve_device("transformers", spec.device)
        model = load_cross_encoder(spec.model, spec.base, device, task_cpus())
        table = table.sort_by([(_GROUP, "ascending"), (_ORDER, "ascending"),
                               ("src", "ascending"), ("tgt", "ascending")])
        groups = table.column(_GROUP).to_numpy()
        bounds = np.flatnonzero(np.diff(groups)) + 1
        for start, stop in zip([0, *bounds], [*bounds, len(groups)], strict=True):
            part = table.slice(start, stop - start)
            ids = part.column(_IDS).combine_chunks()
            scores = model.score_ids(np.asarray(ids.values), np.asarray(ids.offsets))
            yield pa.record_batch([part.column("src").combine_chunks(),
                                   part.column("tgt").combine_chunks(),
                                   pa.array(scores, pa.float64())],
                                  names=["src", "tgt", spec.column])

    return run


def add_cross_encoder_scores(df: DataFrame, spec: CrossEncoderSpec, alive: Column,
                             profile: ResourceProfile | None = None) -> DataFrame:
    """`df` plus a double column `spec.column` on the rows where `alive` is true (null
    elsewhere). Counts the distinct alive pairs first (one Spark job) to size the groups, so
    stage `df` when it is expensive to compute. `profile`: the scoring stage's own resources
    (jobs/filtering/pair_scores.py `embed_profile`); the scores are the same without it."""

    def score(live: DataFrame) -> DataFrame:
        pairs = live.select("src", "tgt").where(
            F.col("src").isNotNull() & F.col("tgt").isNotNull()).dropDuplicates(["src", "tgt"])
        groups = max(1, -(-pairs.count() // GROUP_ROWS))
        keyed = pairs.withColumns({
            _GROUP: F.pmod(F.xxhash64(F.lit(_GROUP_SEED), "src", "tgt"), F.lit(groups)),
            _ORDER: F.xxhash64(F.lit(_ORDER_SEED), "src", "tgt"),
        }).withColumn(_IDS, tokenizer_udf(spec)(F.col("src"), F.col("tgt")))
        needs_gpu = profile is not None and "gpu" in profile.taskResources
        scored = keyed.repartition(groups, _GROUP).mapInArrow(
            score_batches(spec, needs_gpu), f"src string, tgt string, {spec.column} double",
            profile=profile)
        return live.join(scored, ["src", "tgt"], "left").select(*live.columns, spec.column)

    return score_where(df, alive, [spec.column], score)

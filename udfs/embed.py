"""Embedding similarity of a pair: cosine and ratio margin of its two sides' sentence vectors.

`encode` and `cosine_and_margin` are pure functions on texts/arrays (no Spark needed);
`add_embedding_scores` runs them over a DataFrame with `applyInPandas`, so every input column
flows through unchanged and the scores are computed only on rows that are still alive.

Margin (Artetxe & Schwenk 2019, ratio margin):

    margin(x, y) = cos(x, y) / ((mean_{z in NN_k(x)} cos(x, z) + mean_{z in NN_k(y)} cos(y, z)) / 2)

where NN_k(x) are the k targets nearest to source x (and NN_k(y) the k sources nearest to
target y). A corpus-wide k-NN search would need a vector index; instead the neighbourhood is
the pair's margin group: the alive rows are dealt into ceil(alive / GROUP_ROWS) groups by a
hash of their text (4,097-8,192 rows a group on average; all rows when fewer), about as many
candidates as the thresholds were calibrated with (bench/calibrate_embed.py: 6,000).

Two steps, each a `groupBy().applyInPandas`: encoding, in groups of <= ENCODE_ROWS alive rows
(many groups: the expensive step keeps every core busy), then, with margin_k > 0, the margin,
in the margin groups, from the vectors the first step passes on (float32 bytes).

Repeatable: the same rows and config give the same scores bit for bit, however Spark
partitions and batches them. A vector's last bits depend on what it is computed with
(OpenBLAS takes other kernels for the rows at a block's edge, and splits a product among its
threads: of 1,200 Tatoeba sentences, 720 got other bits when encoded in two calls instead of
one, 2,998 of 3,000 with two BLAS threads instead of one). So the groups are fixed by the
data alone (hashes of the text; their number by the count of alive rows), each group is
processed in an order of its own (another hash of the text), and the numpy work runs on one
BLAS thread (`encoders.encoder_threads`, `one_blas_thread`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pandas as pd
from pyspark.resource import ResourceProfile
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, DoubleType, LongType, StructField, StructType

from udfs.embed_scores import (  # noqa: F401 - the scorer's pure parts, re-exported
    _ENCODE_SEED,
    _GROUP,
    _MARGIN_SEED,
    _ORDER,
    _ORDER_SEED,
    _SRC_VEC,
    _TGT_VEC,
    COSINE,
    ENCODE_ROWS,
    GROUP_ROWS,
    MARGIN,
    EncoderSpec,
    cosine_and_margin,
    encode,
    encode_group,
    margin_group,
    one_blas_thread,
)
from udfs.scoring import score_where
from udfs.task import task_gpu


def _group_of(seed: int, groups: int) -> Column:
    """A row's group, 0..groups-1, from a seeded hash of its pair's text."""
    return F.pmod(F.xxhash64(F.lit(seed), "src", "tgt"), F.lit(groups))


def encode_partition(spec: EncoderSpec, vectors: bool, needs_gpu: bool
                     ) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """The mapInPandas function of the encoding step under a stage resource profile: a
    partition holds whole groups (repartitioned by group), each encoded as `encode_group`
    encodes it, so the scores equal the applyInPandas path's. A task the profile promised a
    GPU and Spark gave none fails loudly rather than encode on the CPU."""
    encode_one = encode_group(spec, vectors)

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        if needs_gpu and task_gpu() is None:
            raise RuntimeError("embed stage: this task's resource profile asks for a GPU, but "
                               "Spark assigned it none (check spark.executor.resource.gpu.*)")
        parts = list(batches)
        if not parts:
            return
        rows = pd.concat(parts, ignore_index=True)
        for _, group in rows.groupby(_GROUP, sort=True):
            yield encode_one(group)

    return run


def add_embedding_scores(
    df: DataFrame, spec: EncoderSpec, alive: Column, margin_k: int = 0,
    profile: ResourceProfile | None = None,
) -> DataFrame:
    """`df` plus double columns `embed_cosine` and `embed_margin`.

    `df` needs string columns `src` and `tgt`; every other column passes through unchanged.
    Rows where `alive` is false or null (rejected by a cheaper stage), or a side is null, get
    null scores and are not encoded. `embed_margin` is null everywhere when margin_k == 0;
    otherwise it is the ratio margin over k neighbours among the row's margin group (see the
    module docstring). Counts the alive rows first (one Spark job) to size the groups, so
    stage `df` when it is expensive to compute.

    `profile`: the encoding stage's own resources (stage-level scheduling: whole GPUs and the
    cores to feed them, jobs/filtering/pair_scores.py `embed_profile`), the other stages
    keeping the job's. Its groups are the same, so are its scores.
    """

    def score(live: DataFrame) -> DataFrame:
        alive_rows = live.count()
        groups = max(1, -(-alive_rows // ENCODE_ROWS))
        keyed = live.withColumns(
            {
                _GROUP: _group_of(_ENCODE_SEED, groups),
                _ORDER: F.xxhash64(F.lit(_ORDER_SEED), "src", "tgt"),
            }
        )
        fields = [StructField(COSINE, DoubleType()), StructField(MARGIN, DoubleType())]
        schema = StructType([*live.schema.fields, *fields])

        def encoded_by_group(vectors: bool, out: StructType) -> DataFrame:
            if profile is None:
                return keyed.groupBy(_GROUP).applyInPandas(encode_group(spec, vectors), out)
            needs_gpu = "gpu" in profile.taskResources
            return keyed.repartition(groups, _GROUP).mapInPandas(
                encode_partition(spec, vectors, needs_gpu), out, profile=profile)

        if margin_k <= 0:
            return encoded_by_group(False, schema)
        encoded_schema = StructType(
            [
                *live.schema.fields,
                StructField(_ORDER, LongType()),
                StructField(COSINE, DoubleType()),
                StructField(_SRC_VEC, BinaryType()),
                StructField(_TGT_VEC, BinaryType()),
            ]
        )
        encoded = encoded_by_group(True, encoded_schema)
        groups = max(1, -(-alive_rows // GROUP_ROWS))
        regrouped = encoded.withColumn(_GROUP, _group_of(_MARGIN_SEED, groups))
        return regrouped.groupBy(_GROUP).applyInPandas(margin_group(margin_k), schema)

    return score_where(df, alive, [COSINE, MARGIN], score)

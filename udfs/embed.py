"""Embedding similarity of a pair: cosine and ratio margin of its two sides' sentence vectors.

The per-group work is pure code in udfs/embed_scores.py (`score_group`: encode, cosine,
margin); this module runs it over a DataFrame.

Margin (Artetxe & Schwenk 2019, ratio margin):

    margin(x, y) = cos(x, y) / ((mean_{z in NN_k(x)} cos(x, z) + mean_{z in NN_k(y)} cos(y, z)) / 2)

where NN_k(x) are the k targets nearest to source x (and NN_k(y) the k sources nearest to
target y). A corpus-wide k-NN search would need a vector index; instead the neighbourhood is
the pair's group: the alive rows are dealt into ceil(rows / GROUP_ROWS) groups by a hash of
their text (4,097-8,192 rows a group on average; all when fewer), about as many
candidates as the thresholds were calibrated with (bench/thresholds/calibrate_embed.py: 6,000).
Without a margin the groups hold ENCODE_ROWS rows: more, smaller tasks for the encoder alone.

One shuffle carries only the pairs' texts (`src`, `tgt`) to their groups, each group is
encoded and scored in one task (on its GPU when it has one: no vectors cross a shuffle), and
the scores are joined back to the rows by their texts. A pair repeated in the input is
scored once, and counts once among its group's candidates.

Repeatable: the same rows and config give the same scores bit for bit, however Spark
partitions and batches them. A vector's last bits depend on what it is computed with
(OpenBLAS takes other kernels for the rows at a block's edge, and splits a product among its
threads: of 1,200 Tatoeba sentences, 720 got other bits when encoded in two calls instead of
one, 2,998 of 3,000 with two BLAS threads instead of one). So the groups are fixed by the
data alone (hashes of the text; their number by the count of alive rows), each
group is processed in an order of its own (another hash of the text), and the numpy work
runs on one BLAS thread (`encoders.encoder_threads`, `one_blas_thread`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pandas as pd
from pyspark.resource import ResourceProfile
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

from udfs.embed_scores import (  # noqa: F401 - the scorer's pure parts, re-exported
    _ENCODE_SEED,
    _GROUP,
    _MARGIN_SEED,
    _ORDER,
    _ORDER_SEED,
    COSINE,
    ENCODE_ROWS,
    GROUP_ROWS,
    MARGIN,
    EncoderSpec,
    cosine_and_margin,
    encode,
    one_blas_thread,
    score_group,
)
from udfs.scoring import score_where
from udfs.task import task_gpu


def _group_of(seed: int, groups: int) -> Column:
    """A row's group, 0..groups-1, from a seeded hash of its pair's text."""
    return F.pmod(F.xxhash64(F.lit(seed), "src", "tgt"), F.lit(groups))


def score_partition(spec: EncoderSpec, margin_k: int, needs_gpu: bool
                    ) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """The mapInPandas function of the scoring step under a stage resource profile: a
    partition holds whole groups (repartitioned by group), each scored as `score_group`
    scores it, so the scores equal the applyInPandas path's. A task the profile promised a
    GPU and Spark gave none fails loudly rather than encode on the CPU."""
    score_one = score_group(spec, margin_k)

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        if needs_gpu and task_gpu() is None:
            raise RuntimeError("embed stage: this task's resource profile asks for a GPU, but "
                               "Spark assigned it none (check spark.executor.resource.gpu.*)")
        parts = list(batches)
        if not parts:
            return
        pairs = pd.concat(parts, ignore_index=True)
        for _, group in pairs.groupby(_GROUP, sort=True):
            yield score_one(group)

    return run


def add_embedding_scores(
    df: DataFrame, spec: EncoderSpec, alive: Column, margin_k: int = 0,
    profile: ResourceProfile | None = None,
) -> DataFrame:
    """`df` plus double columns `embed_cosine` and `embed_margin`.

    `df` needs string columns `src` and `tgt`; every other column passes through unchanged.
    Rows where `alive` is false or null (rejected by a cheaper stage), or a side is null, get
    null scores and are not encoded. `embed_margin` is null everywhere when margin_k == 0;
    otherwise it is the ratio margin over k neighbours among the pair's group (see the
    module docstring). Counts the alive rows first (one Spark job) to size the groups, so
    stage `df` when it is expensive to compute.

    `profile`: the scoring stage's own resources (stage-level scheduling: whole GPUs and the
    cores to feed them, jobs/filtering/pair_scores.py `embed_profile`), the other stages
    keeping the job's. Its groups are the same, so are its scores.
    """

    def score(live: DataFrame) -> DataFrame:
        pairs = live.select("src", "tgt").where(F.col("src").isNotNull()
                                                & F.col("tgt").isNotNull())
        rows_per_group, seed = (GROUP_ROWS, _MARGIN_SEED) if margin_k > 0 else (
            ENCODE_ROWS, _ENCODE_SEED)
        groups = max(1, -(-pairs.count() // rows_per_group))
        keyed = pairs.withColumns({_GROUP: _group_of(seed, groups),
                                   _ORDER: F.xxhash64(F.lit(_ORDER_SEED), "src", "tgt")})
        out = StructType([StructField("src", StringType()), StructField("tgt", StringType()),
                          StructField(COSINE, DoubleType()), StructField(MARGIN, DoubleType())])
        if profile is None:
            scored = keyed.groupBy(_GROUP).applyInPandas(score_group(spec, margin_k), out)
        else:
            needs_gpu = "gpu" in profile.taskResources
            scored = keyed.repartition(groups, _GROUP).mapInPandas(
                score_partition(spec, margin_k, needs_gpu), out, profile=profile)
        # A left join on the texts: a row with a null side matches nothing (null scores).
        return live.join(scored, ["src", "tgt"], "left").select(*live.columns, COSINE, MARGIN)

    return score_where(df, alive, [COSINE, MARGIN], score)

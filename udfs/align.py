"""Word-alignment scores for the filter job: train fast_align on a sample of the run's clean
pairs, then score every surviving pair in parallel with the parameters fixed.

After ZengHuiMT WMT21: "The sentence pairs with confidence scores below 0.6 are discarded", its
confidence the mean of the two directions' shares of tokens with a counterpart (from a phrase
table built on fast_align's alignments; here fast_align's own links, below).
Training: fast_align through the PyPI package `systran-align`; scoring: fast_align's model with
the learned tables in numpy (`udfs/align_model.py` says why, with measurements).

Score columns (double; null where `alive` is false or null):
- `align_fwd_logprob`: log P(tgt | src) under the src->tgt model, mean per target token;
- `align_rev_logprob`: log P(src | tgt) under the tgt->src model, mean per source token;
- `align_coverage`: (share of target tokens with a source link under src->tgt + share of
  source tokens with a target link under tgt->src) / 2; a link is a token's Viterbi source
  word under fast_align's diagonal prior, unless the NULL word explains the token better.
Tokens the model never saw (outside its training sample) are left out of both. A pair with an
empty side scores coverage 0 and null log-probs.

Model location: a local path (or file: URI) is read directly by driver and workers (a local
master, or a path every executor mounts). Any other URI (hdfs://, s3a://, ...) is shipped to
the executors with `SparkContext.addFile(dir, recursive=True)` and read there through
`SparkFiles.get(<directory name>)`, so two models shipped in one application need different
directory names (e.g. named after pair and run), and Spark ships a path once per application:
a model retrained into the same non-local directory is not shipped again.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from urllib.parse import urlparse

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.types import DoubleType, StructField, StructType

from udfs.align_model import (
    MANIFEST,
    AlignmentModel,
    check_langs,
    read_manifest,
    score_texts,
    train_local,
)
from udfs.paths import is_local_path, local_path, shipped
from udfs.scoring import score_where

SCORE_COLUMNS = ("align_fwd_logprob", "align_rev_logprob", "align_coverage")
_CACHE_SIZE = 2  # models kept per Python worker (a run scores one pair; tests may use two)
_MODELS: dict[tuple[str, str], AlignmentModel] = {}
LOADS: Counter[tuple[str, str]] = Counter()  # loads per model in this process (tests read it)


def train_alignment(
    pairs: Sequence[tuple[str, str]],
    src_lang: str,
    tgt_lang: str,
    out_dir: str,
    about: dict | None = None,
) -> str:
    """Train fast_align (both directions) on `pairs` and write the model to `out_dir`.

    `pairs` is a sample of the run's clean (src, tgt) strings collected to the driver (e.g. up
    to 200k; any iterable will do). Texts are lowercased and tokenized with
    `udfs.tokens.tokenize` (zh: jieba words), punctuation split off word edges
    (`udfs.align_model.align_tokens`); pairs with an empty side are skipped. Training runs on
    the driver on one thread, so that the same pairs, in any order, give the same model
    (fast_align's threads race on its counts: `udfs/align_model.py`): ~310 pairs/s of newstest
    zh-en, ~560 of WMT21-23 zh-en system outputs, so 200k pairs take 6-11 minutes. `out_dir`
    is a local path, a file: URI or, with an active SparkSession, any Hadoop URI (trained in a
    local temporary directory, then copied). Files: `forward.probs`, `backward.probs` and
    `manifest.json` (written last; `about` is added to it). Returns `out_dir`.
    """
    if is_local_path(out_dir):
        train_local(pairs, src_lang, tgt_lang, local_path(out_dir), about)
        return out_dir
    with tempfile.TemporaryDirectory(prefix="sluice-align-") as tmp:
        train_local(pairs, src_lang, tgt_lang, tmp, about)
        _upload(tmp, out_dir)
    return out_dir


def add_alignment_scores(
    df: DataFrame, model_dir: str, src_lang: str, tgt_lang: str, alive: Column
) -> DataFrame:
    """`df` (string columns `src`, `tgt`, any others) plus `align_fwd_logprob`,
    `align_rev_logprob` and `align_coverage`, computed where `alive` is true and null elsewhere.

    One `mapInPandas` pass over the alive rows (udfs/scoring.py): every input column flows
    through unchanged, the model is loaded once per Python worker (cached by location and
    manifest hash), never per batch.
    """
    ref = _model_ref(df.sparkSession, model_dir)
    check_langs(ref.manifest, src_lang, tgt_lang, model_dir)
    key, local_dir, shipped_name = (model_dir, ref.manifest_hash), ref.local_dir, ref.shipped_name

    def score_batches(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        model = _cached_model(key, local_dir, shipped_name)
        for batch in batches:
            yield score_frame(batch, model, src_lang, tgt_lang)

    def score(live: DataFrame) -> DataFrame:
        fields = [StructField(c, DoubleType(), True) for c in SCORE_COLUMNS]
        return live.mapInPandas(score_batches, StructType([*live.schema.fields, *fields]))

    return score_where(df, alive, SCORE_COLUMNS, score)


def score_frame(
    batch: pd.DataFrame, model: AlignmentModel, src_lang: str, tgt_lang: str
) -> pd.DataFrame:
    """Add the score columns to one Arrow batch of alive rows."""
    scores = score_texts(model, batch["src"].tolist(), batch["tgt"].tolist(), src_lang, tgt_lang)
    for k, name in enumerate(SCORE_COLUMNS):
        batch[name] = pd.array(scores[:, k], dtype="Float64")  # NaN -> NA -> Arrow null
    return batch


@dataclass(frozen=True)
class _ModelRef:
    manifest: dict
    local_dir: str | None  # read directly where set
    shipped_name: str | None  # else SparkFiles.get(shipped_name) on the workers

    @property
    def manifest_hash(self) -> str:
        return "/".join(self.manifest["files"][k] for k in sorted(self.manifest["files"]))


def _model_ref(spark: SparkSession, model_dir: str) -> _ModelRef:
    """Where workers find the model: a local path itself, or else a copy shipped by addFile."""
    if is_local_path(model_dir):
        path = local_path(model_dir)
        return _ModelRef(read_manifest(path), path, None)
    uri = model_dir.rstrip("/")
    spark.sparkContext.addFile(uri, recursive=True)
    name = os.path.basename(urlparse(uri).path)
    return _ModelRef(read_manifest(_shipped_model(name)), None, name)


def _cached_model(
    key: tuple[str, str], local_dir: str | None, shipped_name: str | None
) -> AlignmentModel:
    """Load once per Python worker; the manifest hash in the key makes a retrained model in the
    same directory load afresh."""
    model = _MODELS.get(key)
    if model is None:
        model = AlignmentModel.load(local_dir or _shipped_model(shipped_name))
        LOADS[key] += 1
        while len(_MODELS) >= _CACHE_SIZE:
            _MODELS.pop(next(iter(_MODELS)))
        _MODELS[key] = model
    return model


def _shipped_model(name: str) -> str:
    path = shipped(name)
    if path is None or not os.path.isdir(path):
        raise FileNotFoundError(f"alignment model {name!r} not shipped to this worker")
    return path


def _upload(local_dir: str, uri: str) -> None:
    """Copy a trained model to a Hadoop URI through the active session's FileSystem."""
    spark = SparkSession.getActiveSession()
    if spark is None:
        raise RuntimeError(f"writing an alignment model to {uri} needs an active SparkSession")
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(uri)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    fs.mkdirs(path)
    fs.delete(jvm.org.apache.hadoop.fs.Path(path, MANIFEST), False)  # incomplete until copied
    for name in sorted(os.listdir(local_dir), key=lambda n: n == MANIFEST):  # last
        src = jvm.org.apache.hadoop.fs.Path(f"file://{os.path.join(local_dir, name)}")
        fs.copyFromLocalFile(False, True, src, jvm.org.apache.hadoop.fs.Path(path, name))

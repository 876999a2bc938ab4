"""Pair scorers that run after the rules and dedup, on the rows still alive: word alignment,
then sentence-embedding similarity (the most expensive scorer sees the fewest rows).

Score, then decide: each stage adds its score columns (null on rows already rejected) and
rejects the rows under its threshold with its own stage and rule name.
"""

from __future__ import annotations

import os

from pyspark.resource import ResourceProfile, ResourceProfileBuilder, TaskResourceRequests
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.filtering.config import FilterConfig
from jobs.filtering.scorer_rules import model_card, model_threshold, scorer_rules
from jobs.filtering.stages import alive, reject_where
from jobs.kit.errors import ConfigError
from jobs.kit.progress import log
from jobs.kit.sampling import first_by_key
from jobs.lake.models import AlignerStore, on_this_machine
from jobs.lake.store import Lake
from udfs.paths import is_local_path


def training_sample(df: DataFrame, n: int, seed: int = 13,
                    columns: tuple[str, ...] = ("src", "tgt")) -> list[tuple]:
    """Up to `n` alive pairs (their `columns`), drawn uniformly: the `n` with the smallest
    seeded hash of their text, in that order (jobs/kit/sampling.py, the sampler every job
    draws with). A pair's hash depends on its text alone, so the sample is the same however
    the rows are partitioned (`sample()` draws per partition with the partition's index in
    its seed, and `limit()` keeps whichever rows come first), and it does not hinge on row
    ids (those hash the input's path)."""
    key = F.xxhash64(F.lit(seed), "src", "tgt")
    pairs = df.where(alive()).select(*columns)
    rows = (first_by_key(pairs, n, key, columns).withColumn("_rank", key)
            .orderBy("_rank", *columns).collect())
    return [tuple(r[c] for c in columns) for r in rows]


def choose_aligner(
    df: DataFrame, cfg: FilterConfig, store: AlignerStore, run_id: str
) -> str | None:
    """The model directory the run scores with, None for no scores (the align stage then adds
    null columns and rejects nothing). In this order: `align.model_dir`; the saved aligner
    `align.reference` names; one trained on the run's clean pairs and saved under the run id,
    when the sample holds at least `align.min_train_pairs`; else the pair's newest saved
    aligner; else none, with a warning. An aligner trained on too few pairs scores its own
    misaligned pairs as aligned (bench/thresholds/calibrate_align.py sizes), so it is never
    trained."""
    align = cfg.align
    if align.model_dir:
        return align.model_dir
    if align.reference:
        name = store.resolve(align.reference)
        log(f"align: saved aligner {name!r} ({describe(store.manifest(name))})")
        return store.path(name)
    sample = training_sample(df, align.sample_pairs)
    if not sample:
        return None  # no row alive: nothing to score
    if len(sample) >= align.min_train_pairs:
        return train_and_save(sample, cfg, store, run_id)
    short = (
        f"{len(sample):,} clean pairs, fewer than align.min_train_pairs {align.min_train_pairs:,}"
    )
    fallback = store.latest()
    if fallback is not None:
        log(
            f"WARNING align: {short}: not trained; scoring with the newest saved aligner "
            f"{fallback!r} ({describe(store.manifest(fallback))})"
        )
        return store.path(fallback)
    log(
        f"WARNING align: skipped: {short}, and no saved {cfg.pair} aligner under {store.root}: "
        "align scores are null and align rejects nothing (train a reference aligner: "
        "python -m jobs.align_reference)"
    )
    return None


def train_and_save(
    sample: list[tuple[str, str]], cfg: FilterConfig, store: AlignerStore, run_id: str
) -> str:
    from udfs.align import train_alignment

    src_lang, tgt_lang = cfg.langs
    corpora = ", ".join(sorted({inp.corpus for inp in cfg.inputs}))
    about = {"name": run_id, "run_id": run_id, "source": f"filter run {run_id}: {corpora}"}
    log(f"align: training an aligner on {len(sample):,} clean pairs, saved as {run_id!r}")
    train = lambda out: train_alignment(sample, src_lang, tgt_lang, out, about)  # noqa: E731
    return store.save(run_id, train, replace=True)  # a retried run id replaces its own


def describe(manifest: dict | None) -> str:
    """What a saved aligner was trained on, for the log."""
    m = manifest or {}
    pairs = m.get("sample_pairs_used")
    count = f"{pairs:,}" if isinstance(pairs, int) else "?"
    return f"{count} pairs of {m.get('source', '?')}, created {m.get('created', '?')}"


def check_aligner(lake: Lake, cfg: FilterConfig) -> None:
    """Fail before the run starts when `align.reference` names no saved aligner; `latest`
    pinned to the aligner it names now: the run scores with it even if another is saved
    meanwhile, and its record names it."""
    align = cfg.align
    if align.enabled and align.reference and not align.model_dir:
        align.reference = AlignerStore(lake, cfg.pair).resolve(align.reference)


def align_stage(df: DataFrame, cfg: FilterConfig, model_dir: str | None) -> DataFrame:
    from udfs.align import SCORE_COLUMNS, add_alignment_scores

    src_lang, tgt_lang = cfg.langs
    if model_dir is None:  # no row survived to be scored, or no aligner (choose_aligner)
        return df.withColumns({c: F.lit(None).cast("double") for c in SCORE_COLUMNS})
    df = add_alignment_scores(df, model_dir, src_lang, tgt_lang, alive())
    for unit in scorer_rules(cfg, "align"):
        df = reject_where(df, unit.failing(cfg), unit.stage, unit.rule)
    return df


def embed_profile(conf: dict[str, str]) -> ResourceProfile | None:
    """The embed stage's own resources when executors have GPUs and tasks ask for none by
    default (`spark.executor.resource.gpu.amount` set, `spark.task.resource.gpu.amount` not):
    each of its tasks takes one whole GPU and the executor's cores per GPU, while the CPU
    stages keep one core a task and no GPU. Otherwise None: the job's own task resources."""
    gpus = float(conf.get("spark.executor.resource.gpu.amount", "0") or 0)
    if gpus <= 0 or conf.get("spark.task.resource.gpu.amount"):
        return None
    cores = int(conf.get("spark.executor.cores", "1"))
    requests = TaskResourceRequests().cpus(max(1, int(cores // gpus))).resource("gpu", 1.0)
    return ResourceProfileBuilder().require(requests).build


def embed_stage(df: DataFrame, cfg: FilterConfig, model: str) -> DataFrame:
    """`model` is the encoder's model path as the executors see it."""
    from udfs.embed import EncoderSpec, add_embedding_scores

    emb = cfg.embedding
    enc = emb.chosen
    spec = EncoderSpec(enc.backend, model, enc.batch_size, emb.device, enc.pooling)
    conf = dict(df.sparkSession.sparkContext.getConf().getAll())
    df = add_embedding_scores(df, spec, alive(), emb.margin_k, embed_profile(conf))
    for unit in scorer_rules(cfg, "embed"):  # the cosine, then the margin where it has one
        df = reject_where(df, unit.failing(cfg), unit.stage, unit.rule)
    return df


# The scorers that run a cross-encoder-kind model: config section -> the score column.
CLASSIFIERS = {"cross_encoder": "cross_encoder", "mt_detector": "mt_human"}


def check_cross_encoder(cfg: FilterConfig) -> None:
    """Before any work: a cross-encoder (or MT detector) model or base that is not there, or
    a cross-encoder without a threshold where the config sets none, is one config error."""
    for section in CLASSIFIERS:
        conf = getattr(cfg, section)
        if not conf.enabled:
            continue
        if section == "cross_encoder" and conf.min_score is None:
            model_threshold(conf.model, section)
        else:
            model_card(conf.model, section)
        base = on_this_machine(conf.base)
        if is_local_path(base) and not os.path.isdir(base):
            raise ConfigError(f"{section}.base {conf.base}: no such checkpoint directory (for "
                              "e5-small run `make setup`)")


def cross_encoder_stage(df: DataFrame, cfg: FilterConfig, section: str, model: str,
                        base: str) -> DataFrame:
    """The scores of `section`'s model (`cross_encoder` or `mt_detector`); `model` and `base`
    are the paths as the executors see them. Scored under the embed stage's GPU profile where
    executors have GPUs; rejects under its rule's threshold where it has one."""
    from udfs.cross_encoder import CrossEncoderSpec, add_cross_encoder_scores

    spec = CrossEncoderSpec(model, base, getattr(cfg, section).device, CLASSIFIERS[section])
    conf = dict(df.sparkSession.sparkContext.getConf().getAll())
    df = add_cross_encoder_scores(df, spec, alive(), embed_profile(conf))
    for unit in scorer_rules(cfg, section):
        df = reject_where(df, unit.failing(cfg), unit.stage, unit.rule)
    return df

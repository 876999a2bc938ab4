"""Pair scorers that run after the rules and dedup, on the rows still alive: word alignment,
then sentence-embedding similarity (the most expensive scorer sees the fewest rows).

Score, then decide: each stage adds its score columns (null on rows already rejected) and
rejects the rows under its threshold with its own stage and rule name.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.config import FilterConfig
from jobs.stages import ALIGN_RULE, alive, embed_rules, reject_where


def training_sample(df: DataFrame, n: int, seed: int = 13) -> list[tuple[str, str]]:
    """Up to `n` alive pairs, drawn uniformly: the `n` with the smallest seeded hash of their
    text, in that order. A pair's hash depends on its text alone, so the sample is the same
    however the rows are partitioned (`sample()` draws per partition with the partition's
    index in its seed, and `limit()` keeps whichever rows come first), and it does not hinge
    on row ids (those hash the input's path)."""
    pairs = df.where(alive()).select("src", "tgt")
    total = pairs.count()
    if total == 0:
        return []
    ranked = pairs.withColumn("_rank", F.xxhash64(F.lit(seed), "src", "tgt"))
    order = ["_rank", "src", "tgt"]
    fraction = 1.2 * n / total  # a little over n: the share under a threshold varies
    if fraction < 1:
        # The rows below a hash threshold are a prefix of the hash order: with at least n of
        # them, they hold the n smallest, and each task sorts ~1.2n/total of its rows, not all.
        below = min(-(1 << 63) + int(fraction * (1 << 64)), (1 << 63) - 1)
        rows = ranked.where(F.col("_rank") < below).orderBy(*order).limit(n).collect()
        if len(rows) == n:
            return [(r.src, r.tgt) for r in rows]
    rows = ranked.orderBy(*order).limit(n).collect()
    return [(r.src, r.tgt) for r in rows]


def train_aligner(df: DataFrame, cfg: FilterConfig, model_dir: str) -> str | None:
    """Train the aligner on a sample of the alive rows into `model_dir` (a lake path); None
    when no row is alive (nothing to train on, and nothing to score)."""
    from udfs.align import train_alignment

    src_lang, tgt_lang = cfg.langs
    sample = training_sample(df, cfg.align.sample_pairs)
    if not sample:
        return None
    return train_alignment(sample, src_lang, tgt_lang, model_dir)


def align_stage(df: DataFrame, cfg: FilterConfig, model_dir: str | None) -> DataFrame:
    from udfs.align import SCORE_COLUMNS, add_alignment_scores

    src_lang, tgt_lang = cfg.langs
    if model_dir is None:  # no row survived to be scored
        return df.withColumns({c: F.lit(None).cast("double") for c in SCORE_COLUMNS})
    df = add_alignment_scores(df, model_dir, src_lang, tgt_lang, alive())
    low = F.col("align_coverage") < cfg.align.min_coverage
    return reject_where(df, low, *ALIGN_RULE)


def embed_stage(df: DataFrame, cfg: FilterConfig, model: str) -> DataFrame:
    """`model` is the encoder's model path as the executors see it."""
    from udfs.embed import COSINE, MARGIN, EncoderSpec, add_embedding_scores

    emb = cfg.embedding
    enc = emb.chosen
    spec = EncoderSpec(enc.backend, model, enc.batch_size, emb.device)
    df = add_embedding_scores(df, spec, alive(), emb.margin_k)
    for rule in embed_rules(cfg):  # the cosine, then the margin when it has a threshold
        if rule == "embed_cosine":
            low = F.col(COSINE) < enc.min_cosine_for(cfg.pair)
        else:
            low = F.col(MARGIN) < enc.min_margin
        df = reject_where(df, low, "embed", rule)
    return df

"""The selection methods: each trains its models on the driver (from the seed and a pool
sample) and scores every pool row on the executors. A method is one small class:

    train(ctx) -> dict        models written into ctx.work (local) or ctx.staging (lake);
                              returns its manifest entry (file names, facts)
    score(ctx, entry) -> DataFrame of (row_id, score, reason[, domain_cluster])

`LOWER_IS_BETTER` says which way each score points. Model files are named by method and side
so that, shipped to executors with addFile, their base names never collide.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.filtering.pair_scores import embed_profile
from jobs.kit.progress import log, stage
from jobs.kit.sampling import first_by_hash
from jobs.lake.models import for_executors, on_this_machine
from jobs.lake.store import Lake
from jobs.selection.config import SelectConfig
from jobs.selection.seed import Seed
from jobs.selection.units import METHODS, UNITS
from training.cross_encoder import fine_tune
from udfs.domain_bert import DomainBertSpec, domain_bert_scores
from udfs.domain_embed import GROUP_COL, GROUP_ROWS, ORDER_COL, EmbedSpec, embed_group, row_vectors
from udfs.domain_fasttext import classifier_scorer, features, train_classifier
from udfs.domain_lm import SCORE_SCHEMA, LmSpec, lm_scorer
from udfs.embed import EncoderSpec, encode, one_blas_thread
from udfs.ngram import character_lm, lm_tokens, train_lm

LOWER_IS_BETTER = frozenset(unit.name for unit in UNITS if unit.lower_is_better)
POOL_SAMPLE_SEED = 29  # which pool rows make the general-domain sample
FOLD_SEED = 41  # which fold a pool row is in (cross-fitting: udfs/domain_lm.py)
FOLDS = (0, 1)
_EMBED_SEED, _ORDER_SEED = 31, 37


@dataclass
class Context:
    spark: SparkSession
    lake: Lake
    cfg: SelectConfig
    pool: DataFrame  # row_id, fold, src[, tgt]
    pool_rows: int
    seed: Seed | None
    work: str  # a local directory: models trained on the driver are written here
    staging: str  # the lake directory the models are published from
    run_dir: str
    cache: dict = field(default_factory=dict)

    def model_path(self, name: str) -> str:
        """Where executors find a model file of this run (staged in the lake)."""
        return for_executors(self.spark, f"{self.staging}/{name}", f"model {name}")

    def pool_sample(self, n: int, fold: int) -> list[tuple[str, ...]]:
        """`n` rows of a fold of the pool, drawn by a seeded hash of row_id (the same rows on
        every run)."""
        rows = first_by_hash(self.pool.where(F.col("fold") == fold), n, POOL_SAMPLE_SEED,
                             "row_id").orderBy("row_id")
        return [tuple(r[s] or "" for s in self.cfg.sides) for r in rows.collect()]

    def sample_size(self, ratio: float, cap: int) -> int:
        assert self.seed is not None
        return min(cap, max(1, math.ceil(ratio * len(self.seed))))


def with_fold(pool: DataFrame) -> DataFrame:
    """The pool with its cross-fitting fold, 0 or 1, from a seeded hash of row_id."""
    return pool.withColumn("fold", F.pmod(F.xxhash64(F.lit(FOLD_SEED), "row_id"),
                                          F.lit(len(FOLDS))).cast("int"))


def order_for(lang: str, order: int, char_order: int) -> int:
    return char_order if character_lm(lang) else order


def side_lines(rows: list[tuple[str, ...]], side: int, lang: str) -> list[str]:
    return [t for t in (lm_tokens(r[side], lang) for r in rows) if t]


class MooreLewis:
    name = "moore_lewis"

    def train(self, ctx: Context) -> dict:
        cfg, seed = ctx.cfg.moore_lewis, ctx.seed
        assert seed is not None
        n = ctx.sample_size(cfg.pool_ratio, cfg.pool_max)
        general = [ctx.pool_sample(n, fold) for fold in FOLDS]
        in_rows = list(zip(*seed.sides, strict=True))
        files: dict[str, list] = {"in_domain": [], "general": [[] for _ in FOLDS]}
        for i, (side, lang) in enumerate(zip(ctx.cfg.sides, ctx.cfg.langs, strict=True)):
            order = order_for(lang, cfg.order, cfg.char_order)
            name = f"moore_lewis.{side}.in_domain.klm"
            train_lm(side_lines(in_rows, i, lang), order, os.path.join(ctx.work, name))
            files["in_domain"].append(name)
            for fold in FOLDS:
                name = f"moore_lewis.{side}.general{fold}.klm"
                train_lm(side_lines(general[fold], i, lang), order, os.path.join(ctx.work, name))
                files["general"][fold].append(name)
        log(f"moore_lewis: LMs trained on {len(seed):,} seed lines and "
            f"{' + '.join(str(len(g)) for g in general)} pool lines (two folds)")
        return {"files": files, "general_lines": [len(g) for g in general]}

    def score(self, ctx: Context, entry: dict) -> DataFrame:
        spec = LmSpec(
            sides=tuple(ctx.cfg.sides),
            langs=tuple(ctx.cfg.langs),
            general=tuple(tuple(ctx.model_path(f) for f in fold)
                          for fold in entry["files"]["general"]),
            in_domain=tuple(ctx.model_path(f) for f in entry["files"]["in_domain"]),
        )
        return ctx.pool.mapInPandas(lm_scorer(spec), SCORE_SCHEMA)


class LmFluency:
    name = "lm_fluency"

    def train(self, ctx: Context) -> dict:
        cfg = ctx.cfg.lm_fluency
        lang = ctx.cfg.langs[0]
        if cfg.lm:
            log(f"lm_fluency: scoring with the given LM {cfg.lm}")
            return {"files": {"general": [[cfg.lm]]}, "given": True}
        order = order_for(lang, cfg.order, cfg.char_order)
        names, lines = [], []
        for fold in FOLDS:
            rows = ctx.pool_sample(-(-cfg.train_lines // len(FOLDS)), fold)
            name = f"lm_fluency.src.general{fold}.klm"
            train_lm(side_lines(rows, 0, lang), order, os.path.join(ctx.work, name))
            names.append([name])
            lines.append(len(rows))
        log(f"lm_fluency: general LMs trained on {' + '.join(map(str, lines))} pool lines "
            "(two folds)")
        return {"files": {"general": names}, "train_lines": lines}

    def score(self, ctx: Context, entry: dict) -> DataFrame:
        if entry.get("given"):
            general = ((for_executors(ctx.spark, entry["files"]["general"][0][0],
                                      "lm_fluency.lm"),),)
        else:
            general = tuple((ctx.model_path(name),) for (name,) in entry["files"]["general"])
        spec = LmSpec(sides=("src",), langs=(ctx.cfg.langs[0],), general=general)
        return ctx.pool.mapInPandas(lm_scorer(spec), SCORE_SCHEMA)


class FasttextDomain:
    name = "fasttext_domain"

    def train(self, ctx: Context) -> dict:
        cfg, seed = ctx.cfg.fasttext_domain, ctx.seed
        assert seed is not None
        langs = ctx.cfg.langs
        n = ctx.sample_size(cfg.pool_ratio, cfg.pool_max)
        positives = [features(r, langs) for r in zip(*seed.sides, strict=True)]
        settings = cfg.model_dump(include={"epoch", "lr", "dim", "seed", "bucket"}) | {
            "wordNgrams": cfg.word_ngrams}
        names, negatives = [], []
        for fold in FOLDS:
            rows = ctx.pool_sample(n, fold)
            name = f"fasttext_domain.fold{fold}.bin"
            train_classifier(positives, [features(r, langs) for r in rows],
                             os.path.join(ctx.work, name), settings)
            names.append(name)
            negatives.append(len(rows))
        log(f"fasttext_domain: trained on {len(positives):,} seed lines against "
            f"{' + '.join(map(str, negatives))} pool lines (two folds)")
        return {"files": {"classifier": names}, "negatives": negatives}

    def score(self, ctx: Context, entry: dict) -> DataFrame:
        paths = tuple(ctx.model_path(name) for name in entry["files"]["classifier"])
        scorer = classifier_scorer(paths, tuple(ctx.cfg.sides), tuple(ctx.cfg.langs))
        return ctx.pool.mapInPandas(scorer, SCORE_SCHEMA)


def encoder_spec(ctx: Context, encoder: str, driver: bool) -> EncoderSpec:
    enc = ctx.cfg.encoders[encoder]
    model = (on_this_machine(enc.model) if driver
             else for_executors(ctx.spark, enc.model, f"encoder {encoder}"))
    return EncoderSpec(enc.backend, model, enc.batch_size, ctx.cfg.device, enc.pooling)


def seed_vectors(ctx: Context, encoder: str) -> list[np.ndarray]:
    """The seed's normalized vectors per side (encoded once per encoder on the driver)."""
    key = ("seed_vectors", encoder)
    if key not in ctx.cache:
        assert ctx.seed is not None
        spec = encoder_spec(ctx, encoder, driver=True)
        with one_blas_thread():
            ctx.cache[key] = [encode(spec, lines) for lines in ctx.seed.sides]
    return ctx.cache[key]


def embed_pool(ctx: Context, encoder: str, sides: tuple[str, ...],
               knn_files: tuple[str, ...] | None, k: int, vectors: bool) -> DataFrame:
    """Encode the pool's `sides` (in groups by a hash of row_id, see udfs/domain_embed.py):
    (row_id, score, reason[, vector])."""
    spec = EmbedSpec(encoder_spec(ctx, encoder, driver=False), sides, knn_files, k, vectors)
    groups = max(1, -(-ctx.pool_rows // GROUP_ROWS))
    keyed = ctx.pool.select("row_id", *sides).withColumns({
        GROUP_COL: F.pmod(F.xxhash64(F.lit(_EMBED_SEED), "row_id"), F.lit(groups)),
        ORDER_COL: F.xxhash64(F.lit(_ORDER_SEED), "row_id"),
    })
    schema = SCORE_SCHEMA + (", vector array<float>" if vectors else "")
    # Repartitioned by group first: adaptive execution would otherwise merge the groups into a
    # few tasks by their (small) input size, and encoding is the expensive part.
    spread = keyed.repartition(groups, GROUP_COL)
    return spread.groupBy(GROUP_COL).applyInPandas(embed_group(spec), schema)


class EmbeddingKnn:
    name = "embedding_knn"

    def sides(self, ctx: Context) -> list[int]:
        chosen = ctx.cfg.embedding_knn.sides
        return [i for i, s in enumerate(ctx.cfg.sides) if chosen in ("both", s)]

    def train(self, ctx: Context) -> dict:
        cfg = ctx.cfg.embedding_knn
        vectors = seed_vectors(ctx, cfg.encoder)
        names = []
        for i in self.sides(ctx):
            side = ctx.cfg.sides[i]
            keep = vectors[i][: cfg.seed_max]
            name = f"embedding_knn.{side}.seed.npy"
            np.save(os.path.join(ctx.work, name), keep.astype(np.float32))
            names.append(name)
        log(f"embedding_knn: {len(vectors[0]):,} seed sentences encoded")
        return {"files": {"seed_vectors": names}, "encoder": cfg.encoder}

    def score(self, ctx: Context, entry: dict) -> DataFrame:
        files = tuple(ctx.model_path(f) for f in entry["files"]["seed_vectors"])
        sides = tuple(ctx.cfg.sides[i] for i in self.sides(ctx))
        return embed_pool(ctx, entry["encoder"], sides, files, ctx.cfg.embedding_knn.k, False)


KMEANS_PARTITIONS = 16  # fixed, so a model does not depend on the cluster's size


class KmeansDomains:
    name = "kmeans_domains"

    def pool_vectors(self, ctx: Context, encoder: str) -> DataFrame:
        path = f"{ctx.run_dir}/work/vectors"
        with stage(ctx.spark, "select", "encode the pool for kmeans_domains"):
            vectors = embed_pool(ctx, encoder, tuple(ctx.cfg.sides), None, 0, True)
            vectors.write.mode("overwrite").parquet(path)
        return ctx.spark.read.parquet(path)

    def train(self, ctx: Context) -> dict:
        from pyspark.ml.clustering import KMeans
        from pyspark.ml.functions import array_to_vector

        cfg = ctx.cfg.kmeans_domains
        vectors = self.pool_vectors(ctx, cfg.encoder)
        ctx.cache["kmeans_vectors"] = vectors
        seed = row_vectors(seed_vectors(ctx, cfg.encoder))
        seed_df = ctx.spark.createDataFrame(
            [(-(i + 1), v.tolist()) for i, v in enumerate(seed)],
            "row_id long, vector array<float>")
        points = vectors.where(F.col("vector").isNotNull()).select("row_id", "vector")
        # k-means|| draws its initial centres per partition: rows in a fixed partitioning and
        # order (the pool's vectors come out of a shuffle in fetch order, which varies from run
        # to run), or the clusters, and so the selection, change between identical runs.
        data = (points.unionByName(seed_df)
                .repartition(KMEANS_PARTITIONS, "row_id").sortWithinPartitions("row_id")
                .select("row_id", array_to_vector("vector").alias("features")))
        model = KMeans(k=cfg.k, seed=cfg.seed, maxIter=cfg.max_iter,
                       distanceMeasure="cosine").fit(data)
        model.write().overwrite().save(f"{ctx.staging}/kmeans_domains.model")
        seed_clusters = model.transform(seed_df.select(
            "row_id", array_to_vector("vector").alias("features"))).groupBy(
            "prediction").count().collect()
        counts = {r["prediction"]: r["count"] for r in seed_clusters}
        shares = {str(c): counts.get(c, 0) / len(seed) for c in range(cfg.k)}
        ranked = sorted(range(cfg.k), key=lambda c: (-shares[str(c)], c))
        chosen, covered = [], 0.0
        for c in ranked:
            if covered >= cfg.seed_coverage:
                break
            chosen.append(c)
            covered += shares[str(c)]
        log(f"kmeans_domains: {cfg.k} clusters; the seed's: {chosen} "
            f"({covered:.0%} of the seed)")
        return {"files": {"model": ["kmeans_domains.model"]}, "encoder": cfg.encoder,
                "seed_share": shares, "seed_clusters": chosen}

    def score(self, ctx: Context, entry: dict) -> DataFrame:
        from pyspark.ml.clustering import KMeansModel
        from pyspark.ml.functions import array_to_vector

        vectors = ctx.cache.get("kmeans_vectors") or self.pool_vectors(ctx, entry["encoder"])
        (name,) = entry["files"]["model"]
        model = KMeansModel.load(f"{ctx.staging}/{name}")
        live = vectors.where(F.col("vector").isNotNull())
        clustered = model.transform(live.select("row_id", array_to_vector("vector").alias(
            "features"))).select("row_id", F.col("prediction").alias("domain_cluster"))
        shares = F.create_map(*[x for c, s in entry["seed_share"].items()
                                for x in (F.lit(int(c)), F.lit(float(s)))])
        scored = vectors.select("row_id", "reason").join(clustered, "row_id", "left")
        return scored.select(
            "row_id",
            F.element_at(shares, F.col("domain_cluster")).alias("score"),
            "reason",
            "domain_cluster",
        )


class BertDomain:
    name = "bert_domain"

    def train(self, ctx: Context) -> dict:
        cfg, seed = ctx.cfg.bert_domain, ctx.seed
        assert seed is not None
        base = on_this_machine(cfg.base)
        positives = list(zip(*seed.sides, strict=True))[: cfg.seed_max]
        n = min(cfg.pool_max, max(1, math.ceil(cfg.pool_ratio * len(positives))))
        names, negatives = [], []
        for fold in FOLDS:
            rows = ctx.pool_sample(n, fold)
            examples = [(*_as_pair(r), label) for label, part in ((1, positives), (0, rows))
                        for r in part]
            name = f"bert_domain.fold{fold}"
            with stage(ctx.spark, "select", f"fine-tune bert_domain fold {fold}"):
                fine_tune(examples, base, os.path.join(ctx.work, name), top_layers=cfg.layers,
                          epochs=cfg.epochs, max_length=cfg.max_length, sides_weight=0.0,
                          what=f"bert_domain fold {fold}", log=log)
            names.append(name)
            negatives.append(len(rows))
        log(f"bert_domain: fine-tuned on {len(positives):,} seed rows against "
            f"{' + '.join(map(str, negatives))} pool rows (two folds)")
        return {"files": {"classifier": names}, "negatives": negatives, "base": cfg.base}

    def score(self, ctx: Context, entry: dict) -> DataFrame:
        cfg = ctx.cfg.bert_domain
        spec = DomainBertSpec(
            models=tuple(ctx.model_path(name) for name in entry["files"]["classifier"]),
            base=for_executors(ctx.spark, entry["base"], "bert_domain.base"),
            sides=tuple(ctx.cfg.sides), max_length=cfg.max_length, device=ctx.cfg.device)
        conf = dict(ctx.spark.sparkContext.getConf().getAll())
        return domain_bert_scores(ctx.pool, spec, ctx.pool_rows, embed_profile(conf))


def _as_pair(row: tuple[str, ...]) -> tuple[str, str | None]:
    return (row[0], row[1]) if len(row) > 1 else (row[0], None)


# The code of each selection unit (jobs/selection/units.py), by its name.
METHOD_CLASSES = {c.name: c for c in (MooreLewis, FasttextDomain, EmbeddingKnn, LmFluency,
                                       KmeansDomains, BertDomain)}
assert set(METHOD_CLASSES) == set(METHODS), "each selection unit has its class"

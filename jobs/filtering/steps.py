"""The filter's stages as objects, in `STAGES`, the order rows go through them.

A stage knows the rules it rejects rows by (for filter_stats and the funnel), whether it is a
pair scorer (expensive: its input is staged first, so its sampling and counts do not redo the
stages before it), what it computes (`score`: a filter or refresh run) and how it decides from
scores a run stored (`decide`: a re-decide, jobs/filtering/redecide.py). The runner,
jobs/filtering/run.py `FilterRun.through_stages`, walks the list top to bottom; a new pair
scorer is one `ScorerStage` here plus its decisions in jobs/filtering/scorer_rules.py.
`materialised_input`: the stage reads its input more than once, so the runner stages it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.filtering.config import FilterConfig
from jobs.filtering.cuts import apply_cuts, cut_rules
from jobs.filtering.hosts import with_host_features
from jobs.filtering.layout import Layout
from jobs.filtering.near_dup import near_dup
from jobs.filtering.pair_score_stage import (
    THRESHOLD_COLUMN,
    pair_score_model,
    pair_score_stage,
    with_english_lm,
)
from jobs.filtering.pair_scores import (
    align_stage,
    choose_aligner,
    cross_encoder_stage,
    embed_stage,
)
from jobs.filtering.scorer_rules import scorer_rules
from jobs.filtering.stages import (
    INGEST_ERRORS,
    alive,
    dedup,
    dedup_rules,
    first_failure,
    normalize_and_analyze,
    reject_where,
    score_and_decide,
)
from jobs.kit.errors import ConfigError
from jobs.kit.ingest import input_bytes
from jobs.kit.progress import log
from jobs.lake.models import AlignerStore, for_executors
from jobs.lake.store import Lake
from udfs import rules as registry


class Run(Protocol):
    """What a stage uses of the run it is part of (jobs/filtering/run.py `FilterRun`, and the
    re-decide's and refresh's runs built on it)."""

    spark: SparkSession
    lake: Lake
    cfg: FilterConfig
    run_id: str
    layout: Layout
    source_cols: list[str]
    source: str  # a re-decide's source run
    ingested: DataFrame

    def staged(self, df: DataFrame, name: str,
               partition_cols: list[str] | None = None) -> DataFrame: ...
    def stage(self, name: str) -> AbstractContextManager[None]: ...
    def partitions(self, input_bytes: int | None = None) -> int: ...
    def deduplicate(self, rows: DataFrame) -> DataFrame: ...
    def near_deduplicate(self, rows: DataFrame) -> DataFrame: ...
    def pair_score_cut(self, rows: DataFrame) -> Column | None: ...
    def committed_elsewhere(self, rows: DataFrame) -> DataFrame | None: ...


# The original run's reject_stage, carried while a re-decide decides (dropped at the end).
WAS = "_was_stage"


class Stage:
    """One stage of the funnel. `shows`: what its work is called in progress lines."""

    name: str = ""
    shows: str = ""
    scorer = False
    # It reads its input more than once (a sample, a count, a percentile): the runner stages
    # its input first, or each read would redo every stage before it.
    materialised_input = False
    stores_output = False  # its output is read back from files already (not staged again)

    def rules(self, cfg: FilterConfig) -> list[tuple[str, str]]:
        """The (reject_stage, reject_rule) values it can give a row, in the order rows meet them."""
        return []

    def on(self, cfg: FilterConfig) -> bool:
        return True

    def score(self, run: Run, rows: DataFrame) -> DataFrame:
        """Compute what the stage computes and reject rows by it."""
        return rows

    def decide(self, run: Run, rows: DataFrame) -> DataFrame:
        """Reject rows by the scores the source run stored (nothing is computed again)."""
        return rows


class Ingest(Stage):
    name, shows = "ingest", "ingest"
    stores_output = True

    def rules(self, cfg: FilterConfig) -> list[tuple[str, str]]:
        return [("ingest", e) for e in INGEST_ERRORS]  # jobs/kit/ingest.py

    def score(self, run: Run, rows: DataFrame) -> DataFrame:
        """The input rows, staged as the run's raw table (read back: later steps start there)."""
        lay = run.layout
        with run.stage(f"ingest into {lay.raw}"):
            spread_over = run.partitions(input_bytes(run.spark, rows))
            # Later reads of the staged rows split them as finely (run.py sets the default).
            run.spark.conf.set("spark.sql.files.minPartitionNum", str(spread_over))
            spread = rows.repartition(spread_over, "row_id")  # a gzip file is one split
            parts = [lay.key, "corpus", *run.source_cols]
            run.ingested = lay.inward(run.staged(lay.outward(spread), lay.raw, parts))
        return run.ingested

    def decide(self, run: Run, rows: DataFrame) -> DataFrame:
        """Rows rejected at ingest keep their fate; the stored rows are the rows in."""
        run.ingested = rows
        return rows.withColumn(WAS, F.col("reject_stage"))


class Normalize(Stage):
    name, shows = "normalize", "normalize"

    def score(self, run: Run, rows: DataFrame) -> DataFrame:
        langid = for_executors(run.spark, run.cfg.langid.model, "fastText language-ID model")
        return normalize_and_analyze(rows, run.cfg, langid)

    # decide: the stored text is normalized already


class Rules(Stage):
    """The heuristic and language-ID rules decide together: the first failing rule in
    `rules.order` rejects a row, under the rule's own stage (udfs/rules.py)."""

    name, shows = "rules", "rules+langid"

    def rules(self, cfg: FilterConfig) -> list[tuple[str, str]]:
        return [(rule.stage, rule.name) for rule in cfg.rules_run]

    def score(self, run: Run, rows: DataFrame) -> DataFrame:
        return score_and_decide(rows, run.cfg)

    def decide(self, run: Run, rows: DataFrame) -> DataFrame:
        ingest = F.col(WAS).eqNullSafe("ingest")
        rule = F.when(ingest, F.col("reject_rule")).otherwise(first_failure(run.cfg))
        stage_of = F.create_map(*[F.lit(x) for r in registry.RULES for x in (r.name, r.stage)])
        stage = F.when(ingest, F.lit("ingest")).when(rule.isNotNull(), stage_of[rule])
        return rows.withColumns({"reject_rule": rule, "reject_stage": stage})


class Dedup(Stage):
    name, shows = "dedup", "dedup"

    def rules(self, cfg: FilterConfig) -> list[tuple[str, str]]:
        return [("dedup", rule) for rule in dedup_rules(cfg)]

    def score(self, run: Run, rows: DataFrame) -> DataFrame:
        return run.deduplicate(rows)  # a refresh dedups against the whole lake

    def decide(self, run: Run, rows: DataFrame) -> DataFrame:
        # Again: a row re-admitted by a looser rule may duplicate another, and a duplicate of
        # a now-rejected row may now survive, so the result equals a full run's.
        return dedup(rows, run.cfg)


class NearDup(Stage):
    """Near-duplicates among the rows exact dedup keeps (jobs/filtering/near_dup.py)."""

    name, shows = "near_dup", "near-duplicates"
    materialised_input = True  # shingles, candidates and survivors each read it

    def on(self, cfg: FilterConfig) -> bool:
        return cfg.near_dup.enabled

    def rules(self, cfg: FilterConfig) -> list[tuple[str, str]]:
        return [("near_dup", "near_dup")] if self.on(cfg) else []

    def score(self, run: Run, rows: DataFrame) -> DataFrame:
        return run.near_deduplicate(rows)  # a refresh's is lake-wide, decided with its dedup

    def decide(self, run: Run, rows: DataFrame) -> DataFrame:
        return near_dup(rows, run.cfg)  # from the stored text: the same on the rows now alive


class ScorerStage(Stage):
    """A pair scorer: it adds its score columns on the rows still alive and rejects by its
    units in jobs/filtering/scorer_rules.py."""

    scorer = True
    materialised_input = True
    section = ""  # the config section that turns it on

    def on(self, cfg: FilterConfig) -> bool:
        return getattr(cfg, self.section).enabled

    def rules(self, cfg: FilterConfig) -> list[tuple[str, str]]:
        return [(u.stage, u.rule) for u in scorer_rules(cfg, self.name)]

    def decide(self, run: Run, rows: DataFrame) -> DataFrame:
        return self.decide_stored(run, rows)

    def decide_stored(self, run: Run, rows: DataFrame,
                      threshold: Column | None = None) -> DataFrame:
        """Its units' decisions by the stored scores (`threshold`: a column in place of the
        setting's value). A row alive here that the source run never sent to this scorer has
        no score to decide by: scoring just those rows would not equal a full run (an
        aligner's sample, the margin's neighbours), so it stops."""
        units = scorer_rules(run.cfg, self.name)
        if not units:
            return rows
        reached = F.col(WAS).isNull() | F.col(WAS).isin(*stages_from(self.name))
        unscored = rows.where(alive() & ~reached).count()
        if unscored:
            raise ConfigError(
                f"--redecide {run.source}: {unscored:,} rows the new thresholds keep never "
                f"reached the {self.name} scorer in run {run.source} (no {self.name} scores): "
                "run the filter job with these settings instead")
        for unit in units:
            rows = reject_where(rows, unit.failing(run.cfg, threshold), unit.stage, unit.rule)
        return rows


class Lm(ScorerStage):
    """An n-gram LM's score of each side (udfs/side_lm.py): the cheapest scorer, first."""

    name, shows = "lm", "LM scores"
    section = "lm"

    def score(self, run: Run, rows: DataFrame) -> DataFrame:
        from udfs.side_lm import add_lm_scores

        cfg = run.cfg
        models = {side: (lang, for_executors(run.spark, cfg.lm.models[lang],
                                             f"lm.models.{lang}"))
                  for side, lang in cfg.sides}
        log("LM scores: " + ", ".join(f"{side} {lang} {cfg.lm.models[lang]}"
                                      for side, lang in cfg.sides))
        rows = add_lm_scores(rows, models, alive())
        for unit in scorer_rules(cfg, self.name):
            rows = reject_where(rows, unit.failing(cfg), unit.stage, unit.rule)
        return rows


class Align(ScorerStage):
    name, shows = "align", "word alignment"
    section = "align"

    def score(self, run: Run, rows: DataFrame) -> DataFrame:
        cfg = run.cfg
        with run.stage(f"aligner (trained on up to {cfg.align.sample_pairs:,} clean pairs)"):
            model_dir = choose_aligner(rows, cfg, AlignerStore(run.lake, cfg.pair), run.run_id)
        log(f"word alignment scores (model {model_dir or 'none: all scores null'})")
        return align_stage(rows, cfg, model_dir)


class Embed(ScorerStage):
    name, shows = "embed", "embeddings"
    section = "embedding"

    def score(self, run: Run, rows: DataFrame) -> DataFrame:
        cfg = run.cfg
        enc = cfg.embedding.chosen
        log(f"embedding similarity ({cfg.embedding.encoder}: {enc.backend} {enc.model})")
        model = for_executors(run.spark, enc.model, f"{cfg.embedding.encoder} encoder")
        return embed_stage(rows, cfg, model)


class CrossEncoder(ScorerStage):
    """A fine-tuned cross-encoder reads each pair as one sequence (udfs/cross_encoder.py)."""

    name, shows = "cross_encoder", "cross-encoder"
    section = "cross_encoder"

    def score(self, run: Run, rows: DataFrame) -> DataFrame:
        conf = getattr(run.cfg, self.section)
        log(f"{self.shows} (model {conf.model} on {conf.base})")
        model = for_executors(run.spark, conf.model, f"{self.section}.model")
        base = for_executors(run.spark, conf.base, f"{self.section}.base")
        return cross_encoder_stage(rows, run.cfg, self.section, model, base)


class MtDetector(CrossEncoder):
    """The same kind of model, trained to tell human translations from machine output:
    `mt_human` (docs/bert.md "MT detector"), a pair_score input."""

    name, shows = "mt_detector", "MT detector"
    section = "mt_detector"


class Hosts(Stage):
    """Evidence from each pair's website (jobs/filtering/hosts.py): pair_score inputs, over
    the run's rows and the lake's rows it does not rewrite. A re-decide keeps them stored."""

    name, shows = "hosts", "websites"
    materialised_input = True  # read twice: the hosts' aggregate, then the join

    def on(self, cfg: FilterConfig) -> bool:
        return cfg.hosts.enabled

    def score(self, run: Run, rows: DataFrame) -> DataFrame:
        return with_host_features(rows, "pair", run.committed_elsewhere(rows))


class EnglishFluency(Stage):
    """The English side's score under `pair_score.english_lm` (udfs/side_lm.py), a feature of
    the shipped pair_score models; one pass, staged with the scorers before pair_score."""

    name, shows = "english_lm", "English fluency"

    def on(self, cfg: FilterConfig) -> bool:
        return cfg.pair_score.enabled and cfg.pair_score.english_lm is not None

    def score(self, run: Run, rows: DataFrame) -> DataFrame:
        return with_english_lm(rows, run.cfg, run.spark)


class PairScore(ScorerStage):
    name, shows = "pair_score", "pair_score"
    section = "pair_score"

    def score(self, run: Run, rows: DataFrame) -> DataFrame:
        log(f"pair_score (model {run.cfg.pair_score.model})")
        return pair_score_stage(rows, run.cfg, pair_score_model(run.cfg, run.lake))[0]

    def decide(self, run: Run, rows: DataFrame) -> DataFrame:
        cut = run.pair_score_cut(rows)
        if cut is not None and THRESHOLD_COLUMN in rows.columns:  # the threshold applied
            rows = rows.withColumn(THRESHOLD_COLUMN, F.when(F.col("pair_score").isNotNull(), cut))
        return self.decide_stored(run, rows, cut)


class Cuts(Stage):
    """Decisions on any stored score: a share or bounds (jobs/filtering/cuts.py)."""

    name, shows = "cut", "cuts"
    materialised_input = True  # a share's percentile is one more read

    def on(self, cfg: FilterConfig) -> bool:
        return bool(cfg.cuts)

    def rules(self, cfg: FilterConfig) -> list[tuple[str, str]]:
        return cut_rules(cfg)

    def score(self, run: Run, rows: DataFrame) -> DataFrame:
        return apply_cuts(rows, run.cfg)

    def decide(self, run: Run, rows: DataFrame) -> DataFrame:
        return apply_cuts(rows, run.cfg)  # over the rows the new decisions keep


STAGES: tuple[Stage, ...] = (Ingest(), Normalize(), Rules(), Dedup(), NearDup(), Lm(), Align(),
                             Embed(), CrossEncoder(), MtDetector(), Hosts(), EnglishFluency(),
                             PairScore(), Cuts())


def stages_from(name: str) -> tuple[str, ...]:
    """The names of the stages from `name` on: a row whose original reject_stage is one of
    them had reached stage `name`."""
    names = [s.name for s in STAGES]
    return tuple(names[names.index(name):])


def any_scorer(cfg: FilterConfig) -> bool:
    return any(s.on(cfg) for s in STAGES if s.scorer)


def rule_sequence(cfg: FilterConfig) -> list[tuple[str, str]]:
    """(stage, rule) in the order rows meet them, for stats and the funnel."""
    return [step for stage in STAGES for step in stage.rules(cfg)]

"""The filter's row work over a DataFrame of raw rows: normalize, score, decide, dedup. The
stages that call it, in order, are jobs/filtering/steps.py `STAGES`."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from jobs.filtering.config import FilterConfig, NormalizeConf
from udfs import normalize as N
from udfs import rules as registry
from udfs.dedup import dedup_key
from udfs.sides import SIDE_SCHEMA, SideOptions, side_analyzer

INGEST_ERRORS = ["invalid_utf8", "nul_byte", "line_too_long", "malformed_line"]


def alive() -> Column:
    """Rows no stage has rejected yet."""
    return F.col("reject_rule").isNull()


def reject_where(df: DataFrame, failing: Column, stage: str, rule: str) -> DataFrame:
    """Reject alive rows where `failing` is true (null counts as passing)."""
    hit = alive() & F.coalesce(failing, F.lit(False))
    return df.withColumn(
        "reject_stage", F.when(hit, stage).otherwise(F.col("reject_stage"))
    ).withColumn("reject_rule", F.when(hit, rule).otherwise(F.col("reject_rule")))


def jvm_steps(conf: NormalizeConf) -> list[Callable[[Column], Column]]:
    """The enabled steps that stay in the JVM: each skips a line without `&` or `<` (most
    lines) for the cost of a `contains`. The others run in the per-side Arrow pass."""
    steps: list[Callable[[Column], Column]] = []
    if conf.unescape_entities:
        steps.append(N.unescape_entities)
    if conf.strip_html:
        steps.append(N.strip_html)
    return steps


def normalize_and_analyze(raw: DataFrame, cfg: FilterConfig, langid_model: str) -> DataFrame:
    """Normalized src/tgt plus `src_a`/`tgt_a` analysis structs (one Python pass per row)."""
    ok = F.col("ingest_error").isNull()
    df = raw
    for side, _ in cfg.sides:
        # One projection per step. Steps read their input several times (a guard, then the
        # rewrite), and unescaping goes through `reflect`, which Spark treats as
        # nondeterministic and so never shares: nested in one expression, each read would
        # redo every step before it (measured 3.5x slower on news text).
        for step in jvm_steps(cfg.normalize):
            df = df.withColumn(side, F.when(ok, step(F.col(side))).otherwise(F.col(side)))
    n = cfg.normalize
    for side, lang in cfg.sides:
        opts = SideOptions(
            lang, langid_model, n.traditional_to_simplified, n.fullwidth_to_halfwidth,
            n.remove_invisible, n.moses_punct, n.collapse_whitespace,
            cfg.langid.backend(lang) or "none",
        )
        df = df.withColumn(f"{side}_a", side_analyzer(opts)(F.when(ok, F.col(side))))
    if cfg.mono:  # no target side: its scores come out null and its rules are skipped
        df = df.withColumn("tgt_a", F.lit(None).cast(f"struct<{SIDE_SCHEMA}>"))
    return df.withColumn("src", F.coalesce("src_a.text", "src")).withColumn(
        "tgt", F.coalesce("tgt_a.text", "tgt")
    )


def rule_row(cfg: FilterConfig) -> registry.Row:
    """The run's sides and rule settings, as the rules of udfs/rules.py see them."""
    src, tgt = cfg.langs
    scripts = cfg.langid.scripts_of
    sides = registry.Side("src", src, scripts(src)), registry.Side("tgt", tgt, scripts(tgt))
    return registry.Row(*sides, mono=cfg.mono, settings=cfg.rule_settings)


def score_columns(cfg: FilterConfig) -> dict[str, Column]:
    """The score columns of the rules that run (udfs/rules.py), in the order they are stored."""
    return registry.score_columns(cfg.rules_run, rule_row(cfg))


def rule_failures(cfg: FilterConfig) -> dict[str, Column]:
    """Each rule that runs -> true where a row fails it (null counts as passing)."""
    return registry.rule_failures(cfg.rules_run, rule_row(cfg))


def first_failure(cfg: FilterConfig) -> Column:
    """The first rule in `rules.order` a row fails, or null."""
    return registry.first_failure(cfg.rules_run, rule_row(cfg))


def score_and_decide(df: DataFrame, cfg: FilterConfig) -> DataFrame:
    """Every score column, then `reject_stage`/`reject_rule` (ingest error, else the first
    failing rule)."""
    ok = F.col("ingest_error").isNull()
    scores = {name: F.when(ok, expr) for name, expr in score_columns(cfg).items()}
    df = df.withColumns(scores).drop("src_a", "tgt_a")
    rule = F.coalesce(F.col("ingest_error"), first_failure(cfg))
    stage_of_rule = F.create_map(*[F.lit(x) for r in registry.RULES for x in (r.name, r.stage)])
    stage = F.when(F.col("ingest_error").isNotNull(), F.lit("ingest")).when(
        rule.isNotNull(), stage_of_rule[rule]
    )
    return df.withColumn("reject_rule", rule).withColumn("reject_stage", stage).drop("ingest_error")


def dedup_rules(cfg: FilterConfig) -> list[str]:
    """The enabled dedup passes, in order: pairs, then one translation per source/target
    (monolingual text: the one pass)."""
    d = cfg.dedup
    if not d.enabled:
        return []
    if cfg.mono:  # one side: the text is the key; side passes would repeat or misfire
        return ["duplicate"]
    wanted = {
        "duplicate": True,
        "duplicate_source": d.source_side,
        "duplicate_target": d.target_side,
    }
    return [rule for rule, on in wanted.items() if on]


# Each dedup pass's key, hashed and stored with every row (bitext/mono tables): a later run
# looks new rows up against committed ones by these (lake-wide dedup, jobs/refresh.py),
# reading two longs a row instead of recomputing keys from the text.
KEY_HASH = {"duplicate": "dup_key", "duplicate_source": "dup_key_src",
            "duplicate_target": "dup_key_tgt"}


def dedup(df: DataFrame, cfg: FilterConfig, committed: DataFrame | None = None) -> DataFrame:
    """Among rows no rule rejected, keep the first of each duplicate group by (corpus, file,
    line); the others get reject_rule `duplicate` (then `duplicate_source`/`_target` when
    side dedup is on) and `dup_of` = the survivor's row_id.

    `committed`: rows already in the lake (`dup_key*`, row_id, corpus, file, line). A new row
    whose key one of them has is a duplicate of it (the committed row survives: the first of
    them by corpus, file, line), before the new rows are deduplicated among themselves."""
    return mark_duplicates(with_dedup_keys(df, cfg), cfg, committed)


def with_dedup_keys(df: DataFrame, cfg: FilterConfig) -> DataFrame:
    """`dup_of` (null) and each dedup pass's key hash (`dup_key*`, stored with every row).

    Rows are grouped by their keys' 64-bit hashes, the same hashes lake-wide dedup matches
    committed rows by: a window over a long instead of the key text, each side's key
    computed once. Two different keys collide with probability about n^2 / 2^65 (2.7e-6 for
    10M rows of one corpus)."""
    df = df.withColumn("dup_of", F.lit(None).cast("long"))
    # Each side's key as a column of its own: Spark then computes it once for every hash.
    df = df.withColumns({"_key_src": dedup_key(F.col("src"), cfg.dedup),
                         "_key_tgt": dedup_key(F.col("tgt"), cfg.dedup)})
    df = df.withColumns(key_hashes(F.col("_key_src"), F.col("_key_tgt"), cfg.mono))
    return df.drop("_key_src", "_key_tgt")


def key_hashes(src_key: Column, tgt_key: Column, mono: bool) -> dict[str, Column]:
    """Each stored dedup key hash (`dup_key*`) from the two sides' dedup keys (null for a
    monolingual row's target). The one definition: a filter run stores these hashes and a
    refresh matches committed rows by them (jobs/refreshing/dedup.py), so two definitions that
    drifted apart would silently stop lake-wide dedup."""
    keys = {"duplicate": F.concat_ws("\t", src_key, tgt_key),
            "duplicate_source": src_key, "duplicate_target": tgt_key}
    stored = ["duplicate"] if mono else list(KEY_HASH)
    return {KEY_HASH[rule]: F.xxhash64(keys[rule]) for rule in stored}


def mark_duplicates(df: DataFrame, cfg: FilterConfig,
                    committed: DataFrame | None = None) -> DataFrame:
    """Each enabled dedup pass over rows that carry their key hashes (`with_dedup_keys`)."""
    for rule in dedup_rules(cfg):
        if committed is not None:
            df = _mark_committed_duplicates(df, rule, committed)
        df = _mark_duplicates(df, rule, F.col(KEY_HASH[rule]))
    return df


def _mark_committed_duplicates(df: DataFrame, rule: str, committed: DataFrame) -> DataFrame:
    column = KEY_HASH[rule]
    wanted = df.where(alive()).select(column).distinct()  # only keys the new rows have
    first = F.min(F.struct("corpus", "file", "line", "row_id"))
    survivors = (
        committed.select(column, "corpus", "file", "line", "row_id")
        .join(wanted, column)
        .groupBy(column)
        .agg(first["row_id"].alias("_committed"))
    )
    df = df.join(survivors, column, "left").select(*df.columns, "_committed")
    is_dup = alive() & F.col("_committed").isNotNull()
    df = df.withColumn("dup_of", F.when(is_dup, F.col("_committed")).otherwise(F.col("dup_of")))
    return reject_where(df, is_dup, "dedup", rule).drop("_committed")


def _mark_duplicates(df: DataFrame, rule: str, key_hash: Column) -> DataFrame:
    # Rows already rejected are each a group of their own (by their row id).
    group = [alive(), F.when(alive(), key_hash).otherwise(F.col("row_id"))]
    w = Window.partitionBy(*group).orderBy("corpus", "file", "line", "row_id")
    df = df.withColumn("_survivor", F.first("row_id").over(w))
    is_dup = alive() & (F.col("_survivor") != F.col("row_id"))
    df = df.withColumn("dup_of", F.when(is_dup, F.col("_survivor")).otherwise(F.col("dup_of")))
    return reject_where(df, is_dup, "dedup", rule).drop("_survivor")

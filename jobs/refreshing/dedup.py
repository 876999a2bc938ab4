"""Lake-wide dedup for a refresh, decided as a `--full` refresh of the sources as they are now
would decide it.

Dedup keeps the first row of each duplicate group by (corpus, file, line). A refresh filters
only its new and changed files, but their rows can change the fate of rows it does not
reprocess: a survivor whose file changed, was renamed or dropped leaves its duplicates
pointing at nothing (they would never be clean again), and a new row that sorts before a
committed survivor takes its place. So a refresh deduplicates its new rows together with the
committed rows of the files it keeps (their stored key hashes and order: nothing is read from
the sources or scored again), and every kept file with a row whose dedup decision changes is
*carried*: its committed rows are re-decided (pre-dedup scores kept, dedup and the pair
scorers after it run again) and rewritten with the refresh, in the same commit.

Rows no refresh wrote (a plain filter run's files, with no source file id) cannot be
rewritten by one: a refresh treats their clean rows as fixed survivors, as before.

With near_dup on, the same rows then go through lake-wide near-dup (jobs/refreshing/
near_dup.py) before the changed files are told, so a file is carried when either decision
of one of its rows changes.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.filtering.config import FilterConfig
from jobs.filtering.layout import Layout
from jobs.filtering.near_dup import JACCARD, KEYS
from jobs.filtering.stages import KEY_HASH, dedup_rules, key_hashes, mark_duplicates
from jobs.filtering.steps import stages_from
from jobs.lake.store import Lake
from jobs.refreshing.near_dup import lake_near_dup
from jobs.refreshing.units import SOURCE_COLUMN, SOURCE_FILE
from udfs.dedup import dedup_key

# Stages a row reaches alive at dedup: dedup itself, near_dup and the pair scorers after it.
FROM_DEDUP = list(stages_from("dedup"))
STORED = "_stored"  # a committed row taking part in the refresh's dedup
WAS_RULE, WAS_DUP = "_was_rule", "_was_dup"  # its dedup decision as committed


def reached_dedup() -> Column:
    """A committed row that no rule before dedup rejected."""
    return F.col("reject_stage").isNull() | F.col("reject_stage").isin(FROM_DEDUP)


def dedup_decision() -> Column:
    """The rule exact or near dedup rejected a row by (null: it survived both)."""
    return F.when(F.col("reject_stage").isin("dedup", "near_dup"), F.col("reject_rule"))


def stored_rows(spark: SparkSession, lake: Lake, layout: Layout, key: str) -> DataFrame | None:
    """The pair's committed rows in the stages' shape, each with the id of the source file
    it came from (`source_id`; null for a plain filter run's rows); None before any."""
    name = f"{lake.database}.{layout.prefix}"
    if not spark.catalog.tableExists(name):
        return None
    spark.catalog.refreshTable(name)
    rows = spark.table(lake.qualified(layout.prefix)).where(F.col(layout.key) == key)
    source = F.regexp_extract(F.col("_metadata.file_name"), SOURCE_FILE.pattern, 1)
    return layout.inward(rows.withColumn(SOURCE_COLUMN, F.when(source != "", source)))


def stored_raw(spark: SparkSession, lake: Lake, layout: Layout, key: str) -> DataFrame:
    """The pair's committed raw rows in the stages' shape, with their source file ids."""
    rows = spark.table(lake.qualified(layout.raw)).where(F.col(layout.key) == key)
    source = F.regexp_extract(F.col("_metadata.file_name"), SOURCE_FILE.pattern, 1)
    return layout.inward(rows.withColumn(SOURCE_COLUMN, F.when(source != "", source)))


def with_key_hashes(rows: DataFrame, cfg: FilterConfig) -> DataFrame:
    """Committed rows with every dedup pass's key hash: stored, or computed from the text for
    rows committed before sluice stored them."""
    src = dedup_key(F.col("src"), cfg.dedup)
    tgt = dedup_key(F.lit(None).cast("string") if cfg.mono else F.col("tgt"), cfg.dedup)
    return rows.withColumns({
        h: F.coalesce(F.col(h), key) if h in rows.columns else key
        for h, key in key_hashes(src, tgt, cfg.mono).items()})


class RefreshDedup:
    """The dedup of one refresh: `stored` are the pair's committed rows (`stored_rows`),
    `kept` the ids of source files whose rows stay (re-decidable), `removed` those whose
    committed rows go (changed, renamed, dropped or reprocessed)."""

    def __init__(self, cfg: FilterConfig, stored: DataFrame, kept: set[str],
                 removed: set[str]) -> None:
        self.cfg = cfg
        source = F.col(SOURCE_COLUMN)
        self.stored = stored.where(source.isNull() | ~source.isin(sorted(removed)))
        self.removed = stored.where(source.isin(sorted(removed)))
        self.kept = sorted(kept)

    def fixed_survivors(self) -> DataFrame:
        """Clean rows of files no refresh wrote: survivors a refresh cannot re-decide."""
        fixed = self.stored.where(F.col(SOURCE_COLUMN).isNull() | ~F.col(SOURCE_COLUMN).isin(
            self.kept))
        return with_key_hashes(fixed.where(F.col("outcome") == "clean"), self.cfg)

    def movable(self) -> DataFrame:
        """Rows of kept files that reached dedup, alive again, with their committed decision."""
        rows = self.stored.where(F.col(SOURCE_COLUMN).isin(self.kept) & reached_dedup())
        near = [KEYS] if self.cfg.near_dup.enabled and KEYS in rows.columns else []
        return with_key_hashes(rows, self.cfg).select(
            "row_id", "corpus", "file", "line", *self.hashes(), *near,
            F.col(SOURCE_COLUMN).cast("string").alias(SOURCE_COLUMN),
            dedup_decision().alias(WAS_RULE), F.col("dup_of").alias(WAS_DUP))

    def hashes(self) -> list[str]:
        return [KEY_HASH[rule] for rule in dedup_rules(self.cfg)]

    def decide(self, new: DataFrame) -> DataFrame:
        """`new` (the refresh's rows with their key hashes) and the movable committed rows,
        deduplicated as one set; committed ones flagged `_stored`.

        `new` is checkpointed first: each pass against the committed survivors reads it twice
        (the keys it looks up, the rows it marks), and Spark shares no part of the two plans,
        so each read would run the normalize and language-ID pass before it again (twice with
        pair dedup only, four times with side dedup on)."""
        new = new.withColumn(SOURCE_COLUMN, F.col(SOURCE_COLUMN).cast("string")).localCheckpoint()
        old = self.movable().withColumns({
            "reject_stage": F.lit(None).cast("string"), "reject_rule": F.lit(None).cast("string"),
            "dup_of": F.lit(None).cast("long"), STORED: F.lit(True)})
        both = new.withColumn(STORED, F.lit(False)).unionByName(old, allowMissingColumns=True)
        fixed = self.fixed_survivors()
        marked = mark_duplicates(both, self.cfg, fixed)
        if not self.cfg.near_dup.enabled:
            return marked
        # Staged first: near-dup reads the rows three times (keys, texts, the result).
        return lake_near_dup(marked.localCheckpoint(), self.stored, fixed, self.cfg, STORED)

    @staticmethod
    def changed_files(decided: DataFrame) -> list[str]:
        """Kept files with a committed row whose dedup decision changed."""
        same = (dedup_decision().eqNullSafe(F.col(WAS_RULE))
                & F.col("dup_of").eqNullSafe(F.col(WAS_DUP)))
        changed = decided.where(F.col(STORED) & ~same).select(SOURCE_COLUMN).distinct()
        return sorted(r[0] for r in changed.collect())

    def sharing_hosts(self, decided: DataFrame) -> list[str]:
        """Kept files with a committed row from a website the refresh adds rows to or takes
        rows from: their host features change (jobs/filtering/hosts.py)."""
        if "host" not in self.stored.columns:
            return []
        touched = self.new_rows(decided).select("host").unionByName(
            self.removed.select("host")).where(F.col("host").isNotNull()).distinct()
        files = self.stored.where(F.col(SOURCE_COLUMN).isin(self.kept)).join(
            touched, "host", "left_semi").select(SOURCE_COLUMN).distinct()
        return sorted(r[0] for r in files.collect())

    @staticmethod
    def new_rows(decided: DataFrame) -> DataFrame:
        return decided.where(~F.col(STORED)).drop(STORED, WAS_RULE, WAS_DUP)

    def carried_rows(self, files: list[str], decided: DataFrame, columns: list[str]) -> DataFrame:
        """Every committed row of `files` in the shape of the refresh's rows (`columns`), its
        dedup decision from `decided`; rows a rule rejected before dedup keep their fate, and
        the pair scorers' scores go (they run again on what dedup keeps)."""
        rows = self.stored.where(F.col(SOURCE_COLUMN).isin(files))
        rows = with_key_hashes(rows, self.cfg)
        near = [c for c in (JACCARD, KEYS) if c in decided.columns]  # near_dup's, when on
        fates = decided.where(F.col(STORED)).select(
            "row_id", F.col("reject_stage").alias("_stage"), F.col("reject_rule").alias("_rule"),
            F.col("dup_of").alias("_dup"), *[F.col(c).alias(f"_{c}") for c in near])
        rows = rows.drop(*near).join(fates, "row_id", "left")
        again = reached_dedup()
        rows = rows.withColumns({
            "reject_stage": F.when(again, F.col("_stage")).otherwise(F.col("reject_stage")),
            "reject_rule": F.when(again, F.col("_rule")).otherwise(F.col("reject_rule")),
            "dup_of": F.when(again, F.col("_dup")),
            SOURCE_COLUMN: F.col(SOURCE_COLUMN).cast("string"),
            **{c: F.when(again, F.col(f"_{c}")) for c in near},
        })
        return rows.select(*columns)

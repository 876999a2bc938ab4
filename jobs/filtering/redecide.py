"""Re-decide a filter run from its stored scores, as a new run, without recomputing a score.

    spark-submit jobs/filter.py --redecide RUN_ID --lake LAKE --set rules.max_punct_share=0.4

Reads RUN_ID's rows from `bitext` (`mono` for a --lang run) and its resolved config from the
`runs` table, applies `--config` (its own keys; `extends` is not followed: the stored config
is the base) and `--set` over that config, then decides again:

- rows rejected at ingest keep their fate;
- every other row: the first failing rule of the new `rules.order` over the stored scores
  (udfs/rules.py predicates, through jobs/filtering/stages.py `first_failure`);
- dedup runs again (jobs/filtering/stages.py `dedup`) over the rows the new rules keep: a row
  re-admitted by a looser threshold may be a duplicate of another row, and a row that was a
  duplicate of a now-rejected row may now survive, so the result equals a full run's;
- the pair scorers (align, embed, pair_score) decide by their stored scores and the new
  thresholds. A row alive at a scorer that the original run never sent to it has no score:
  the re-decide stops with one line asking for a full run. Scoring just those rows would not
  equal a full run either: an aligner trained in the run draws its sample from the clean rows,
  and `embed_margin` compares each row with the other alive rows of its hash group. Rows
  that stay alive keep the original run's scores (its aligner, its margin neighbours).

The new run commits like a filter run (jobs/filtering/run.py `FilterRun`, jobs/lake/runs.py
`run_and_commit`): its rows replace the original run's (pair, corpus) partitions, with its own
run id, filter_stats and a `runs` row (job `redecide`, inputs `[{"redecide_of": RUN_ID}]`, the
new resolved config); `bitext_raw` is left as it is. Settings that change how a score is
computed (normalization, models, inputs, ...) and thresholds on scores the run never computed
are errors (exit 2): those need the filter job.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.filtering.config import FilterConfig, load_config, stored_filter_config
from jobs.filtering.layout import Layout
from jobs.filtering.pair_score_model import load as load_pair_score_model
from jobs.filtering.pair_score_stage import THRESHOLD_COLUMN, fits
from jobs.filtering.pair_score_stage import threshold as pair_score_threshold
from jobs.filtering.run import FilterRun
from jobs.filtering.scorer_rules import SCORER_RULES
from jobs.filtering.stages import score_columns
from jobs.filtering.steps import STAGES
from jobs.kit.config import check_run_id, deep_merge, parse_override, read_yaml
from jobs.kit.errors import ConfigError
from jobs.kit.progress import log
from jobs.lake.runs import new_run_id, open_lake, run_and_commit
from jobs.lake.store import Flip, Lake, sql_string

JOB = "redecide"
# Settings a re-decide may change: thresholds, rule order, dedup, turning a scorer off (and
# where the lake is, how Spark runs). Anything else changes how scores are computed.
DECISION_SETTINGS = (
    "lake.*", "spark.*", "rules.*", "langid.*", "dedup.*", "cuts",
    *[key for unit in SCORER_RULES for key in unit.decided_by],  # each scorer unit's own
)
SCORE_SETTINGS = (  # feed a score, not a decision
    "rules.special_patterns*", "langid.model", "langid.backend*", "langid.scripts*", "langid.skip*",
)
def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as dotted paths -> leaf values (lists are leaves)."""
    if not isinstance(data, dict):
        return {prefix: data}
    out: dict[str, Any] = {}
    for key, value in data.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def score_changes(old: FilterConfig, new: FilterConfig) -> list[str]:
    """The settings `new` changes that feed score computation (not allowed in a re-decide)."""
    before, after = flatten(old.resolved()), flatten(new.resolved())
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    matches = lambda key, patterns: any(fnmatch.fnmatch(key, p) for p in patterns)  # noqa: E731
    return [k for k in changed
            if matches(k, SCORE_SETTINGS) or not matches(k, DECISION_SETTINGS)]


def check_decidable(run_id: str, old: FilterConfig, new: FilterConfig) -> None:
    """Every score the new config decides by was computed by the original run."""
    changes = score_changes(old, new)
    if changes:
        raise ConfigError(
            f"--redecide {run_id}: {', '.join(changes)} changes how scores are computed, not "
            "only how they are decided: run the filter job again with it")
    missing = sorted(set(score_columns(new)) - set(score_columns(old)))
    if missing:
        rules = sorted(r.name for r in new.rules_run if r.name not in old.rule_order)
        raise ConfigError(
            f"--redecide {run_id}: rule(s) {', '.join(rules)} need score(s) "
            f"{', '.join(missing)}, which run {run_id} never computed (the rule was off): run "
            "the filter job again with it on")
    for step in STAGES:
        if step.scorer and step.on(new) and not step.on(old):
            raise ConfigError(
                f"--redecide {run_id}: {step.section}.enabled: run {run_id} did not run "
                f"{step.section}, so it stored no {step.section} scores to decide by: run the "
                "filter job again with it on")
    if new.pair_score.enabled and new.pair_score.min_score is None \
            and new.pair_score.model == "latest":
        raise ConfigError(
            f"--redecide {run_id}: pair_score.model 'latest' may name a model trained after run "
            f"{run_id}: give the model's name or pair_score.min_score")


def new_config(args: argparse.Namespace, stored: dict, lake: dict) -> FilterConfig:
    """The stored config <- --config's own keys <- --set, on the lake the run was found in."""
    data = stored_filter_config(stored)
    if args.config:
        own = read_yaml(Path(args.config))
        own.pop("extends", None)
        data = deep_merge(data, own)
    for text in args.set:
        data = deep_merge(data, parse_override(text))
    data = deep_merge(data, {"lake": lake})
    try:
        return FilterConfig.model_validate(data)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                             for e in err.errors())
        raise ConfigError(f"--redecide: invalid config: {problems}") from None


def stored_rows(lake: Lake, layout: Layout, cfg: FilterConfig, run_id: str) -> DataFrame:
    """The run's rows as the stages see them (monolingual columns renamed back)."""
    table = lake.spark.table(lake.qualified(layout.prefix))
    rows = table.where((F.col(layout.key) == cfg.key) & (F.col("run_id") == run_id))
    return layout.inward(rows.drop("run_id", "outcome"))


def original_rows_in(lake: Lake, run_id: str) -> dict[tuple[str, str], int]:
    """(pair, corpus) -> rows in, from the original run's filter_stats."""
    stats = lake.spark.table(lake.qualified("filter_stats")).where(
        F.col("run_id") == run_id)
    first = stats.groupBy("pair", "corpus").agg(F.max("rows_in").alias("rows_in")).collect()
    return {(r.pair, r.corpus): r.rows_in for r in first}


class RedecideRun(FilterRun):
    """A filter run whose rows are decided from the stored scores of run `source`: each
    stage's `decide` (jobs/filtering/steps.py)."""

    from_stored = True

    def __init__(self, spark: Any, lake: Lake, cfg: FilterConfig, run_id: str,
                 source: str) -> None:
        super().__init__(spark, lake, cfg, run_id)
        self.source = source

    def pair_score_cut(self, stored: DataFrame) -> Column | None:
        """The pair_score threshold: pair_score.min_score where given; else, where the source
        run fitted its thresholds to its corpora, the one each row was judged by (stored; a
        re-decide does not fit them again); else the model's."""
        if not self.cfg.pair_score.enabled:
            return None
        model = load_pair_score_model(self.lake, self.cfg.pair, self.cfg.pair_score.model,
                                      self.cfg.embedding.encoder)
        if fits(self.cfg, model) and THRESHOLD_COLUMN in stored.columns:
            return F.col(THRESHOLD_COLUMN)
        return F.lit(pair_score_threshold(self.cfg, model))

    def raw_rows(self) -> DataFrame:
        return self.spark.table(self.lake.qualified(self.layout.raw))

    def flips(self, keys: list[tuple[str, str]]) -> list[Flip]:
        """The filter run's flips but `bitext_raw`'s: the raw rows do not change."""
        return [f for f in super().flips(keys) if f.table != self.layout.raw]


def find_run(lake: Lake, run_id: str) -> Any:
    """The `runs` row of a committed filter (or re-decide) run, else a one-line error."""
    where = f"run_id = {sql_string(run_id)} AND status = 'succeeded'"
    rows = []
    if lake.spark.catalog.tableExists(f"{lake.database}.runs"):
        lake.spark.catalog.refreshTable(f"{lake.database}.runs")
        rows = lake.spark.table(lake.qualified("runs")).where(where).limit(1).collect()
    if not rows:
        raise ConfigError(f"--redecide {run_id}: no committed run of that id in the lake at "
                          f"{lake.root} (database {lake.database})")
    if rows[0].job not in ("filter", JOB):
        raise ConfigError(f"--redecide {run_id}: run {run_id} is a {rows[0].job} run; only "
                          "filter runs (and re-decides) can be re-decided")
    return rows[0]


def redecide(args: argparse.Namespace) -> int:
    source = check_run_id(args.redecide)
    flags = [f"--{name}" for name in ("input", "corpus", "pair", "lang", "where")
             if getattr(args, name)]
    if flags:
        raise ConfigError(f"--redecide {source} uses the run's own inputs and languages: drop "
                          f"{', '.join(flags)}")
    # Where the lake is: --lake, else --config's (or --set lake.*), else the default.
    lake_sets = [s for s in args.set if s.startswith("lake.")]
    located = load_config(args.config, lake_sets, {"lake": {"root": args.lake}} if args.lake
                          else None)
    spark, lake = open_lake("sluice-redecide", located)
    record = find_run(lake, source)
    old = FilterConfig.model_validate(stored_filter_config(json.loads(record.config)))
    cfg = new_config(args, json.loads(record.config), located.lake.model_dump())
    check_decidable(source, old, cfg)

    job = RedecideRun(spark, lake, cfg, check_run_id(args.run_id or new_run_id(cfg.hash())),
                      source)
    stored = stored_rows(lake, job.layout, cfg, source)
    expected = original_rows_in(lake, source)
    found = {(r.pair, r.corpus): r["count"]
             for r in stored.groupBy("pair", "corpus").count().collect()}
    if found != expected:
        gone = ", ".join(f"{c} ({found.get((p, c), 0):,} of {n:,} rows)"
                         for (p, c), n in sorted(expected.items()) if found.get((p, c)) != n)
        raise ConfigError(f"--redecide {source}: a later run replaced run {source}'s rows of "
                          f"{gone or 'its corpora'} in the lake: re-decide that run instead")
    log(f"re-deciding run {source} ({sum(found.values()):,} rows) from its stored scores")
    query = (f"SELECT * FROM {cfg.lake.database}.filter_stats WHERE run_id = "
             f"'{job.run_id}'")
    run_and_commit(spark, lake, cfg, JOB, job.run_id, [{"redecide_of": source}],
                   lambda: job.execute(stored), query)
    return 0

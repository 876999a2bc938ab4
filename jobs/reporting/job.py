"""The report of one run: one self-contained HTML file (charts drawn offline).

    spark-submit jobs/report.py --lake /data/lake --run-id RUN_ID --out report.html
    spark-submit jobs/report.py --lake /data/lake --out report.html            # the latest run
    spark-submit jobs/report.py --lake /data/lake --pair zh-en --corpus news   # its latest run

Any run: a filter run (or a re-decided one, or a refresh) by default, the latest one that
succeeded; a selection, translation or mixture run by its --run-id. Of a filter run it shows
the funnel per corpus (filter_stats) and the corpora's kept share across runs; a histogram of
every stored score over kept and rejected rows with its configured threshold, and the share
kept there; what-if counts at other thresholds; sample rejected pairs per rule and kept pairs
nearest each threshold (jobs/reporting/data.py). Of a selection run: the pool's counts (rows,
scored, selected, cut, unscorable by reason), a histogram of each method's score over the
selected and the not-selected rows, cluster and bucket sizes, and its seed (select_data.py).
Of a translation run, per stream: rows available, read, translated, kept and rejected by
reason, the kept rows' length ratio and copy rate, and sample rejected rows
(translate_data.py). Of a mixture run (jobs/mix.py), per source: its mixture_stats
(available, decontaminated by eval set, flagged, eligible, weight, planned, sampled,
distinct, effective weight, epochs); the realized share of each temperature group against
the formula's p ∝ n^(1/T); the rows per tag combination and per stage (with the lowest score
kept), the eval sets, and sample rows (mix_data.py). Every page ends with the run's resolved
config, hash, inputs and times. Everything is aggregated in Spark; only counts and samples
reach the driver. The report reads the lake and writes nothing to it; a commit landing
while it reads makes it read again (jobs/lake/rereading.py).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from pyspark.sql import SparkSession

from jobs.kit.cli import add_config, add_lake, add_run_id, hidden_alias, job_parser, lake_extra
from jobs.kit.config import JobConfig, deep_merge, load_lake_config
from jobs.kit.errors import ConfigError
from jobs.kit.progress import log, stage
from jobs.lake.metastore import metastore_conf
from jobs.lake.rereading import read_through_commits
from jobs.lake.runs import job_main, open_lake_at
from jobs.lake.store import Lake
from jobs.reporting.data import Run, collect_report, find_run
from jobs.reporting.mix_data import collect_mix
from jobs.reporting.mix_page import render_mix
from jobs.reporting.page import render
from jobs.reporting.select_data import collect_select
from jobs.reporting.select_page import render_select
from jobs.reporting.translate_data import collect_translate
from jobs.reporting.translate_page import render_translate

DEFAULT_OUT = "report.html"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = job_parser("jobs/report.py", __doc__)
    add_config(p, "lake.yaml; any job's config: its lake and spark sections are read")
    add_lake(p)
    add_run_id(p, help="the run to report, of any job (default: the latest succeeded filter "
               "run)")
    hidden_alias(p, "--run", "run_id")
    hidden_alias(p, "--database", "database")
    p.add_argument("--pair", help="without --run-id: the latest run that filtered this pair")
    p.add_argument("--corpus", help="without --run-id: the latest run that filtered this corpus")
    p.add_argument("--out", default=DEFAULT_OUT, help="HTML file to write (default: %(default)s)")
    return p.parse_args(argv)


def lake_config(args: argparse.Namespace) -> JobConfig:
    extra = lake_extra(args)
    if args.database:
        extra = deep_merge(extra, {"lake": {"database": args.database}})
    return load_lake_config(args.config, args.set, extra)


def write_atomically(path: str, text: str) -> None:
    """Write to a temporary file beside `path`, then rename: a reader never sees half."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".html.tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def check_out(out: str) -> None:
    """Refuse an --out the report could not be written to, before Spark starts (it failed
    after all the work): its directory must exist and be writable, and it not a directory."""
    directory = os.path.dirname(os.path.abspath(out))
    if os.path.isdir(out):
        raise ConfigError(f"--out {out} is a directory: give the HTML file's path")
    if not os.path.isdir(directory):
        raise ConfigError(f"--out {out}: no directory {directory}")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {out}: directory {directory} is not writable")


def report_page(spark: SparkSession, lake: Lake, run: Run) -> str:
    """The run's page: its kind's aggregation in Spark, rendered (find_run knows the kind)."""
    if run.job == "select":
        return render_select(collect_select(spark, lake, run))
    if run.job == "translate":
        return render_translate(collect_translate(spark, lake, run))
    if run.job == "mix":
        return render_mix(collect_mix(spark, lake, run))
    return render(collect_report(spark, lake, run))


def run(args: argparse.Namespace) -> int:
    # Bad flags fail before Spark starts; open_lake_at refuses a lake that is not there.
    check_out(args.out)
    cfg = lake_config(args)
    spark, lake = open_lake_at("sluice-report", cfg.lake.root, cfg.lake.database,
                               conf={**metastore_conf(cfg.lake.metastore), **cfg.spark.conf},
                               existing=True)
    started = time.monotonic()

    def aggregated() -> str:
        chosen = find_run(spark, lake, args.run_id, args.pair, args.corpus)
        log(f"report of run {chosen.run_id} ({chosen.status}, started {chosen.started_at})")
        with stage(spark, "report", f"aggregating run {chosen.run_id}"):  # a heartbeat
            return report_page(spark, lake, chosen)

    page = read_through_commits(lake, aggregated)  # other jobs may commit meanwhile
    write_atomically(args.out, page)
    log(f"wrote {args.out} ({os.path.getsize(args.out):,} bytes) in "
        f"{time.monotonic() - started:.1f} s")
    return 0


main = job_main(parse_args, run)

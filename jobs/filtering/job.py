"""The filter job: raw bitext -> bitext_raw, bitext_clean, bitext_rejected, filter_stats, runs;
or monolingual text (--lang) -> mono_raw, mono_clean, mono_rejected.

    spark-submit jobs/filter.py --config conf/demo.yaml        # the inputs listed in the config
    spark-submit jobs/filter.py --config conf/zh-en.yaml --corpus news --input news.zh news.en
    spark-submit jobs/filter.py --pair zh-en --corpus news --input raw/news.zh raw/news.en
    spark-submit jobs/filter.py --lang en --corpus news --input raw/news.en   # monolingual

Stages: ingest -> normalize -> rules + language ID (scores stored) -> dedup -> word alignment
-> embedding similarity (the last two when enabled). Every input row ends in exactly one of
clean or rejected; the run checks that before it commits.
"""

from __future__ import annotations

import argparse

from jobs.filtering.config import FilterConfig, load_config
from jobs.filtering.pair_score_stage import pin_pair_score_model
from jobs.filtering.pair_scores import check_aligner, check_cross_encoder
from jobs.filtering.redecide import redecide
from jobs.filtering.run import FilterRun
from jobs.kit.cli import add_config, add_input_table, add_lake, add_run_id, job_parser, lake_extra
from jobs.kit.errors import ConfigError
from jobs.lake.runs import job_main, new_run_id, open_lake, run_and_commit


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = job_parser("jobs/filter.py", __doc__)
    add_config(p, "defaults.yaml")
    p.add_argument("--pair", help="language pair, source-target, e.g. zh-en")
    p.add_argument("--lang", help="language of monolingual text (instead of --pair), e.g. en")
    p.add_argument("--corpus", help="corpus name for --input")
    p.add_argument(
        "--input",
        nargs="+",
        metavar="PATH",
        help="one TSV/Parquet path, two Moses files in --pair order, a text file (--lang), "
        "or a table name (--format table)",
    )
    p.add_argument(
        "--format",
        choices=["auto", "tsv", "moses", "parquet", "text", "table"],
        default="auto",
    )
    p.add_argument("--columns", nargs="+", metavar="NAME",
                   help="a TSV --input's fields in order where they are not `src tgt`, e.g. "
                   "src_url tgt_url src tgt (ParaCrawl, Bitextor): the URLs are stored with "
                   "each pair, its website as `host`; other names are kept in `extra`")
    add_input_table(p, "a lake table of pairs (src, tgt) or sentences to filter, e.g. "
                    "sluice.synthetic (= --format table --input TABLE)")
    p.add_argument("--where", help="with a table input: a SQL filter on the table's rows")
    add_lake(p)
    add_run_id(p)
    p.add_argument("--redecide", metavar="RUN_ID",
                   help="re-decide a run from its stored scores with --set/--config "
                   "thresholds, as a new run (jobs/filtering/redecide.py)")
    return p.parse_args(argv)


def config_from_args(args: argparse.Namespace) -> FilterConfig:
    extra: dict = {}
    if args.pair:
        extra["pair"] = args.pair
    if args.lang:
        extra["lang"] = args.lang
    extra.update(lake_extra(args))
    if args.input_table:
        if args.input:
            raise ConfigError("give --input or --input-table, not both")
        args.input, args.format = [args.input_table], "table"
    if args.input:
        if not args.corpus:
            raise ConfigError("--input needs --corpus NAME")
        extra["inputs"] = [
            {"corpus": args.corpus, "paths": args.input, "format": args.format, "where": args.where,
             "columns": args.columns}
        ]
    elif args.corpus or args.columns:
        raise ConfigError(f"{'--corpus' if args.corpus else '--columns'} needs --input PATH")
    cfg = load_config(args.config, args.set, extra)
    if not cfg.inputs:
        raise ConfigError("no inputs: list them under `inputs:` in the config or pass --input")
    cfg.langs  # noqa: B018 - raises ConfigError when neither pair nor lang is set
    return cfg


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    run_id = args.run_id or new_run_id(cfg.hash())  # a given one was checked by job_main
    # The catalog opens beside the job once its input is numbered, and the run registers
    # there too (first rows staged seconds sooner); a catalog table as input waits for it.
    spark, lake = open_lake("sluice-filter", cfg, run_id, beside=True)
    if any(inp.format == "table" for inp in cfg.inputs):
        lake.ready()
    pin_pair_score_model(cfg, lake)  # a missing model fails before any work
    check_cross_encoder(cfg)
    inputs = [inp.model_dump() for inp in cfg.inputs]
    check_aligner(lake, cfg)  # a missing align.reference fails here, before the run starts
    job = FilterRun(spark, lake, cfg, run_id)
    raw = job.read_inputs()  # input errors (e.g. Moses line counts) fail here: nothing written
    query = f"SELECT * FROM {cfg.lake.database}.filter_stats WHERE run_id = '{run_id}'"
    run_and_commit(spark, lake, cfg, "filter", run_id, inputs, lambda: job.execute(raw), query)
    return 0


def run_or_redecide(args: argparse.Namespace) -> int:
    if args.redecide:
        return redecide(args)
    return run(args)


main = job_main(parse_args, run_or_redecide)

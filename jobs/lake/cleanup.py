"""Tidy a lake: roll forward interrupted commits, mark dead runs failed, remove the staged data
of finished runs and the data commits superseded (jobs/lake/store.py `gc`).

    python -m jobs.lake_gc --lake ROOT [--config FILE] [--set lake.database=sluice]
"""

from __future__ import annotations

import argparse

from jobs.kit.cli import add_config, add_lake, hidden_alias, job_parser, lake_extra
from jobs.kit.config import deep_merge, load_lake_config
from jobs.kit.progress import log
from jobs.lake.metastore import metastore_conf
from jobs.lake.runs import job_main, open_lake_at
from jobs.lake.store import gc


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = job_parser("python -m jobs.lake_gc", __doc__)
    add_config(p, "lake.yaml; any job's config: its lake and spark sections are read")
    add_lake(p)
    hidden_alias(p, "--database", "database")
    return p.parse_args(argv)


def collect(args: argparse.Namespace) -> int:
    extra = lake_extra(args)
    if args.database:
        extra = deep_merge(extra, {"lake": {"database": args.database}})
    cfg = load_lake_config(args.config, args.set, extra)
    _, lake = open_lake_at("sluice-gc", cfg.lake.root, cfg.lake.database,
                           conf={**metastore_conf(cfg.lake.metastore), **cfg.spark.conf},
                           existing=True)
    removed = gc(lake)
    log(f"removed {len(removed)} unreferenced directories from {lake.root}")
    for path in removed:
        log(f"  {path}")
    lake.spark.stop()
    return 0


main = job_main(parse_args, collect)

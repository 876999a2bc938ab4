"""Tidy a lake: roll forward interrupted commits, mark dead runs failed, remove the staged data
of finished runs and the data commits superseded (jobs/lake/store.py `gc`).

    python -m jobs.lake_gc --lake ROOT [--database sluice]
"""

from __future__ import annotations

import os
import sys


import argparse  # noqa: E402

from jobs.lake.store import gc  # noqa: E402
from jobs.kit.progress import log  # noqa: E402
from jobs.lake.runs import exit_code, open_lake_at  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m jobs.lake_gc", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lake", required=True, help="lake root (local path, hdfs://, s3a://)")
    p.add_argument("--database", default="sluice")
    args = p.parse_args(argv)

    def collect() -> int:
        _, lake = open_lake_at("sluice-gc", args.lake, args.database, existing=True)
        removed = gc(lake)
        log(f"removed {len(removed)} unreferenced directories from {lake.root}")
        for path in removed:
            log(f"  {path}")
        lake.spark.stop()
        return 0

    return exit_code(collect)

"""The flags the jobs share, each defined here once, so that a flag means the same thing in
every job (README "Jobs and flags"):

    --config FILE      a YAML config over the job's defaults (conf/*defaults.yaml, which
                       extend conf/lake.yaml)
    --set KEY=VALUE    one setting over the config (repeat), e.g. --set lake.root=/data/lake
    --lake ROOT        the lake root: the same as --set lake.root=ROOT
    --run-id ID        the run the command is about: the id a job gives the run it makes
                       (default: UTC time + config hash), the run the report reports
    --input-table T    a lake table as the input (db.table, or a table of the lake's database)
    --corpus NAME      the corpus of what is read
    --where SQL        a SQL filter on the input table's rows
    --max-pairs N      at most this many pairs are read

A flag that was renamed keeps its old spelling, hidden from --help (`--run`, `--pairs`,
`--src/--tgt`), so scheduled commands keep working."""

from __future__ import annotations

import argparse


def job_parser(prog: str, doc: str | None) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog=prog, description=doc,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def add_config(p: argparse.ArgumentParser, defaults: str, required: bool = False) -> None:
    p.add_argument("--config", required=required, metavar="FILE",
                   help=f"YAML config (extends conf/{defaults})")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one config value (repeat), e.g. --set lake.root=/data/lake")


def add_lake(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lake", metavar="ROOT",
                   help="lake root (local path, hdfs://, s3a://); = --set lake.root=ROOT")


def add_run_id(p: argparse.ArgumentParser,
               help: str = "the new run's id (default: UTC time + config hash)") -> None:
    p.add_argument("--run-id", metavar="ID", help=help)


def add_input_table(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--input-table", metavar="TABLE", help=help)


def hidden_alias(p: argparse.ArgumentParser, old: str, dest: str, **kwargs) -> None:
    """An old spelling of a flag that still works, not shown in --help."""
    p.add_argument(old, dest=dest, help=argparse.SUPPRESS, **kwargs)


def lake_extra(args: argparse.Namespace) -> dict:
    """The config a `--lake` flag stands for."""
    return {"lake": {"root": args.lake}} if getattr(args, "lake", None) else {}

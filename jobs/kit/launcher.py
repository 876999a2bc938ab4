"""`sluice`: every job behind one command, from any shell (no venv to activate).

    sluice                                    # the jobs, one line each
    sluice filter --config conf/zh-en.yaml    # = spark-submit jobs/filter.py --config ...
    sluice --master spark://host:7077 --conf spark.executor.memory=4g select --config ...
    sluice sql --conf ... -e "SELECT ..."     # = spark-sql, printing column names
    sluice query --lake L "SELECT ..."        # the same SQL over tables/ with duckdb, no JVM
    sluice --master M recipe run PLAN         # a recipe's jobs in order (docs/recipes.md)

Options before the job's name go to spark-submit, the rest to the job. The launcher finds
spark-submit in the installed pyspark (SPARK_HOME unless already set), Spark's settings in conf/
(SPARK_CONF_DIR: conf/spark-defaults.conf, conf/log4j2.properties) and runs the job's Python
on this interpreter (PYSPARK_PYTHON, unless already set), then hands the process over to
spark-submit, so a scheduler's signals and exit codes are spark-submit's own.

The jobs it knows are the entry scripts in jobs/ that name themselves (`SLUICE_JOB = "filter"`):
a new job is one script, listed with its docstring's first line."""

from __future__ import annotations

import ast
import os
import shlex
import sys
from pathlib import Path

import pyspark

from jobs.kit.config import CONF_DIR

JOBS_DIR = Path(__file__).resolve().parent.parent
# The launcher's own commands, which have no entry script.
OWN_COMMANDS = {
    "sql": "A spark-sql shell on the lake's catalog (each job prints its own)",
    "query": "One SQL query over a local lake's Parquet files with duckdb (no JVM)",
    "recipe": "Run a recipe end to end: its jobs in order, rounds until dev BLEU stops rising",
}


def entry_scripts() -> dict[str, tuple[str, str]]:
    """name -> (entry script in jobs/, what it does): every script in jobs/ that names itself
    a `sluice` job (`SLUICE_JOB = "name"`), with its docstring's first line. Read as source,
    nothing imported: listing the jobs costs no job module's imports."""
    found = {}
    for script in sorted(JOBS_DIR.glob("*.py")):
        tree = ast.parse(script.read_text(encoding="utf-8"))
        for node in tree.body:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and getattr(node.targets[0], "id", None) == "SLUICE_JOB"):
                summary = (ast.get_docstring(tree) or "").split("\n", 1)[0].rstrip(".")
                found[node.value.value] = (script.name, summary)
    return found


# name -> (entry script in jobs/, what it does); the order `sluice` lists them in.
JOBS: dict[str, tuple[str, str]] = {
    **dict(sorted(entry_scripts().items())),
    **{name: ("", what) for name, what in OWN_COMMANDS.items()},
}
# `sluice sql` prints each result's column names (spark-sql prints none by default), and lists
# a table's files at every query: a long-lived shell otherwise caches a partition's listing
# (FileStatusCache), and misses rows (or fails on moved files) that other jobs commit later.
SQL_CONF = ("--conf", "spark.sql.cli.print.header=true",
            "--conf", "spark.sql.hive.filesourcePartitionFileCacheSize=0")
# spark-submit options that take no value
SPARK_FLAGS = frozenset({"--verbose", "--supervise"})


def sluice_path() -> str:
    """This installation's `sluice` (beside the running Python), as a command to print: it
    works from any shell. `sluice` where there is none (a plain checkout on the PYTHONPATH)."""
    installed = Path(sys.executable).parent / "sluice"
    return str(installed) if installed.is_file() else "sluice"


def usage() -> str:
    width = max(map(len, JOBS))
    lines = [f"  {name:<{width}}  {what}" for name, (_, what) in JOBS.items()]
    return ("usage: sluice [SPARK-SUBMIT OPTIONS] JOB [JOB OPTIONS]\n\njobs:\n"
            + "\n".join(lines)
            + "\n\n`sluice JOB --help` for a job's options; options before JOB go to "
              "spark-submit (--master, --conf k=v, ...).")


def split(argv: list[str]) -> tuple[list[str], str | None, list[str]]:
    """(spark-submit options, job name, the job's arguments)."""
    spark: list[str] = []
    rest = list(argv)
    while rest and rest[0].startswith("-") and rest[0] not in ("-h", "--help"):
        option = rest.pop(0)
        spark.append(option)
        if "=" not in option and option not in SPARK_FLAGS and rest:
            spark.append(rest.pop(0))
    job = rest.pop(0) if rest else None
    return spark, job, rest


def command(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """The spark-submit command line and environment that run `argv`'s job."""
    spark, job, args = split(argv)
    spark_home = os.environ.get("SPARK_HOME") or str(Path(pyspark.__file__).resolve().parent)
    env = dict(os.environ, SPARK_HOME=spark_home)
    env.setdefault("SPARK_CONF_DIR", str(CONF_DIR))  # logging, JVM options: conf/spark-*.conf
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", env["PYSPARK_PYTHON"])
    bin_dir = Path(spark_home) / "bin"
    if job == "query":  # no Spark: this interpreter runs it
        return [sys.executable, "-m", "jobs.lake.plain_query", *args], env
    if job == "recipe":  # a driver of jobs: each of its job steps gets the spark options
        env["SLUICE_RECIPE_SPARK_OPTIONS"] = shlex.join(spark)
        return [sys.executable, "-m", "jobs.recipes.run", *args], env
    if job == "sql":
        return [str(bin_dir / "spark-sql"), *SQL_CONF, *spark, *args], env
    if {"-h", "--help"} & set(args):  # the job's own help, without starting a JVM (~10 s)
        return [sys.executable, str(JOBS_DIR / JOBS[job or ""][0]), *args], env
    script = str(JOBS_DIR / JOBS[job or ""][0])
    return [str(bin_dir / "spark-submit"), *spark, script, *args], env


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    _, job, _ = split(argv)
    if job in (None, "-h", "--help", "help"):
        print(usage())
        return 0
    if job not in JOBS:
        print(f"sluice: no job {job!r}; the jobs: {', '.join(JOBS)}", file=sys.stderr)
        return 2
    cmd, env = command(argv)
    os.execve(cmd[0], cmd, env)  # never returns
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`sluice query`: SQL over a lake's Parquet files with duckdb, no JVM and no catalog.

    sluice query --lake /data/lake \
        "SELECT corpus, sum(rows_out) FROM sluice.filter_stats GROUP BY 1"

Each directory under `<lake>/tables/` becomes a view `<database>.<table>` (hive partitions as
columns, kept as text the way the catalog types them), so the query every job prints for
`sluice sql` runs here unchanged, in well under a second instead of a spark-sql JVM's ~10 s.
Only committed rows are under `tables/` (docs/lake.md "Reading the lake without Spark"), so what it
reads is what the catalog would. It takes no lock and never writes to the lake.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import duckdb

from jobs.kit.config import DATABASE as IDENTIFIER

DEFAULT_DATABASE = "sluice"


def local_root(lake: str) -> Path | None:
    """The lake's directory on this machine, or None for a remote (s3a://, hdfs://) lake."""
    if lake.startswith("file://"):
        return Path(lake.removeprefix("file://"))
    return None if "://" in lake else Path(lake)


def connect(lake: Path, database: str = DEFAULT_DATABASE) -> duckdb.DuckDBPyConnection:
    """An in-memory duckdb with a view per lake table that holds at least one Parquet file."""
    con = duckdb.connect()
    con.execute(f"CREATE SCHEMA {database}")
    for table in sorted(p for p in (lake / "tables").iterdir() if p.is_dir()):
        if not IDENTIFIER.fullmatch(table.name) or next(table.rglob("*.parquet"), None) is None:
            continue  # not a table name, or a table created and not yet written to
        files = str(table / "**" / "*.parquet").replace("'", "''")
        con.execute(f"CREATE VIEW {database}.{table.name} AS SELECT * FROM read_parquet("
                    f"'{files}', hive_partitioning = true, hive_types_autocast = false, "
                    "union_by_name = true)")
    return con


def command(lake_root: str, query: str, database: str = DEFAULT_DATABASE,
            sluice: str = "sluice") -> str | None:
    """The `sluice query` line that asks `query` of a local lake, shell-quoted; None where the
    lake is not a local directory (spark-sql reads it)."""
    if local_root(lake_root) is None:
        return None
    args = [sluice, "query", "--lake", lake_root]
    if database != DEFAULT_DATABASE:
        args += ["--database", database]
    return f"{shlex.join(args)} {shlex.quote(query)}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="sluice query", description=__doc__.split("\n\n")[0])
    p.add_argument("--lake", required=True, help="the lake's root directory")
    p.add_argument("--database", default=DEFAULT_DATABASE,
                   help="the schema name the query uses (default: %(default)s)")
    p.add_argument("sql", help="one SQL query (duckdb's dialect; simple Spark SQL reads alike)")
    args = p.parse_args(argv)
    root = local_root(args.lake)
    if root is None:
        print(f"sluice query: {args.lake} is not a local directory; query it with `sluice sql`",
              file=sys.stderr)
        return 2
    if not (root / "tables").is_dir():
        print(f"sluice query: {root} is not a lake (no tables/ directory)", file=sys.stderr)
        return 2
    if not IDENTIFIER.fullmatch(args.database):
        print(f"sluice query: --database {args.database!r} is not an identifier", file=sys.stderr)
        return 2
    try:
        result = connect(root, args.database).sql(args.sql)
    except duckdb.Error as err:
        print(f"sluice query: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    if result is not None:
        result.show(max_rows=1000, max_width=200)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

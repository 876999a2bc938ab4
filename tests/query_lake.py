"""Run named SQL queries in a new Spark session on a lake's catalog; print JSON rows.

python tests/query_lake.py LAKE '{"name": "SELECT ..."}'
"""

from __future__ import annotations

import json
import sys

from jobs.lake.session import build_session


def main(lake: str, queries: dict[str, str]) -> None:
    spark = build_session("sluice-query", lake, "local[1]")
    out = {name: [list(row) for row in spark.sql(q).collect()] for name, q in queries.items()}
    print("JSON:" + json.dumps(out, default=str))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]))

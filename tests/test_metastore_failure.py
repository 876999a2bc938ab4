"""jobs/lake/metastore.py `metastore_failure`: which errors of a running job are the shared
metastore failing under it (one line naming it), and which are not (their own traceback)."""

from __future__ import annotations

import pytest

from jobs.lake import metastore
from jobs.lake.metastore import metastore_failure, shared_in_use

URI = "thrift://127.0.0.1:9083"
# First lines of what the driver raised in tests/test_shared_metastore.py's runs.
LOST = [
    "org.apache.hadoop.hive.ql.metadata.HiveException: Unable to fetch table runs. "
    "Connection to 127.0.0.1:56001 refused.",
    "[SCHEMA_NOT_FOUND] The schema `spark_catalog`.`sluice` cannot be found.",
    "MetaException(message:Could not connect to meta store using any of the URIs provided.)",
]
OTHER = ["division by zero", "[UNRESOLVED_COLUMN] A column `srcc` cannot be resolved.",
         "no such file: /data/metastore/news.zh"]


@pytest.fixture(autouse=True)
def forget() -> None:
    yield
    metastore._in_use = None


@pytest.mark.parametrize("text", LOST)
def test_a_lost_metastore_is_one_line_naming_it(text: str) -> None:
    shared_in_use(URI)
    line = metastore_failure(RuntimeError(text + "\n\tat org.apache..."))
    assert line is not None and line.startswith(f"the lake's metastore {URI} failed during")
    assert text[:60] in line and "\n" not in line


@pytest.mark.parametrize("text", OTHER)
def test_other_errors_are_left_alone(text: str) -> None:
    shared_in_use(URI)
    assert metastore_failure(RuntimeError(text)) is None


@pytest.mark.parametrize("used", [None, "jdbc:derby:;databaseName=/lake/metastore_db"])
def test_without_a_shared_metastore_nothing_is_blamed_on_it(used: str | None) -> None:
    shared_in_use(used)
    assert metastore_failure(RuntimeError(LOST[0])) is None

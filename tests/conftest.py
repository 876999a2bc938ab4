"""One SparkSession for the whole test run (a session start costs ~10 s)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def lake_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lake")


@pytest.fixture(scope="session")
def spark(lake_root: Path):
    from jobs.session import build_session

    session = build_session(
        "sluice-tests",
        str(lake_root),
        master="local[2]",
        conf={"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"},
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA

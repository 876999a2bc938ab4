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


@pytest.fixture(scope="session")
def tiny_multi_ct2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """conf/train/tiny-multi-zh-en.yaml (zh->en and en->zh, <2xx> tags) trained for 300 steps
    on the test slice (~20 s) and exported to CTranslate2: poor translations, but real ones."""
    from training.config import load_config
    from training.export import export
    from training.train import run

    root = tmp_path_factory.mktemp("tiny-multi")
    cfg = load_config(REPO / "conf/train/tiny-multi-zh-en.yaml", [f"run_dir={root / 'run'}"])
    for source in [*cfg.data.train, cfg.data.dev]:
        source.paths = [str(REPO / p) for p in source.paths]
    run(cfg)
    (checkpoint,) = sorted((root / "run" / "checkpoints").glob("ckpt_*.pt"))
    return export(checkpoint, root / "ct2")

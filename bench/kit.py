"""What several benchmark scripts share: where the repository and the shared real corpora are,
the WMT21-23 system outputs' pairs most throughput scripts read, the environment a
spark-submit child needs, and writing a script's figures as JSON (`--out`)."""

from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "data"  # real corpora, beside the checkout; tests never read it
WMT_OUTPUTS = SHARED / "bitext" / "wmt21-23-system-outputs"
BIN = Path(sys.executable).parent  # the venv's spark-submit, sluice, py-spy


def wmt_pairs(name: str, swap: bool = False) -> list[tuple[str, str]]:
    """The (src, tgt) pairs of one file of the WMT21-23 system outputs, in file order;
    `swap`: (tgt, src)."""
    with gzip.open(WMT_OUTPUTS / name, "rt", encoding="utf-8") as f:
        next(f)  # header: year testset system seg_id src tgt
        pairs = [tuple(line.rstrip("\n").split("\t")[4:6]) for line in f]
    return [(b, a) if swap else (a, b) for a, b in pairs]


def spark_env(**extra: str) -> dict[str, str]:
    """This environment for a spark-submit child: its Python workers and driver run this
    venv's Python, and the venv's pyspark is the Spark (no SPARK_HOME); `extra` on top."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               **extra)
    env.pop("SPARK_HOME", None)
    return env


def write_json(path: Path | str, data: Any, *, say: bool = False) -> None:
    """A script's figures as JSON at `path` (its `--out`): UTF-8, indented, what JSON cannot
    hold written as its str; `say`: print where."""
    Path(path).write_text(json.dumps(data, indent=1, ensure_ascii=False, default=str) + "\n",
                          encoding="utf-8")
    if say:
        print(f"wrote {path}")

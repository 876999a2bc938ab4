"""bench/gpu/suite.py, the one GPU benchmark command, in its CPU form (`--smoke`): every part
runs through the code a GPU run takes (the scorer's group function, the encoder's pair path,
the real training loop) and lands in one JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parent.parent


def test_the_suite_writes_every_figure_in_one_json(tmp_path: Path) -> None:
    out = tmp_path / "gpu.json"
    done = subprocess.run([sys.executable, "-m", "bench.gpu.suite", "--smoke", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["device"] == "cpu" and result["smoke"] is True
    embed = result["embed"]
    for path in ("bare_encode_pairs", "scorer_group_2048_rows", "scorer_group_8192_rows_margin_4",
                 "before_per_side_batch_256"):
        assert embed[path]["pairs_per_s"] > 0, path
    assert embed["repeatable"] is True
    ce = result["cross_encoder"]
    assert ce["fine_tune"]["examples_per_s"] > 0 and ce["score"]["pairs_per_s"] > 0
    assert ce["scores_in_0_1"] is True and ce["tokenize_one_core_pairs_per_s"] > 0
    [train] = result["train"]
    assert train["loop"] == "new" and train["tgt_tokens_per_s"] > 0
    assert "skipped" in result["ct2"] or "version" in result["ct2"]

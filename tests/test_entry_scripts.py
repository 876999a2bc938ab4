"""Every entry script in jobs/ runs as a script (`spark-submit jobs/X.py`, `python jobs/X.py`),
which puts jobs/ first on sys.path: its `--help` must work there, so no module of jobs/ may
shadow a standard library module the script imports (jobs/select.py shadows `select`; each
entry script drops jobs/ from the path first)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = sorted(p for p in (REPO / "jobs").glob("*.py")
                 if 'if __name__ == "__main__":' in p.read_text(encoding="utf-8"))


def test_the_entry_scripts_are_found() -> None:
    names = {p.stem for p in SCRIPTS}
    assert {"filter", "refresh", "select", "translate", "report", "align_reference",
            "train_pair_score", "lake_gc"} <= names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_an_entry_script_runs_as_a_script(script: Path) -> None:
    done = subprocess.run([sys.executable, str(script), "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage:")

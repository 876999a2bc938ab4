"""Every entry script in jobs/ runs as a script (`spark-submit jobs/X.py`, `python jobs/X.py`),
which puts jobs/ first on sys.path. So no name in jobs/ (script or package) may be the name of
a standard-library or installed module: it would shadow it for everything the job imports (the
selection script was once jobs/select.py, which shadowed `select` for socket and subprocess)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
JOBS = REPO / "jobs"
SCRIPTS = sorted(p for p in JOBS.glob("*.py")
                 if 'if __name__ == "__main__":' in p.read_text(encoding="utf-8"))


def test_the_entry_scripts_are_found() -> None:
    names = {p.stem for p in SCRIPTS}
    assert {"filter", "refresh", "select_data", "translate", "report", "align_reference",
            "train_pair_score", "lake_gc"} <= names


def test_no_name_in_jobs_shadows_another_module() -> None:
    names = {p.stem for p in JOBS.glob("*.py")} | {
        p.name for p in JOBS.iterdir() if (p / "__init__.py").is_file()}
    elsewhere = [p for p in sys.path if Path(p or ".").resolve() not in (JOBS, REPO)]
    shadowed = sorted(
        name for name in names - {"__init__"}
        if name in sys.stdlib_module_names
        or importlib.machinery.PathFinder.find_spec(name, elsewhere) is not None
    )
    assert shadowed == []
    assert "select" in sys.stdlib_module_names  # what the check is for


def test_no_module_edits_sys_path() -> None:
    edits = [str(p.relative_to(REPO)) for d in ("jobs", "udfs", "training")
             for p in (REPO / d).rglob("*.py") if "sys.path" in p.read_text(encoding="utf-8")]
    assert edits == []


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_an_entry_script_runs_as_a_script(script: Path) -> None:
    done = subprocess.run([sys.executable, str(script), "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage:")

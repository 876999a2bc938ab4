"""Every benchmark script under bench/ still imports (issue 37): a rename in jobs/ or udfs/
that a benchmark uses fails here, in the fast tier, not months later when someone reruns a
figure. Imported in one fresh interpreter, each under its own name, without running main."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
IMPORT_ALL = """
import importlib.util, sys
from pathlib import Path
failed = []
for path in sorted(Path("bench").glob("*.py")):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
    except BaseException as error:  # noqa: BLE001 - report every script, not the first
        failed.append(f"{path}: {error!r}")
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


def test_every_bench_script_imports() -> None:
    scripts = sorted((REPO / "bench").glob("*.py"))
    assert len(scripts) >= 25
    done = subprocess.run([sys.executable, "-c", IMPORT_ALL], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]


def test_every_bench_script_is_in_the_index() -> None:
    index = (REPO / "bench" / "README.md").read_text(encoding="utf-8")
    unlisted = [p.name for p in (REPO / "bench").glob("*.py") if f"`{p.name}`" not in index]
    assert unlisted == []

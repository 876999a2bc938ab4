"""Every module under bench/ still imports (issue 37): a rename in jobs/ or udfs/ that a
benchmark uses fails here, in the fast tier, not months later when someone reruns a figure.
Each is imported as bench.<folder>.<name>, as `python -m` from the repository root finds it,
in one fresh interpreter started there, without running main; and every script is listed in
bench/README.md by that name."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
IMPORT_ALL = """
import importlib, sys
failed = []
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except BaseException as error:  # noqa: BLE001 - report every module, not the first
        failed.append(f"{name}: {error!r}")
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


def modules() -> list[str]:
    """bench and every module and package below it, by its dotted name."""
    found = []
    for path in sorted((REPO / "bench").rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def scripts() -> list[str]:
    """The benchmarks themselves: every module but the packages and the kit."""
    packages = {name for name in modules()
                if (REPO / Path(*name.split(".")) / "__init__.py").exists()}
    return [name for name in modules() if name not in packages and name != "bench.kit"]


def test_every_bench_module_imports() -> None:
    assert len(scripts()) >= 25
    done = subprocess.run([sys.executable, "-c", IMPORT_ALL, *modules()], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]


def test_every_bench_script_is_in_the_index() -> None:
    index = (REPO / "bench" / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"`(bench(?:\.\w+)+)`", index))
    assert [name for name in scripts() if name not in listed] == []
    assert sorted(listed - set(modules())) == []  # no stale name in the index either

"""Every command block in the README and docs/ says how it is checked, in an HTML comment on
the line above it (invisible on the rendered page): `run by: TEST` (the test runs it as printed and
reads the block under its heading), `the same steps run in: TEST`, or `not run: WHY` (a YARN
cluster, a user's own files). A new block without one fails here, so none is left untried
by accident."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from doc_pages import PAGES

REPO = Path(__file__).resolve().parent.parent
MARK = re.compile(r"<!-- (run by|the same steps run in|not run[^:]*|not a command): (.+?) -->")


def blocks() -> list[tuple[str, str, str | None]]:
    """(heading, first line, the comment above) of each fenced block in the README and the
    pages under docs/."""
    found = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        heading, inside = "", False
        for i, line in enumerate(lines):
            if line.startswith("#") and not inside:
                heading = line
            if line.startswith("```"):
                if not inside:
                    found.append((heading, lines[i + 1], lines[i - 1] if i else None))
                inside = not inside
    return found


def source_of(reference: str) -> str:
    """The source of `tests/FILE.py::TEST`'s function."""
    path, name = reference.split("::")
    tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
    (func,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    return ast.get_source_segment((REPO / path).read_text(encoding="utf-8"), func) or ""


def test_every_block_says_how_it_is_checked() -> None:
    found = blocks()
    assert len(found) >= 15
    unmarked = [(h, first) for h, first, above in found if not MARK.fullmatch(above or "")]
    assert unmarked == []


def test_a_block_run_by_a_test_is_read_by_that_test_under_its_heading() -> None:
    for heading, first, above in blocks():
        kind, what = MARK.fullmatch(above or "").groups()
        if kind == "run by" and what.startswith(".ci/run"):
            assert "make test" in (REPO / ".ci/run").read_text(encoding="utf-8")
            assert first.startswith("make demo")
        elif kind == "run by":
            named = re.findall(r'"(#{2,3} [^"]+)"', source_of(what.split()[0]))
            assert any(heading.startswith(n) for n in named), (heading, what)
        elif kind == "the same steps run in":
            assert source_of(what.split()[0]), what


def test_commands_run_as_printed_need_no_venv_activated() -> None:
    for heading, first, above in blocks():
        kind, what = MARK.fullmatch(above or "").groups()
        if kind == "run by" and "test_readme_commands.py" in what:
            assert first.startswith(".venv/bin/"), (heading, first)


def test_no_manual_passes_600_lines() -> None:
    """docs/ says how things work and the current figures; dated measurement logs live in
    docs/measurements/ (issue 69), so a manual stays readable."""
    long = {p.name: n for p in (REPO / "docs").glob("*.md")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600}
    assert long == {}

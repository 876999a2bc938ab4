"""The shape of jobs/ (README "Architecture"): packages by job over the lake and the kit, no
import circle, and no import tucked inside a function (the way circles were once hidden)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Which package may import which: a job's package reads the lake and the kit (and the
# filtering package, whose stages and config the other jobs reuse), never another way round;
# the report sits on top and imports what it reports on (no copies of their formulas).
LAYERS = {"kit": 0, "lake": 1, "filtering": 2, "scorer_training": 3, "selection": 3,
          "translation": 3, "refreshing": 4, "mixing": 4, "reporting": 5, "recipes": 6}


def modules() -> dict[str, Path]:
    found = {}
    for path in (REPO / "jobs").rglob("*.py"):
        name = ".".join(path.relative_to(REPO).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def imports(path: Path, inside_functions: bool = False) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [n for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
             for n in ast.walk(f)] if inside_functions else list(ast.walk(tree))
    return [n.module for n in nodes
            if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("jobs")]


def test_no_import_circle() -> None:
    graph = {name: set(imports(path)) for name, path in modules().items()}
    circles = []

    def visit(name: str, trail: list[str], done: set[str]) -> None:
        for dep in graph.get(name, ()):
            if dep in trail:
                circles.append(trail[trail.index(dep):] + [dep])
            elif dep not in done:
                done.add(dep)
                visit(dep, [*trail, dep], done)

    for name in graph:
        visit(name, [name], set())
    assert circles == []


def test_no_import_inside_a_function() -> None:
    inside = {name: imports(path, inside_functions=True) for name, path in modules().items()}
    assert {name: deps for name, deps in inside.items() if deps} == {}


def test_packages_import_only_downwards() -> None:
    upward = []
    for name, path in modules().items():
        parts = name.split(".")
        if len(parts) < 3:
            continue  # jobs/ entry scripts import their job
        for dep in imports(path):
            dep_parts = dep.split(".")
            if len(dep_parts) >= 2 and dep_parts[1] in LAYERS and dep_parts[1] != parts[1] \
                    and LAYERS[dep_parts[1]] >= LAYERS[parts[1]]:
                upward.append(f"{name} -> {dep}")
    assert upward == []

"""The demos (Makefile) each write a lake of their own, and `make demo-report` does not run the
demo again where its lake is there: read off `make -n`, what make would run."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEMOS = ["demo", "demo-bt", "demo-select", "demo-refresh", "demo-pair-score"]


def plan(target: str) -> list[str]:
    done = subprocess.run(["make", "-n", target], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.replace("\\\n", " ").splitlines()  # continued lines joined


def planned(target: str) -> list[str]:
    return [line for line in plan(target) if "/bin/sluice " in line]


def lake_of(command: str) -> str:
    found = re.search(r"--lake (\S+)", command)
    return found.group(1) if found else "lake"  # conf/lake.yaml's root, ./lake


def test_each_demo_writes_a_lake_of_its_own() -> None:
    lakes = {}
    for target in DEMOS:
        commands = planned(target)
        assert commands, target
        used = {lake_of(c) for c in commands}
        assert len(used) == 1, (target, used)
        lakes[target] = used.pop()
    assert len(set(lakes.values())) == len(DEMOS), lakes


def test_demo_report_reports_the_demo_lake_without_rerunning_it() -> None:
    lines = plan("demo-report")
    demo = [line for line in lines if line.endswith("make demo")]
    assert demo == ["test -d lake/tables/bitext || make demo"]  # only where there is no lake
    report = [line for line in lines if " report " in line]
    assert len(report) == 1 and lake_of(report[0]) == "lake"

"""One declared stage list (jobs/filtering/stages.py `STAGES`) that the filter runs, the
re-decide follows and the stats and funnel count by: a stage added, removed or moved there
moves in all of them."""

from __future__ import annotations

import pytest

from jobs.filtering.redecide import RedecideRun
from jobs.filtering.run import FilterRun
from jobs.filtering.stages import STAGES
from jobs.refreshing.job import RefreshRun

NAMES = [stage.name for stage in STAGES]


def test_the_funnel_order() -> None:
    assert NAMES == ["ingest", "normalize", "rules", "dedup", "align", "embed", "pair_score"]


@pytest.mark.parametrize("run", [FilterRun, RedecideRun, RefreshRun], ids=lambda c: c.__name__)
def test_every_run_kind_has_a_step_for_every_stage(run: type) -> None:
    missing = [name for name in NAMES if not callable(getattr(run, f"stage_{name}", None))]
    assert missing == []
    own = sorted(a.removeprefix("stage_") for a in dir(run) if a.startswith("stage_"))
    assert own == sorted(NAMES)  # no step that STAGES does not declare


@pytest.mark.parametrize("run", [FilterRun, RedecideRun], ids=lambda c: c.__name__)
def test_the_rows_go_through_the_steps_in_the_declared_order(run: type) -> None:
    seen: list[str] = []

    class Recording(run):  # type: ignore[misc, valid-type]
        pass

    for name in NAMES:
        setattr(Recording, f"stage_{name}",
                lambda self, rows, name=name: (seen.append(name), rows + [name])[1])
    job = Recording.__new__(Recording)  # no Spark: only the order is under test
    assert job.through_stages([]) == NAMES
    assert seen == NAMES

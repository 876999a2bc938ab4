"""jobs/lake/beside.py: work beside a job's own, in order, its error raised to whoever waits, and
never keeping a failed job from exiting."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from jobs.lake.beside import Beside

REPO = Path(__file__).resolve().parent.parent


def test_work_runs_in_order_and_waiting_returns_its_first_error() -> None:
    beside, done = Beside(), []
    gate = threading.Event()
    beside.submit(lambda: (gate.wait(5), done.append("open")))
    beside.submit(lambda: done.append("register"))
    assert beside.used() and done == [] and beside.failed_so_far() is None
    gate.set()
    assert beside.failure() is None and done == ["open", "register"]

    def refuse() -> None:
        raise ValueError("run id taken")

    beside.submit(refuse)
    beside.submit(lambda: done.append("after"))
    error = beside.failure()
    assert isinstance(error, ValueError) and done[-1] == "after"
    assert beside.failed_so_far() is error
    assert beside.failure() is error  # said again to every later caller


def test_held_work_waits_for_the_first_use_and_then_runs_first() -> None:
    # The filter job's catalog opening: held while the job numbers its input, started by the
    # run's registration (queued behind it) or by the first wait.
    beside, done = Beside(), []
    beside.hold(lambda: done.append("open"))
    time.sleep(0.2)
    assert beside.used() and done == [] and beside.failed_so_far() is None
    beside.submit(lambda: done.append("register"))
    assert beside.failure() is None and done == ["open", "register"]

    waited = Beside()
    waited.hold(lambda: done.append("opened by a wait"))
    assert waited.failure() is None and done[-1] == "opened by a wait"
    assert not Beside().used()


def test_the_worker_does_not_wait_for_itself() -> None:
    beside, seen = Beside(), []
    beside.submit(lambda: seen.append(beside.failure()))  # as a lake call inside the opening
    assert beside.failure() is None and seen == [None]


def test_a_job_failing_on_its_own_exits_without_waiting() -> None:
    seconds = 60  # the work beside would take this long (a commit lock held elsewhere)
    script = ("import time\nfrom jobs.lake.beside import Beside\nb = Beside()\n"
              f"b.submit(lambda: time.sleep({seconds}))\nraise SystemExit(2)\n")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, timeout=seconds)
    assert done.returncode == 2 and time.monotonic() - started < 10

"""Jobs sharing a lake (issue 24): commits and roll-forwards take the lake's commit lock one at a
time, a job never rolls forward a journal whose owner is alive, and a run's lease tells a live
run from a dead one (jobs/lake/lock.py CommitLock, RunLease; jobs/lake/store.py `Lake.exclusive`).
The other job is a real second process; a crash is SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from jobs.lake.lock import CommitLock, LakeBusy, RunLease, run_alive, run_lease

REPO = Path(__file__).resolve().parent.parent

# Another job mid-commit: it holds the commit lock with its journal written, applies for a
# while, then deletes its journal and lets go (or is killed before it does).
COMMITTING = """
import os, sys, time
from jobs.lake.lock import CommitLock
root, run_id, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
CommitLock(root).wait(run_id, 5)
journal = os.path.join(root, "journal", run_id + ".json")
os.makedirs(os.path.dirname(journal), exist_ok=True)
with open(journal, "w") as f:
    f.write("[]")
print("applying", flush=True)
time.sleep(seconds)
os.unlink(journal)
"""

LEASE = """
import sys, time
from jobs.lake.lock import RunLease
RunLease(sys.argv[1], sys.argv[2]).acquire(sys.argv[2])
print("held", flush=True)
time.sleep(600)
"""


def start(script: str, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", script, *args], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() in ("applying", "held")
    return proc


def test_a_commit_waits_its_turn_and_gives_up_after_its_timeout(tmp_path: Path) -> None:
    other = start(COMMITTING, str(tmp_path), "other", "1.5")
    try:
        with pytest.raises(LakeBusy, match="commit lock .* held by another job for over 0 s"):
            CommitLock(str(tmp_path)).wait("mine", 0.2)
        started = time.monotonic()
        lock = CommitLock(str(tmp_path))
        lock.wait("mine", 30)
        assert time.monotonic() - started >= 0.8  # it waited for the other's commit to end
        lock.release()
    finally:
        other.kill()
        other.wait()


def test_no_job_rolls_forward_a_journal_whose_owner_is_applying_it(spark, tmp_path: Path) -> None:
    """A second job opening the lake while the first applies its journal waits, and finds
    nothing to roll forward; a journal whose owner was killed is rolled forward."""
    from jobs.lake.store import Lake

    root = tmp_path / "lake"
    lake = Lake(spark, str(root), "locks_db")
    alive = start(COMMITTING, str(root), "alive", "1.5")
    try:
        assert lake.recover() == []  # without the lock: ["alive"], under its owner's feet
        assert not (root / "journal/alive.json").exists()
    finally:
        alive.kill()
        alive.wait()
    dead = start(COMMITTING, str(root), "dead", "600")
    os.kill(dead.pid, signal.SIGKILL)  # killed mid-commit: its journal stays, its lock goes
    dead.wait()
    assert json.loads((root / "journal/dead.json").read_text()) == []
    assert lake.recover() == ["dead"]


def test_a_run_lease_tells_a_live_run_from_a_dead_one(tmp_path: Path) -> None:
    root = str(tmp_path)
    holder = start(LEASE, root, "r-live")
    try:
        assert run_alive(root, "r-live") is True
        with pytest.raises(LakeBusy, match="run r-live is running in another job"):
            RunLease(root, "r-live").acquire("r-live")
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    assert run_alive(root, "r-live") is False  # killed: the kernel dropped its lease
    assert run_alive(root, "never-started") is False
    with run_lease(root, "mine"):
        assert run_alive(root, "mine") is True
    assert run_alive(root, "mine") is False
    assert not (tmp_path / "locks/runs/mine.lock").exists()  # a finished run leaves no file
    assert run_alive("hdfs://nn:8020/lake", "x") is None  # no leases on a remote lake


@pytest.mark.integration
def test_the_filter_job_reads_its_input_while_the_catalog_opens(tmp_path: Path) -> None:
    """Opening the catalog is off the critical path (jobs/lake/beside.py): with the lake's commit
    lock held elsewhere, so that the catalog cannot open, the filter job still reads its
    input and stages it; it registers and commits its run once the lock is free. And it
    leaves no directory of the Hive client's behind in its temp directory."""
    from tests.integration_helpers import BIN, JIT_OPTS, spark_env

    lake, tmp = tmp_path / "lake", tmp_path / "tmp"
    tmp.mkdir()
    lock = CommitLock(str(lake))
    lock.wait("another job", 5)
    data = REPO / "tests" / "data"
    job = subprocess.Popen(
        [str(BIN / "spark-submit"), "--master", "local[2]", str(REPO / "jobs/filter.py"),
         "--pair", "zh-en", "--corpus", "early", "--input", str(data / "tatoeba-zh-en.zh"),
         str(data / "tatoeba-zh-en.en"), "--lake", str(lake), "--run-id", "early"],
        cwd=REPO, env={**spark_env(), "TMPDIR": str(tmp),
                       "SPARK_SUBMIT_OPTS": f"{JIT_OPTS} -Djava.io.tmpdir={tmp}"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: list[str] = []
    staged = threading.Event()

    def read() -> None:
        for line in job.stdout:
            seen.append(line)
            if "ingest into bitext_raw zh-en/early: done" in line:
                staged.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert staged.wait(timeout=120), "".join(seen)[-3000:]  # while the lock is held
        assert not any("run early, lake" in line for line in seen)  # not registered yet
    finally:
        lock.release()
    job.wait(timeout=600)
    reader.join(timeout=60)
    out = "".join(seen)
    assert job.returncode == 0, out[-3000:]
    assert "committed run early" in out
    assert out.index("ingest into bitext_raw zh-en/early: done") < out.index("run early, lake")
    # Hive's session resources (jobs/lake/session.py hive_resources_dir): removed at exit.
    assert not [p.name for p in tmp.iterdir() if "_resources" in p.name or "sluice-hive" in p.name]

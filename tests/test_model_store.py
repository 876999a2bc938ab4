"""The lake's model store (jobs/lake/models.py `ModelStore`) when saves meet: two users saving
one name at once (two processes, the real commit lock), a save that fails while writing, and
the staging a killed save left behind. The store talks to the lake through a few file calls;
here they are served from a local directory (the Hadoop calls are exercised by the aligner
and pair_score tests, through a real lake)."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from jobs.kit.errors import ConfigError
from jobs.lake.lock import CommitLock
from jobs.lake.models import STAGING_STALE_S, PairScoreStore


class LocalLake:
    """The file calls a ModelStore makes, on a local directory; the commit lock is the one a
    local lake uses (flock on `<root>/locks/commit.lock`)."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)

    def read_text(self, path: str) -> str | None:
        return Path(path).read_text(encoding="utf-8") if Path(path).is_file() else None

    def write_text(self, path: str, text: str) -> None:
        Path(path).write_text(text, encoding="utf-8")

    def list_dir(self, path: str) -> list[str]:
        return [str(p) for p in Path(path).iterdir()] if Path(path).is_dir() else []

    def mkdirs(self, path: str) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)

    def delete(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def rename(self, src: str, dst: str) -> None:
        os.rename(src, dst)

    def list_modified(self, path: str) -> dict[str, float]:
        return {str(p): p.stat().st_mtime for p in Path(path).iterdir()} \
            if Path(path).is_dir() else {}

    def ready(self) -> None:  # no catalog work beside
        pass

    @contextmanager
    def exclusive(self, run_id: str) -> Iterator[None]:
        lock = CommitLock(self.root)
        lock.wait(run_id, 30)
        try:
            yield
        finally:
            lock.release()


def manifest_writer(lake: LocalLake, who: str, barrier=None):
    def write(staging: str) -> None:
        lake.mkdirs(staging)
        if barrier is not None:
            barrier.wait(30)  # both saves are past the "name is free" check
        lake.write_text(f"{staging}/manifest.json", json.dumps({"who": who}))
    return write


def save_as(root: Path, who: str, barrier, results) -> None:
    lake = LocalLake(root)
    try:
        PairScoreStore(lake, "en-is").save("crawl", manifest_writer(lake, who, barrier))
        results.put((who, "saved"))
    except ConfigError as e:
        results.put((who, str(e)))


def stagings(store: PairScoreStore) -> list[str]:
    return [p for p in os.listdir(store.root) if p.startswith(".staging-")]


def test_two_saves_of_one_name_at_once_keep_one_whole_model_and_refuse_the_other(tmp_path):
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    users = [ctx.Process(target=save_as, args=(tmp_path, who, barrier, results))
             for who in ("ana", "ben")]
    for p in users:
        p.start()
    for p in users:
        p.join(60)
    outcome = dict(results.get(timeout=5) for _ in users)
    winners = [who for who, said in outcome.items() if said == "saved"]
    assert len(winners) == 1, outcome
    loser = ({"ana", "ben"} - set(winners)).pop()
    assert "saved under" in outcome[loser] and "another run" in outcome[loser]
    store = PairScoreStore(LocalLake(tmp_path), "en-is")
    assert store.manifest("crawl") == {"who": winners[0]}  # the winner's, not overwritten
    assert store.names() == ["crawl"] and stagings(store) == []


def test_a_save_that_fails_while_writing_leaves_no_model_and_no_staging(tmp_path):
    lake = LocalLake(tmp_path)
    store = PairScoreStore(lake, "en-is")

    def broken(staging: str) -> None:
        lake.mkdirs(staging)
        lake.write_text(f"{staging}/weights.bin", "half")
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError):
        store.save("crawl", broken)
    assert not store.exists("crawl") and stagings(store) == []
    store.save("crawl", manifest_writer(lake, "retry"))  # the name is free for a retry
    assert store.manifest("crawl") == {"who": "retry"}


def test_dead_saves_stagings_are_removed_and_live_ones_kept(tmp_path):
    """Killed saves of this name and of another (whose name may never be saved again) go at
    the next save of any model of the pair, even one refused for its name."""
    lake = LocalLake(tmp_path)
    store = PairScoreStore(lake, "en-is")
    store.save("crawl", manifest_writer(lake, "first"))
    dead = [Path(store.root) / f".staging-{x}" for x in ("crawl-dead", "news-dead")]
    live = Path(store.root) / ".staging-crawl-live"
    for d in (*dead, live):
        d.mkdir(parents=True)
    old = time.time() - STAGING_STALE_S - 60
    for d in dead:
        os.utime(d, (old, old))
    with pytest.raises(ConfigError, match="already exists"):
        store.save("crawl", manifest_writer(lake, "again"))
    assert stagings(store) == [live.name]  # another save may still be writing there
    assert store.manifest("crawl") == {"who": "first"}


def test_a_saved_name_is_refused_before_any_work_unless_replaced(tmp_path):
    lake = LocalLake(tmp_path)
    store = PairScoreStore(lake, "en-is")
    store.save("crawl", manifest_writer(lake, "first"))
    wrote = []
    with pytest.raises(ConfigError, match="already exists"):
        store.save("crawl", lambda staging: wrote.append(staging))
    assert wrote == []  # refused before training
    store.save("crawl", manifest_writer(lake, "retried"), replace=True)
    assert store.manifest("crawl") == {"who": "retried"}

"""One refresh per lake at a time: a lock file in the lake, `<root>/locks/refresh.lock`; and
one job at a time on a local lake's embedded metastore, `<root>/locks/metastore.lock`.

A local lake (every process that opens it runs on this machine) is locked with flock(2) on
that file: the kernel releases the lock when its holder exits, however it exits, so a crashed
refresh never leaves the lake locked. The file holds who has it, for the refusal message.

A lake on HDFS or S3A is locked by creating the file (create without overwrite fails when it
exists). Its holder rewrites it every `heartbeat_s` seconds from a daemon thread and deletes
it on exit; a lock not rewritten for `stale_after_s` (its holder crashed, or its host went
away) is taken over. Two refreshes finding the same stale lock at the same instant could both
take it: the window is one delete-create, and the heartbeat thread gives up the lake (the
job stops before its commit) when it finds the file is no longer its own.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from jobs.kit.errors import EXIT_BUSY
from udfs.paths import is_local_path, local_path

BUSY_EXIT = EXIT_BUSY  # jobs/kit/errors.py: nothing was wrong, try again later


class LakeBusy(RuntimeError):
    """Another job holds a lock of the lake: nothing was done, try again later (BUSY_EXIT)."""


class MetastoreUnreachable(LakeBusy):
    """The lake's shared metastore does not answer: nothing was done, try again later."""


def holder_info(run_id: str | None, job: str | None = None) -> dict[str, Any]:
    info = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "run_id": run_id,
        "since": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if job is not None:
        info["job"] = job
    return info


def describe(info: str, path: str) -> str:
    try:
        who = json.loads(info)
        holder = f"run {who['run_id']} (pid {who['pid']} on {who['host']}, since {who['since']})"
    except (ValueError, KeyError, TypeError):
        holder = "another refresh"
    return f"the lake is being refreshed by {holder}: lock {path}; this refresh did nothing"


class LocalLock:
    """flock on a file of a local lake; released by the kernel when the process ends."""

    name = "refresh"

    def __init__(self, root: str) -> None:
        self.path = os.path.join(local_path(root), "locks", f"{self.name}.lock")
        self.fd: int | None = None

    def acquire(self, run_id: str | None, job: str | None = None) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            info = read_holder(fd)
            os.close(fd)
            raise LakeBusy(self.busy(info)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder_info(run_id, job)).encode(), 0)
        self.fd = fd

    def busy(self, info: str) -> str:
        return describe(info, self.path)

    def release(self) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            os.close(self.fd)  # closing drops the flock
            self.fd = None


def read_holder(fd: int) -> str:
    """The holder's JSON. It writes it just after taking the lock (truncate, then write): a
    second job arriving in that instant reads again rather than name no one."""
    info = ""
    for _ in range(20):
        info = os.pread(fd, 4096, 0).decode(errors="replace")
        try:
            json.loads(info)
            return info
        except ValueError:
            time.sleep(0.05)
    return info


class MetastoreLock(LocalLock):
    """One job at a time on a local lake whose catalog is the embedded Derby metastore.

    Derby admits one JVM; two jobs started together both found it free, and the second died
    after ~40 s of retries and thousands of lines. Taken before Spark starts and held for the
    process's life (the kernel drops it however the job ends); `spark-sql` shells do not take
    it (the Derby probe in jobs/lake/session.py still says when one has the metastore)."""

    name = "metastore"

    def busy(self, info: str) -> str:
        try:
            who = json.loads(info)
            run = f"run {who['run_id']} " if who.get("run_id") else ""
            holder = (f"{run}({who.get('job', 'a sluice job')}, pid {who['pid']} on "
                      f"{who['host']}, since {who['since']})")
        except (ValueError, KeyError, TypeError, AttributeError):
            holder = "another job"
        return (f"the lake's embedded metastore is in use by {holder}: lock {self.path}; this "
                "job did nothing: run it again when that one has finished (or give concurrent "
                "jobs a shared Hive metastore: --conf "
                "spark.hadoop.hive.metastore.uris=thrift://HOST:9083)")


HELD: dict[str, MetastoreLock] = {}  # this process's metastore locks, kept until it exits


def hold_metastore(root: str, run_id: str | None, job: str) -> None:
    """Take the metastore lock of the local lake at `root` for the rest of this process's
    life (a second call for the same lake is a no-op); LakeBusy if another process has it."""
    lock = MetastoreLock(root)
    if lock.path not in HELD:
        lock.acquire(run_id, job)
        HELD[lock.path] = lock


class CommitLock(LocalLock):
    """One commit or roll-forward at a time on a local lake (jobs/lake/store.py `Lake.commit`,
    `recover`). A job waits its turn rather than fail: commits take seconds. While a job
    applies its journal it holds this lock, so another job's `recover` cannot roll that
    journal forward under it; if the job dies, the kernel drops the lock and the next job
    rolls the journal forward, as before."""

    name = "commit"

    def wait(self, run_id: str, timeout_s: float) -> None:
        wait_for(lambda: self.acquire(run_id, "commit"), self.path, timeout_s)


def wait_for(acquire: Callable[[], None], path: str, timeout_s: float,
             poll_s: float = 0.1) -> None:
    """Call `acquire` until it stops raising LakeBusy; after `timeout_s`, one LakeBusy line."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return acquire()
        except LakeBusy:
            if time.monotonic() >= deadline:
                raise LakeBusy(f"the lake's commit lock {path} was held by another job for "
                               f"over {timeout_s:.0f} s; this job's commit did not start (its "
                               "run stays running: run it again)") from None
            time.sleep(poll_s)


class RunLease(LocalLock):
    """Held by a job for the life of its run (a lock file a run): a `running` run whose lease
    nobody holds died, whatever the metastore, so the next job marks it failed and gc removes
    what it staged; a live run on a shared metastore is left alone."""

    def __init__(self, root: str, run_id: str) -> None:
        super().__init__(root)
        self.path = os.path.join(local_path(root), "locks", "runs", f"{run_id}.lock")

    def busy(self, info: str) -> str:
        return f"run {os.path.basename(self.path)[:-5]} is running in another job: {info}"

    def release(self) -> None:
        if self.fd is not None:  # a finished run leaves no lock file behind
            os.unlink(self.path)
        super().release()

    def held_elsewhere(self) -> bool:
        """Whether another process holds this lease (never taken here: probe and drop)."""
        if not os.path.exists(self.path):
            return False
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
        except OSError:
            return True
        finally:
            os.close(fd)


LEASES: dict[str, RunLease] = {}  # the run leases this process holds now


@contextmanager
def run_lease(root: str, run_id: str) -> Iterator[None]:
    """Hold run `run_id`'s lease on a local lake while the run is this process's."""
    lease = RunLease(root, run_id) if is_local_path(root) else None
    if lease is None or lease.path in LEASES:
        yield
        return
    lease.acquire(run_id)
    LEASES[lease.path] = lease
    try:
        yield
    finally:
        del LEASES[lease.path]
        lease.release()


def run_alive(root: str, run_id: str) -> bool | None:
    """Whether run `run_id` is held by a live job: None where leases are not kept (a remote
    lake)."""
    if not is_local_path(root):
        return None
    lease = RunLease(root, run_id)
    return lease.path in LEASES or lease.held_elsewhere()


class RemoteLock:
    """A lock file created without overwrite, kept fresh by a heartbeat (HDFS, S3A)."""

    def __init__(self, lake: Any, heartbeat_s: float, stale_after_s: float,
                 name: str = "refresh") -> None:
        self.lake = lake
        self.path = f"{lake.root}/locks/{name}.lock"
        self.heartbeat_s, self.stale_after_s = heartbeat_s, stale_after_s
        self.content = ""
        self.lost = threading.Event()
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def _fs(self):
        return self.lake._fs(self.path)

    def _create(self) -> bool:
        """Create the lock file with our content; False when it exists."""
        path = self.lake._Path(self.path)
        try:
            out = self._fs().create(path, False)
        except Exception as err:  # FileAlreadyExistsException
            if "AlreadyExists" in str(err) or "exists" in str(err):
                return False
            raise
        out.write(bytearray(self.content.encode()))
        out.close()
        return True

    def _age_s(self) -> float:
        status = self._fs().getFileStatus(self.lake._Path(self.path))
        return time.time() - status.getModificationTime() / 1000

    def acquire(self, run_id: str) -> None:
        self.lake.mkdirs(f"{self.lake.root}/locks")
        self.content = json.dumps(holder_info(run_id))
        if not self._create():
            if self._age_s() < self.stale_after_s:
                raise LakeBusy(describe(self._holder(), self.path))
            self.lake.delete(self.path)  # stale: its holder stopped beating
            if not self._create():
                raise LakeBusy(describe(self._holder(), self.path))
        self.thread = threading.Thread(target=self._beat, daemon=True, name="lake-lock")
        self.thread.start()

    def _holder(self) -> str:
        """The holder's JSON. A heartbeat rewrites the file, which on some file systems
        (Hadoop's local one) is briefly empty or half written: read again rather than
        name no one."""
        info = ""
        for _ in range(20):
            info = self.lake.read_text(self.path) or ""
            try:
                json.loads(info)
                return info
            except ValueError:
                time.sleep(self.heartbeat_s / 10)
        return info

    def _beat(self) -> None:
        while not self.stop.wait(self.heartbeat_s) and self._beat_once():
            pass

    def _beat_once(self) -> bool:
        """Rewrite the lock (a new modification time); False once it is someone else's."""
        if self.lake.read_text(self.path) != self.content:
            self.lost.set()  # taken over: the job checks `lost` before it commits
            return False
        self.lake.write_text(self.path, self.content)
        return True

    def release(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
        if not self.lost.is_set() and self.lake.read_text(self.path) == self.content:
            self.lake.delete(self.path)


def local_lock(root: str) -> LocalLock | None:
    """The lock of a local lake, taken before Spark starts; None for a remote lake."""
    return LocalLock(root) if is_local_path(root) else None

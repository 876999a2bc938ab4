"""Work that runs in one thread beside a job's own and that whatever needs it waits for.

The filter job opens the lake's catalog (seconds: the Hive client, the metastore, rolling
forward interrupted commits) and registers its run while it already reads and numbers its
input, which needs neither; every catalog call of the lake waits for that work first
(jobs/lake.py `Lake.ready`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor


class Beside:
    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._futures: list[Future] = []
        self._worker: int | None = None

    def submit(self, work: Callable[[], None]) -> None:
        """Queue `work` after what is queued already (one thread: in order)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sluice-beside")

        def run() -> None:
            self._worker = threading.get_ident()
            work()

        self._futures.append(self._pool.submit(run))

    def busy(self) -> bool:
        """Whether work is queued or running (so more work should queue behind it)."""
        return any(not f.done() for f in self._futures)

    def failure(self) -> BaseException | None:
        """Wait for everything queued; the first error it raised, if any. From the worker
        thread itself: no wait (its own work is what is running)."""
        if threading.get_ident() == self._worker:
            return None
        for future in self._futures:
            if (error := future.exception()) is not None:
                return error
        return None
